# The top-level `make check`: one file for the kit's Makefile and the student kit's
# (grader/dist/Makefile), which both include it.  The includer sets GRADE (the grader's
# command line), LABS (the lab folders' names, in order) and IMPL; it may add prerequisites
# to check (the student kit's require-impl).
#
# The GPU and its driver are checked first (grade.py preflight: a refusal stops here, before any
# build).  Every lab is built then, in parallel on the CPUs (the harness once, then the labs; a lab
# that fails to build is reported by the grading that follows), then graded one lab at a
# time, in lab order: the GPU stages never overlap.

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: check build-labs

check:
	@$(GRADE) preflight
	@$(MAKE) --no-print-directory build-labs
	@$(GRADE) all --impl $(IMPL) --no-preflight

build-labs:
	@$(MAKE) --no-print-directory -s -C labs/$(firstword $(LABS)) harness IMPL=$(IMPL) >/dev/null
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(LABS:%=build-lab-%) >/dev/null 2>&1 || true

build-lab-%:
	@$(MAKE) --no-print-directory -s -C labs/$* build IMPL=$(IMPL)
