"""The shared base: lab specs, problem kinds, the C/Python protocol, running programs, the sandbox,
GPU locks.  Nothing here knows about grading policy; everything else in the package may use it."""
