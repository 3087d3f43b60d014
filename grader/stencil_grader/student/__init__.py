"""What a student runs beside make check, never part of a grade: `make profile` (profile/) and lab 7's
`make solve` (solve.py); shipped in the student kit (grader/README.md, the package's layers)."""
