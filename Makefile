# The stencil lab kit.  `make help` lists the targets.
#
#   make test                the kit's own tests; no GPU needed (installs Check and pytest
#                            when missing and run as root on Debian)
#   make check               grade every lab with IMPL=reference: the instructor's sanity check
#   make grade SUBMISSIONS=DIR [OUT=DIR]   grade a whole class
#   make tour                every reference on this GPU, as the seeds' optimisation table
#                            (and build/tour/path.png, path-roofline.png with matplotlib)
#   make calibrate           re-derive the performance targets on this GPU
#   make dist                the student kit (no reference/), as dist/stencil-lab-kit.tar.gz
#   make clean               remove build/ and dist/

SHELL := /bin/bash
PYTHON ?= python3
GRADE := $(PYTHON) grader/grade.py
LABS := $(sort $(patsubst labs/%/,%,$(wildcard labs/*/)))
# The top-level check grades the reference solutions where they exist (the kit),
# the starter code otherwise (the student kit has no reference/).
IMPL ?= $(if $(wildcard reference/.),reference,starter)
SUBMISSIONS ?=
OUT ?= grades

.PHONY: help test test-build test-unit test-python check build-labs grade tour calibrate dist clean

help:
	@sed -n '3,11p' Makefile | sed 's/^#//'
	@echo "  labs: $(LABS)"
	@echo "  in a lab directory: make check [IMPL=starter|reference|DIR] [SEED=N]; make sanitize; make help"

# ---- the kit's own tests (no GPU needed) --------------------------------------------
test:
	@test -d tests/unit || { echo "make test runs the kit's own tests, which the student kit does not ship"; exit 2; }
	@py=$$(bash tests/install-deps.sh | tail -n 1) && \
	  $(MAKE) --no-print-directory test-build test-unit test-python PYTEST_PYTHON="$$py"

# Every lab's starter and reference must compile (for the local GPU, or several
# architectures when there is none).
test-build:
	@set -e; for lab in $(LABS); do for impl in starter reference; do \
	  echo "== build $$lab IMPL=$$impl"; \
	  $(MAKE) --no-print-directory -s -C labs/$$lab build IMPL=$$impl; done; done

UNIT_BIN := build/tests/check_harness
test-unit: $(UNIT_BIN)
	@echo "== Check unit tests of the harness"
	@$(UNIT_BIN)

# The harness's C files include protocol.h, which the grader generates (grade.py protocol).
build/tests/protocol.h: grader/stencil_grader/base/protocol.py
	@mkdir -p $(dir $@)
	@$(GRADE) protocol > $@.tmp && mv $@.tmp $@

$(UNIT_BIN): tests/unit/check_harness.c grader/harness/*.c grader/include/*.h build/tests/protocol.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -fopenmp -Igrader/include -Ibuild/tests -I$${CUDA_HOME:-/usr/local/cuda}/include \
	  $$(pkg-config --cflags check) tests/unit/check_harness.c \
	  $(addprefix grader/harness/,errors.c random.c stats.c compare.c cpu_reference.c) \
	  -o $@ $$(pkg-config --libs check) -L$${CUDA_HOME:-/usr/local/cuda}/lib64 -lcudart -lm

test-python:
	@echo "== pytest: the grader, and the known submissions"
	@$(or $(PYTEST_PYTHON),$(PYTHON)) -m pytest -q -rs tests/python

# ---- grading ----------------------------------------------------------------------------
# Every lab built first, in parallel on the CPUs (the harness once, then the labs; a lab that
# fails to build is reported by the grading that follows), then graded one lab at a time, in
# lab order: the GPU stages never overlap.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check:
	@$(MAKE) --no-print-directory build-labs
	@$(GRADE) all --impl $(IMPL)

build-labs:
	@$(MAKE) --no-print-directory -s -C labs/$(firstword $(LABS)) harness IMPL=$(IMPL) >/dev/null
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(LABS:%=build-lab-%) >/dev/null 2>&1 || true

build-lab-%:
	@$(MAKE) --no-print-directory -s -C labs/$* build IMPL=$(IMPL)

grade:
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=DIR [OUT=DIR]  (DIR/<student>/<lab>/kernel.cu)"; exit 2; }
	@$(GRADE) class $(SUBMISSIONS) --out $(OUT)

tour:
	@mkdir -p build/tour
	@$(GRADE) tour --json build/tour/tour.json --plot build/tour/path.png

calibrate:
	@$(GRADE) calibrate

# ---- the student kit ----------------------------------------------------------------------
# The files git tracks (so no build output or local file slips in), without reference/, tests/
# and .ci/; the kit's README.md is replaced by the student kit's, grader/dist/README.md.
DIST_README := grader/dist/README.md
dist:
	@git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "make dist: not a git checkout:" \
	  "the student kit is made of the files git tracks; run it in a clone of the kit" >&2; exit 2; }
	@test -f $(DIST_README) || { echo "make dist: $(DIST_README) is missing" >&2; exit 2; }
	@mkdir -p dist
	@git ls-files | grep -v -e '^reference/' -e '^tests/' -e '^\.ci/' -e '^README\.md$$' -e '^grader/dist/' \
	  > dist/files.txt; echo $(DIST_README) >> dist/files.txt
	@test $$(wc -l < dist/files.txt) -gt 1 || { echo "make dist: git lists no file to ship" >&2; exit 2; }
	@tar czf dist/stencil-lab-kit.tar.gz --transform 's,^$(DIST_README)$$,README.md,' \
	  --transform 's,^,stencil-lab-kit/,' -T dist/files.txt
	@echo "wrote dist/stencil-lab-kit.tar.gz: $$(wc -l < dist/files.txt) files (no reference solutions," \
	  "no kit tests; README.md is $(DIST_README))"; rm -f dist/files.txt

clean:
	rm -rf build dist
