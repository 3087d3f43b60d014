"""Grading a class (grader/README.md, section 9, whose table names each module's part): plan -> the gradings -> one
class table -> the class files, whoever runs the gradings (this host's GPUs, or a batch engine on a cluster)."""
