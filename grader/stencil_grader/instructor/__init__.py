"""The instructor's tools, left out of the student kit (`make dist`): the optimisation tour and the
calibration of the targets, the tuning of the references, the recorded runs and the handouts'
measured figures, pictures and diagrams.  They may use the student's commands (student/), which
never use them."""
