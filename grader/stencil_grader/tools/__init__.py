"""Tools around the grader: the optimisation tour and calibration of the targets, lab 7's solver,
and the other commands a self-learner or an instructor runs by hand."""
