"""What a student runs beside make check, never part of a grade: `make profile` (profile/: why a
kernel is slow, from Nsight Compute's counters or, without them, from its PTX and launch) and lab
7's `make solve` (solve.py: the student's Jacobi solver on the model Poisson problem).  It ships in
the student kit (`make dist`); the instructor's tools (instructor/) may use it, never the reverse."""
