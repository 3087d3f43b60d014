# The stencil lab kit.  `make help` lists the targets.
#
#   make test                the kit's own tests; no GPU needed (installs Check and pytest
#                            when missing and run as root on Debian)
#   make check               grade every lab with IMPL=reference: the instructor's sanity check
#   make grade SUBMISSIONS=DIR [OUT=DIR]   grade a whole class
#   make bench-class [STUDENTS=N] [GPUS=all] [SLUG=h100]   class-grading throughput per stage on a made-up
#                            class (SLUG: what each lab's stages use, for grade.py slurm)
#   make tour                every reference on this GPU, as the seeds' optimisation table
#                            (and build/tour/path.png, path-roofline.png with matplotlib)
#   make calibrate           re-derive the performance targets on this GPU
#   make record SLUG=h100    make tour and make check, recorded in handouts/data/SLUG/ for the figures
#   make smem-roof [SLUG=h100]  this GPU's shared-memory roof (bytes per clock per SM), which lab 8's
#                            roofline draws; SLUG records it in handouts/data/SLUG/smem-roof.json
#   make ebisu EBISU=PATH [SLUG=h100]  EBISU (ICS 2023), built from a copy of its repository at PATH, timed
#                            beside lab 8's reference; SLUG records it in handouts/data/SLUG/ebisu.json
#   make figures             rewrite the handouts' measured figures from handouts/data/ and draw
#                            their diagrams from the labs' constants (no GPU)
#   make pictures            redraw the handouts' PNG plots from handouts/data/ (matplotlib)
#   make tune [LAB=NN]       sweep the references' parameters on this GPU; the best goes to
#                            labs/NN-slug/tuning/<gpu>.json, which the references' builds use
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

.PHONY: help test test-build test-unit test-python cuda12 grade bench-class tour calibrate record figures smem-roof ebisu pictures dist clean

help:
	@sed -n '3,23p' Makefile | sed 's/^#//'
	@echo "  labs: $(LABS)"
	@echo "  in a lab directory: make check [IMPL=starter|reference|DIR] [SEED=N]; make sanitize; make help"

# ---- the kit's own tests (no GPU needed) --------------------------------------------
test:
	@test -d tests/unit || { echo "make test runs the kit's own tests, which the student kit does not ship"; exit 2; }
	@py=$$(bash tests/install-deps.sh | tail -n 1) && \
	  $(MAKE) --no-print-directory test-build test-unit cuda12 test-python PYTEST_PYTHON="$$py"

# CUDA 12.4 (Debian's nvcc, PyPI's runtime, headers and CUPTI) laid out in build/cuda/12.4, the
# downloads kept in build/cuda/cache, for the build matrix (tests/python/test_toolkits.py builds
# every lab with each toolkit for each architecture of its release in grader/toolkits.mk).
# Without network the matrix's CUDA 12 tests are skipped, saying why.
cuda12:
	@bash tests/cuda-toolkit.sh 12.4 build/cuda

# Every lab's starter and reference must compile (for the local GPU, or several
# architectures when there is none).
test-build:
	@set -e; for lab in $(LABS); do for impl in starter reference; do \
	  echo "== build $$lab IMPL=$$impl"; \
	  $(MAKE) --no-print-directory -s -C labs/$$lab build IMPL=$$impl; done; done

# The CUDA toolkit: grader/stencil_grader/base/toolkit.py finds it, for lab.mk and here alike
# (NVCC, else CUDA_HOME, else nvcc on PATH, else /usr/local/cuda); "NVCC CUDA_HOME MAJOR".
TOOLKIT := $(shell NVCC='$(NVCC)' CUDA_HOME='$(CUDA_HOME)' $(PYTHON) grader/stencil_grader/base/toolkit.py make)
CUDA_HOME := $(filter-out -,$(word 2,$(TOOLKIT)))

UNIT_BIN ?= build/tests/check_harness
test-unit: $(UNIT_BIN)
	@echo "== Check unit tests of the harness"
	@$(UNIT_BIN)

# The harness's C files include protocol.h, which the grader generates (grade.py protocol).
build/tests/protocol.h: grader/stencil_grader/base/protocol.py
	@mkdir -p $(dir $@)
	@$(GRADE) protocol > $@.tmp && mv $@.tmp $@

$(UNIT_BIN): tests/unit/check_harness.c grader/harness/*.c grader/include/*.h build/tests/protocol.h
	@test -n "$(CUDA_HOME)" || { echo "kit error: no CUDA toolkit: $$($(PYTHON) grader/stencil_grader/base/toolkit.py why)" >&2; exit 2; }
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -fopenmp -Igrader/include -Ibuild/tests -I$(CUDA_HOME)/include \
	  $$(pkg-config --cflags check) tests/unit/check_harness.c \
	  $(addprefix grader/harness/,errors.c random.c stats.c compare.c cpu_reference.c launch_guard.c) \
	  -o $@ $$(pkg-config --libs check) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(abspath $(CUDA_HOME))/lib64 -lcudart -lm

# cuobjdump from PyPI when the toolkit has none (tests/install-deps.sh)
PYPI_CUOBJDUMP = $(firstword $(wildcard build/cuobjdump/nvidia/*/bin/cuobjdump))
test-python:
	@echo "== pytest: the grader, and the known submissions"
	@$(if $(PYPI_CUOBJDUMP),CUOBJDUMP=$(abspath $(PYPI_CUOBJDUMP))) $(or $(PYTEST_PYTHON),$(PYTHON)) -m pytest -q -rs tests/python

# ---- grading ----------------------------------------------------------------------------
include grader/check.mk

# The two folders reach the grader through the environment, so that the shell never parses them
# (a space or a quote in an instructor's path is taken as it is).  GNU make exits 2 whenever a
# recipe fails (its manual, "Running make": only 0, 1 with -q, and 2): the grader's own status
# (1: a lab without a grade; 2: a refusal) is printed on the last line.
grade: export STENCIL_SUBMISSIONS := $(value SUBMISSIONS)
grade: export STENCIL_OUT := $(value OUT)
grade:
	@test -n "$$STENCIL_SUBMISSIONS" || { echo "usage: make grade SUBMISSIONS=DIR [OUT=DIR]  (DIR/<student>/<lab>/kernel.cu)"; exit 2; }
	@$(GRADE) class "$$STENCIL_SUBMISSIONS" --out "$$STENCIL_OUT" || { status=$$?; \
	  echo "make grade: grade.py class exited with status $$status (1: some lab has no grade, see summary.txt; 2: refused, see above)" >&2; exit $$status; }

# Class-grading throughput: STUDENTS students made of the known submissions, graded by grade.py class
# on this host's GPUs (GPUS=all or 0,2); prints builds per CPU core-minute and submission-labs per
# GPU-minute (tests/submissions/bench_class.py; BENCH_JSON=FILE keeps the figures).  SLUG=h100 also
# records what each lab's stages used in handouts/data/h100/class.json, which grade.py slurm turns into
# its jobs' --time, --mem and --cpus-per-task.
STUDENTS ?= 8
bench-class:
	@test -f tests/submissions/bench_class.py || { echo "make bench-class needs the kit's tests/, which the student kit does not ship"; exit 2; }
	@$(PYTHON) tests/submissions/bench_class.py --students $(STUDENTS) $(if $(GPUS),--gpus $(GPUS)) $(if $(BENCH_JSON),--json $(BENCH_JSON)) $(if $(SLUG),--record handouts/data/$(SLUG)/class.json)

tour:
	@mkdir -p build/tour
	@$(GRADE) tour --json build/tour/tour.json --plot build/tour/path.png

calibrate:
	@$(GRADE) calibrate

# The recorded runs the handouts' figures come from (handouts/data/README.md): the tour and a full
# grading of the references on this GPU, kept as handouts/data/$(SLUG)/tour.json and check.json
# (the grading's points may be short: the record says so), and the tour's two pictures in handouts/img/.
record:
	@test -n "$(SLUG)" || { echo "usage: make record SLUG=h100  (the folder under handouts/data/; the handouts quote h100 and h200)"; exit 2; }
	@mkdir -p build/tour handouts/data/$(SLUG) && rm -f build/tour/path.png build/tour/path-roofline.png
	@$(GRADE) tour --json handouts/data/$(SLUG)/tour.json --plot build/tour/path.png
	@$(MAKE) --no-print-directory check IMPL=reference || true
	@$(GRADE) record-check handouts/data/$(SLUG)/check.json --impl reference
	@$(GRADE) pictures --slug $(SLUG) || true
	@echo "recorded handouts/data/$(SLUG)/: now run make figures"

figures:
	@$(GRADE) figures

smem-roof:
	@$(GRADE) smem-roof $(if $(SLUG),--json handouts/data/$(SLUG)/smem-roof.json)

ebisu:
	@test -n "$(EBISU)" || { echo "usage: make ebisu EBISU=PATH [SLUG=h100]  (PATH: a copy of github.com/neozhang307/EBISU-ICS23)" >&2; exit 2; }
	@$(GRADE) ebisu --src "$(EBISU)" $(if $(SLUG),--json handouts/data/$(SLUG)/ebisu.json)

# The PNG pictures of the handouts, redrawn from the recorded runs (matplotlib; no GPU).
pictures:
	@$(GRADE) pictures

# MAKEFLAGS emptied: LAB=NN must not reach the labs' own builds (lab.mk's LAB) through it.
tune:
	@MAKEFLAGS= $(GRADE) tune $(if $(LAB),--lab $(LAB))

# ---- the student kit ----------------------------------------------------------------------
# grader/dist/pack.sh says what ships: the tracked files without reference/, tests/ and .ci/,
# with the student kit's own README.md and Makefile (grader/dist/), and the Markdown files'
# instructor-only blocks left out.
dist:
	@bash grader/dist/pack.sh dist/stencil-lab-kit.tar.gz

clean:
	rm -rf build dist
