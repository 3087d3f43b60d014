"""The instructor's tools, left out of the student kit (`make dist`): tour, calibration, tuning, recorded
runs and the handouts' figures, pictures and diagrams (grader/README.md, the package's layers)."""
