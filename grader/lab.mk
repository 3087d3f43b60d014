# lab.mk -- the one make fragment every lab includes.
#
# A lab's Makefile is:
#     LAB := 01-naive-5pt
#     include ../../grader/lab.mk
#
# Variables you may set on the command line:
#   IMPL=starter|reference|DIR  whose kernel.cu is built (default: starter).  DIR is a
#                               directory holding DIR/<lab>/kernel.cu or DIR/kernel.cu;
#                               a relative DIR is taken from the lab directory.
#   CUDA_ARCH=90                compute capability(ies) to build for, e.g. "80 90" (machine
#                               code), or compute_75 (PTX only, compiled by the driver at load);
#                               default: the local GPU's, or several when there is none
#   CUDA_HOME=/usr/local/cuda-12.9  the CUDA toolkit (default: nvcc on PATH, else /usr/local/cuda)
#   SEED=N                      replay the random inputs of an earlier `make check`
#   DEBUG=1                     -G -O0 device code for cuda-gdb (never timed)
#   BUILD_DIR=...               where the binaries go (default: build/<lab>/<impl>)
#   KERNEL_DEFINES="-DTUNE_K=8"  -D macros for the lab's kernel.cu only; for IMPL=reference the
#                               default comes from labs/<lab>/tuning/<this GPU>.json (make tune)
#   N=33  REDUCTION=1e-5        lab 7's `make solve`: the grid (N x N) and the residual reduction

SHELL := /bin/bash
, := ,
# make splits paths at spaces: the kit must lie in a path without one (the grader refuses such a
# kit as well, and copies a student's kernel.cu into its own build folder before calling make).
ifneq ($(words $(CURDIR)),1)
$(error this lab folder, "$(CURDIR)", has a space in its path, which make cannot take: move the kit to a path without spaces)
endif
KIT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
LAB_DIR := $(KIT)/labs/$(LAB)
LAB_NUMBER := $(firstword $(subst -, ,$(LAB)))
PYTHON ?= python3
GRADE := $(PYTHON) $(KIT)/grader/grade.py

# ---- the CUDA toolchain and the target architecture --------------------------------
# One finder for make and the grader (grader/stencil_grader/base/toolkit.py): NVCC when set,
# else CUDA_HOME/bin/nvcc when CUDA_HOME is set, else nvcc on PATH, else /usr/local/cuda/bin/nvcc.
# It prints "NVCC CUDA_HOME RELEASE ROW" ("-" for what it did not find; ROW: the release's row of
# toolkits.mk, 12.0 for CUDA 12.4).
TOOLKIT := $(shell NVCC='$(NVCC)' CUDA_HOME='$(CUDA_HOME)' $(PYTHON) $(KIT)/grader/stencil_grader/base/toolkit.py make)
NVCC := $(filter-out -,$(word 1,$(TOOLKIT)))
CUDA_HOME := $(filter-out -,$(word 2,$(TOOLKIT)))
CUDA_RELEASE := $(filter-out -,$(word 3,$(TOOLKIT)))
CUDA_ROW := $(filter-out -,$(word 4,$(TOOLKIT)))
CUDA_MAJOR := $(firstword $(subst ., ,$(CUDA_RELEASE)))
CC ?= cc
# CUPTI (the bench's launch audit) ships with the toolkit, in one of these places.
CUPTI_INC := $(patsubst %/cupti.h,%,$(firstword $(wildcard $(CUDA_HOME)/extras/CUPTI/include/cupti.h \
               $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/targets/*/include/cupti.h)))
CUPTI_LIB := $(patsubst %/libcupti.so,%,$(firstword $(wildcard $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so \
               $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/lib/libcupti.so $(CUDA_HOME)/targets/*/lib/libcupti.so)))

# The architectures each toolkit release supports (ARCHS_CUDA12.0, ..., ARCHS_NO_GPU).
include $(KIT)/grader/toolkits.mk

ifeq ($(origin CUDA_ARCH),undefined)
CUDA_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
                     | head -n 1 | tr -d ' .')
endif
# CUDA_ARCH is written as digits (90, "80 90"; 90a, 100f for arch-specific features; compute_75 for
# PTX alone): sm_90 or 9.0 would reach nvcc as sm_sm_90 and read as a compile error of the student's file.
_ARCH_STEM = $(patsubst %a,%,$(patsubst %f,%,$(patsubst compute_%,%,$(1))))
_NO_DIGITS = $(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst 8,,$(subst 9,,$(1)))))))))))
_ARCH_OK = $(if $(call _ARCH_STEM,$(1)),$(if $(call _NO_DIGITS,$(call _ARCH_STEM,$(1))),,1))
BAD_ARCH := $(firstword $(foreach a,$(CUDA_ARCH),$(if $(call _ARCH_OK,$(a)),,$(a))))
ifneq ($(BAD_ARCH),)
_ARCH_HINT := $(subst .,,$(subst sm_,,$(BAD_ARCH)))
$(error CUDA_ARCH=$(CUDA_ARCH): write the compute capability as digits, CUDA_ARCH=$(if $(call _ARCH_OK,$(_ARCH_HINT)),$(_ARCH_HINT),90) (not sm_90 or 9.0; compute_90 is PTX alone))
endif
# CUDA_ARCH words: 90 is machine code (SASS) for sm_90; compute_90 is PTX alone, which the
# driver compiles when the program loads (on any GPU of 9.0 or later).  Without a compute_
# word, PTX of the last architecture is added.  Architectures below the toolkit's oldest are
# left out, with one line saying why.
TOOLKIT_ARCHS := $(ARCHS_CUDA$(CUDA_ROW))
ifneq ($(strip $(CUDA_ARCH)),)
ifneq ($(TOOLKIT_ARCHS),)
ARCH_TOO_OLD := $(strip $(foreach a,$(CUDA_ARCH),$(if $(shell test $(call _ARCH_STEM,$(a)) -lt $(firstword $(TOOLKIT_ARCHS)) && echo x),$(a))))
ifneq ($(ARCH_TOO_OLD),)
ifndef MAKE_RESTARTS
$(info lab.mk: $(strip $(addprefix sm_,$(patsubst compute_%,%,$(ARCH_TOO_OLD)))) left out: CUDA $(CUDA_RELEASE) builds for compute capability $(firstword $(TOOLKIT_ARCHS)) and later ($(ARCHS_CUDA$(CUDA_MAJOR)_BELOW)))
endif
ifeq ($(strip $(filter-out $(ARCH_TOO_OLD),$(CUDA_ARCH))),)
$(error lab.mk: no architecture left to build for: set CUDA_ARCH to one of $(TOOLKIT_ARCHS), or CUDA_HOME to a toolkit that supports yours)
endif
endif
endif
endif
BUILD_ARCHS := $(filter-out $(ARCH_TOO_OLD),$(CUDA_ARCH))
ifeq ($(strip $(BUILD_ARCHS)),)
# No GPU here: machine code for ARCHS_NO_GPU (Turing, Ampere, Hopper), plus PTX that later GPUs
# compile when they load the program.
GENCODE := $(foreach a,$(ARCHS_NO_GPU),-gencode arch=compute_$(a),code=sm_$(a)) \
           -gencode arch=compute_$(lastword $(ARCHS_NO_GPU)),code=compute_$(lastword $(ARCHS_NO_GPU))
PTX_ARCH := $(firstword $(ARCHS_NO_GPU))
ARCH_TAG := multi
else
ARCH_NUMBERS := $(patsubst compute_%,%,$(BUILD_ARCHS))
GENCODE := $(foreach a,$(BUILD_ARCHS),$(if $(filter compute_%,$(a)),-gencode arch=$(a)$(,)code=$(a),-gencode arch=compute_$(a)$(,)code=sm_$(a))) \
           $(if $(filter compute_%,$(BUILD_ARCHS)),,-gencode arch=compute_$(lastword $(BUILD_ARCHS)),code=compute_$(lastword $(BUILD_ARCHS)))
PTX_ARCH := $(firstword $(ARCH_NUMBERS))
ARCH_TAG := sm$(subst compute_,ptx,$(subst $(eval) ,-,$(strip $(BUILD_ARCHS))))
endif

# ---- whose kernel.cu ---------------------------------------------------------------
# IMPL=DIR and BUILD_DIR reach recipes and $(shell ...) as they are: they are yours on your own
# command line, and the grader's own folders when it builds a student's file (grading/build.py
# copies that kernel.cu into BUILD_DIR/src/<lab>/ first): no student's folder name reaches make.
IMPL ?= starter
# The student kit (`make dist`) has no reference/: there IMPL=reference is refused by
# require-src, and its tuning (KERNEL_DEFINES, below) is not looked up: `grade.py tune` is an
# instructor command (grader/stencil_grader/instructor/tune.py), which that kit leaves out.
HAVE_REFERENCE := $(if $(wildcard $(KIT)/reference/.),1)
NO_REFERENCE_MSG := this student kit has no reference solutions: make check grades your own kernel.cu (IMPL=starter, the default, or IMPL=DIR)
ifeq ($(IMPL),starter)
SRC := $(KIT)/starter/$(LAB)/kernel.cu
IMPL_TAG := starter
else ifeq ($(IMPL),reference)
SRC := $(if $(HAVE_REFERENCE),$(KIT)/reference/$(LAB)/kernel.cu)
IMPL_TAG := reference
ifneq ($(HAVE_REFERENCE),1)
KERNEL_DEFINES :=
endif
else
SRC := $(firstword $(wildcard $(abspath $(IMPL))/$(LAB)/kernel.cu $(abspath $(IMPL))/kernel.cu))
# The one rule naming an IMPL=DIR build directory: dir- and DIR's absolute path with its
# slashes as underscores (grader/stencil_grader/grading/pipeline.py impl_tag() follows it).
IMPL_TAG := dir-$(subst /,_,$(patsubst /%,%,$(abspath $(IMPL))))
endif

# Where a missing kernel.cu's near misses are looked for (Kernel.cu, kernel.cu.txt, kernel (1).cu).
SRC_FOLDERS := $(if $(filter starter reference,$(IMPL)),$(KIT)/$(IMPL)/$(LAB),$(abspath $(IMPL))/$(LAB) $(abspath $(IMPL)))
BUILD_DIR ?= $(KIT)/build/$(LAB)/$(IMPL_TAG)
# One harness library per toolkit and architecture list: another CUDA_HOME builds its own.
HARNESS_DIR := $(KIT)/build/harness/cuda$(or $(CUDA_RELEASE),-unknown)-$(ARCH_TAG)$(if $(filter 1,$(DEBUG)),-debug)
HARNESS_LIB := $(HARNESS_DIR)/libharness.a
# This lab's part of the harness (its lab_config.h and .mk, its case table, the Check runner, the case driver,
# the bench, its problem kind): the same for every kernel.cu, so built once per toolkit and architecture list
# beside the harness library, and copied into each build of the lab.
LAB_OBJ_DIR := $(HARNESS_DIR)/labs/$(LAB)

# ---- flags -------------------------------------------------------------------------
ifeq ($(DEBUG),1)
DEVICE_OPT := -G -O0 -g -DSTENCIL_DEBUG_BUILD
else
DEVICE_OPT := -O3 -lineinfo
endif
INCLUDES := -I$(KIT)/grader/include -I$(HARNESS_DIR) -I$(CUDA_HOME)/include $(if $(CUPTI_INC),-I$(CUPTI_INC))
NVFLAGS := -std=c++17 $(DEVICE_OPT) $(GENCODE) $(INCLUDES) -Xcompiler -Wall
# A case table may leave out trailing fields (lab_case.mode): no warning for that.
CFLAGS_KIT := -std=c11 -O2 -g -Wall -Wextra -Wno-missing-field-initializers -fopenmp $(INCLUDES) $(if $(filter 1,$(DEBUG)),-DSTENCIL_DEBUG_BUILD)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
LDLIBS_KIT := -Xcompiler -fopenmp
BENCH_LIBS := -L$(CUPTI_LIB) -lcupti -Xlinker -rpath=$(CUPTI_LIB)
# nvcc links the CUDA runtime statically, from the toolkit's libcudart_static.a.  A toolkit
# without one (laid out from Debian's compiler and PyPI's runtime: tests/cuda-toolkit.sh) links
# its libcudart.so, found again at run time through the programs' RUNPATH; never a static runtime
# of another toolkit that the linker's default folders hold.  No program of the kit launches
# kernels from the device (dynamic parallelism is refused), so none links the device runtime
# (-cudadevrt none): such a toolkit has no libcudadevrt.a, and another toolkit's would not do.
CUDART_LIB := $(firstword $(patsubst %/libcudart.so,%,$(wildcard $(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib/libcudart.so)))
CUDART_LINK := $(if $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a $(CUDA_HOME)/lib/libcudart_static.a \
                 $(CUDA_HOME)/targets/*/lib/libcudart_static.a),,$(if $(CUDART_LIB),-cudart shared -L$(CUDART_LIB) -Xlinker -rpath=$(abspath $(CUDART_LIB)))) -cudadevrt none

# Everything in BUILD_DIR is rebuilt when the flags change (another CUDA_ARCH, DEBUG=1):
# flags.stamp is rewritten only when its content would differ.
FLAGS_STAMP := $(BUILD_DIR)/flags.stamp
# KERNEL_DEFINES reach kernel.o and kernel.ptx only.  `grade.py tune` passes each variant's;
# for IMPL=reference, when not given, they are this GPU's best from `make tune` (grade.py tune
# --print-defines), none without a tuning file: the file's own defaults.  In flags.stamp too.
ifneq ($(filter-out clean help print-build-dir,$(or $(MAKECMDGOALS),all)),)
ifeq ($(origin KERNEL_DEFINES)$(IMPL),undefinedreference)
KERNEL_DEFINES := $(shell $(GRADE) tune --print-defines $(LAB) || echo TUNING_ERROR)
ifneq ($(filter TUNING_ERROR,$(KERNEL_DEFINES)),)
$(error labs/$(LAB)/tuning: the message above says what is wrong; pass KERNEL_DEFINES= for the defaults)
endif
endif
endif
ifneq ($(filter-out clean print-build-dir,$(or $(MAKECMDGOALS),all)),)
$(shell mkdir -p $(BUILD_DIR) && echo '$(NVFLAGS) $(CFLAGS_KIT) $(KERNEL_DEFINES)' | cmp -s - $(FLAGS_STAMP) \
        || echo '$(NVFLAGS) $(CFLAGS_KIT) $(KERNEL_DEFINES)' > $(FLAGS_STAMP))
# What this lab's lab.json and its problem kind (grader/kinds.json) say, for make: LAB_API,
# KIND_SOURCES, KIND_HAS_SOLVER.  The grader writes it (make remakes it, then rereads this file).
include $(LAB_OBJ_DIR)/lab_config.mk
endif
LABSPEC_PY := $(addprefix $(KIT)/grader/stencil_grader/,base/labspec.py base/kinds.py) $(KIT)/grader/kinds.json

.PHONY: all build check sanitize clean help print-build-dir require-src require-nvcc require-check require-cupti
all: build

help:
	@echo "make check       build, then grade IMPL=$(IMPL) (correctness, then bandwidth)"
	@echo "make build       only build $(BUILD_DIR)/{check,bench}"
	@echo "make sanitize    compute-sanitizer memcheck and racecheck on the small cases"
	@echo "make profile     why your kernel is slow: Nsight Compute's counters, ranked findings (no grade)"
	$(if $(filter 1,$(KIND_HAS_SOLVER)),@echo "make solve       run your Jacobi solver on the model Poisson problem [N=33 (an N x N grid)] [REDUCTION=1e-5]")
	@echo "make clean       remove this lab's build directory, build/$(LAB)"
	@echo "make print-build-dir   print where this build goes (BUILD_DIR; the handouts' ptxas.log, kernel.ptx, report.json)"
	@echo "variables: IMPL=starter|$(if $(HAVE_REFERENCE),reference|)DIR  SEED=N  CUDA_ARCH=90  DEBUG=1  BUILD_DIR=DIR"

# ---- grading -----------------------------------------------------------------------
check: require-src
	@$(GRADE) lab $(LAB_DIR) --impl $(IMPL) --build-dir $(BUILD_DIR) $(if $(SEED),--seed $(SEED))

# compute-sanitizer on every case but the large grids, in one process (CK_FORK=no).  Both
# tools always run; the target fails when either reports an error or a case fails.
sanitize: build
	@command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found (it ships with the CUDA toolkit)"; exit 1; }
	@status=0; for tool in memcheck racecheck; do \
	  echo "== compute-sanitizer --tool $$tool ($(LAB), IMPL=$(IMPL), small grids)"; \
	  SEED=$(or $(SEED),1) CK_FORK=no CK_EXCLUDE_TAGS=large \
	    compute-sanitizer --tool $$tool --error-exitcode 1 $(BUILD_DIR)/check || status=1; done; \
	  exit $$status

# Nsight Compute (ncu) on the bench grid, the student's kernels only: figures and a ranked
# diagnosis from grader/profile_rules.json (grader/stencil_grader/student/profile/).  Never a grade.
.PHONY: profile
profile: require-src
	@$(GRADE) profile $(LAB_DIR) --impl $(IMPL) --build-dir $(BUILD_DIR) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(KIT)/build/$(LAB)

print-build-dir:
	@echo $(BUILD_DIR)

# Lab 7: the student's jacobi_sweep and residual_norm2 on the model Poisson problem, through
# `bench --solve N`; grader/stencil_grader/student/solve.py prints the convergence and, with
# matplotlib, draws BUILD_DIR/solve.png.
.PHONY: solve require-solver
solve: require-solver build
	@$(GRADE) solve $(BUILD_DIR) $(if $(N),--n $(N)) $(if $(REDUCTION),--reduction $(REDUCTION))

require-solver:
	@test "$(KIND_HAS_SOLVER)" = 1 || { echo "make solve: this lab has no solver (lab 7 has: labs/07-reduction-residual)" >&2; exit 2; }

# ---- building ----------------------------------------------------------------------
build: require-src require-nvcc require-check require-cupti $(BUILD_DIR)/check $(BUILD_DIR)/bench $(BUILD_DIR)/kernel.ptx

require-src:
	@$(if $(filter reference,$(IMPL)),$(if $(HAVE_REFERENCE),,echo "error: IMPL=reference: $(NO_REFERENCE_MSG)" >&2; exit 2))
	@test -n "$(SRC)" -a -f "$(SRC)" || { near=$$(for d in $(SRC_FOLDERS); do find "$$d" -maxdepth 1 -type f \( -iname 'kernel*' -o -iname '*.cu' \) -printf '%f\n' 2>/dev/null; done | sort -u | paste -sd '|' | sed 's/|/, /g'); \
	  echo "error: IMPL=$(IMPL): no kernel.cu found (looked for $(if $(filter starter reference,$(IMPL)),$(SRC),$(abspath $(IMPL))/$(LAB)/kernel.cu and $(abspath $(IMPL))/kernel.cu))$${near:+; found $$near: the file must be named kernel.cu}" >&2; exit 2; }

require-nvcc:
	@test -n "$(NVCC)" || { echo "kit error: no CUDA compiler: $$(NVCC='$(NVCC)' CUDA_HOME='$(CUDA_HOME)' $(PYTHON) $(KIT)/grader/stencil_grader/base/toolkit.py why)" >&2; exit 2; }

require-cupti:
	@test -n "$(CUPTI_INC)" -a -n "$(CUPTI_LIB)" || { echo "kit error: CUPTI (cupti.h, libcupti.so), which the CUDA toolkit ships and the bench's launch audit needs, was not found under $(CUDA_HOME) (set CUDA_HOME to the toolkit's folder)" >&2; exit 2; }

require-check:
	@pkg-config --exists check || { echo "kit error: the Check unit-testing library is not installed (the machine's, not the kernel's fault): on Debian or Ubuntu run 'sudo apt-get install check', on Fedora 'sudo dnf install check-devel', on macOS 'brew install check'" >&2; exit 2; }

$(BUILD_DIR) $(HARNESS_DIR) $(LAB_OBJ_DIR):
	mkdir -p $@

# Every file of LAB_OBJ_DIR is written under a name of its own (the shell's pid) and renamed into place:
# builds of one lab may run at once (a class, make tune), and each sees a whole file or none.
$(LAB_OBJ_DIR)/lab_config.h: $(LAB_DIR)/lab.json $(LABSPEC_PY) | $(LAB_OBJ_DIR)
	$(GRADE) config $< > $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

$(LAB_OBJ_DIR)/lab_config.mk: $(LAB_DIR)/lab.json $(LABSPEC_PY)
	@mkdir -p $(LAB_OBJ_DIR)
	@$(GRADE) config --make $< > $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

# The student's file: ptxas -v reports registers, shared memory and spills per kernel
# (ptxas.log).  What nvcc says besides that report, its warnings and errors, goes to nvcc.log
# and to the terminal: the one filter of the report (grading/build.py reads nvcc.log).
$(BUILD_DIR)/kernel.o: $(SRC) $(KIT)/grader/include/stencil_lab.h $(FLAGS_STAMP) | $(BUILD_DIR)
	@echo "nvcc $(notdir $(SRC)) ($(IMPL))"
	@$(NVCC) $(NVFLAGS) $(KERNEL_DEFINES) -Xptxas -v -c $< -o $@ 2> $(BUILD_DIR)/ptxas.log; status=$$?; \
	  grep -v -E '^(ptxas info|    [0-9]+ bytes)' $(BUILD_DIR)/ptxas.log > $(BUILD_DIR)/nvcc.log; \
	  cat $(BUILD_DIR)/nvcc.log >&2; exit $$status

$(BUILD_DIR)/kernel.ptx: $(SRC) $(KIT)/grader/include/stencil_lab.h $(FLAGS_STAMP) | $(BUILD_DIR)
	@$(NVCC) -std=c++17 $(DEVICE_OPT) -arch=compute_$(PTX_ARCH) $(INCLUDES) $(KERNEL_DEFINES) -ptx $< -o $@

HEADERS := $(wildcard $(KIT)/grader/include/*.h) $(HARNESS_DIR)/protocol.h

# The per-lab objects: the Check runner, the case driver and the bench program read the
# lab's lab_config.h.
$(LAB_OBJ_DIR)/%.o: $(KIT)/grader/harness/%.c $(LAB_OBJ_DIR)/lab_config.h $(HEADERS) | $(LAB_OBJ_DIR)
	$(CC) $(CFLAGS_KIT) $(CHECK_CFLAGS) -I$(LAB_OBJ_DIR) -c $< -o $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

$(LAB_OBJ_DIR)/check_$(LAB_NUMBER).o: $(LAB_DIR)/check_$(LAB_NUMBER).c $(LAB_OBJ_DIR)/lab_config.h $(HEADERS) | $(LAB_OBJ_DIR)
	$(CC) $(CFLAGS_KIT) $(CHECK_CFLAGS) -I$(LAB_OBJ_DIR) -c $< -o $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

# The lab's problem kind (lab_kind.h): the sources grader/kinds.json names for it, under
# grader/harness/kinds/ (C, or CUDA C for a kind with GPU code of its own).  They are the only
# harness files that call the student's launchers.
$(LAB_OBJ_DIR)/kind_%.o: $(KIT)/grader/harness/kinds/%.c $(LAB_OBJ_DIR)/lab_config.h $(HEADERS) | $(LAB_OBJ_DIR)
	$(CC) $(CFLAGS_KIT) -I$(LAB_OBJ_DIR) -c $< -o $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

$(LAB_OBJ_DIR)/kind_%.o: $(KIT)/grader/harness/kinds/%.cu $(LAB_OBJ_DIR)/lab_config.h $(HEADERS) | $(LAB_OBJ_DIR)
	$(NVCC) $(NVFLAGS) -I$(LAB_OBJ_DIR) -c $< -o $@.$$$$.tmp.o && mv -f $@.$$$$.tmp.o $@

KIND_OBJS := $(foreach f,$(KIND_SOURCES),kind_$(basename $(f)).o)
LAB_OBJS := check_$(LAB_NUMBER).o check_runner.o bench.o bench_main.o lab_driver.o $(KIND_OBJS)

# A build links copies of them, so that its directory holds every object its programs are made of; copied again
# when the flags change (DEBUG=1, another CUDA_ARCH: another LAB_OBJ_DIR), whatever the two files' times.
$(addprefix $(BUILD_DIR)/,$(LAB_OBJS)): $(BUILD_DIR)/%.o: $(LAB_OBJ_DIR)/%.o $(FLAGS_STAMP) | $(BUILD_DIR)
	@cp -f $< $@

# Every <<<...>>> launch's configuration passes through the harness on its way to the runtime
# (harness/launch_guard.c), so that a refused launch names the student's launcher and what it asked for.
LAUNCH_WRAP := -Xlinker --wrap=__cudaPushCallConfiguration

# Both programs link the timed run (bench.c): check runs it after its cases in the grader's runs.
$(BUILD_DIR)/check: $(addprefix $(BUILD_DIR)/,check_$(LAB_NUMBER).o check_runner.o bench.o lab_driver.o $(KIND_OBJS)) $(BUILD_DIR)/kernel.o $(HARNESS_LIB)
	$(NVCC) $(GENCODE) $(LAUNCH_WRAP) $(CUDART_LINK) -o $@ $^ $(LDLIBS_KIT) $(CHECK_LIBS) $(BENCH_LIBS)

$(BUILD_DIR)/bench: $(addprefix $(BUILD_DIR)/,bench_main.o bench.o lab_driver.o $(KIND_OBJS)) $(BUILD_DIR)/kernel.o $(HARNESS_LIB)
	$(NVCC) $(GENCODE) $(LAUNCH_WRAP) $(CUDART_LINK) -o $@ $^ $(LDLIBS_KIT) $(BENCH_LIBS)

# ---- the harness library, once per architecture -------------------------------------
# The lab-independent part: inputs, CPU references, comparison, the device side, the private
# channel and its JSON, the launch audit (CUPTI, linked by the programs that time) and the launch guard.
HARNESS_C := errors random stats compare cpu_reference channel audit launch_guard
HARNESS_OBJS := $(HARNESS_C:%=$(HARNESS_DIR)/%.o) $(HARNESS_DIR)/device.o

# What check, bench and the grader agree on (exit statuses, JSON keys), from protocol.py.
$(HARNESS_DIR)/protocol.h: $(KIT)/grader/stencil_grader/base/protocol.py | $(HARNESS_DIR)
	@$(GRADE) protocol > $@.$$$$.tmp && mv -f $@.$$$$.tmp $@

$(HARNESS_DIR)/%.o: $(KIT)/grader/harness/%.c $(HEADERS) | $(HARNESS_DIR)
	$(CC) $(CFLAGS_KIT) -c $< -o $@

$(HARNESS_DIR)/device.o: $(KIT)/grader/harness/device.cu $(HEADERS) | $(HARNESS_DIR)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(HARNESS_LIB): $(HARNESS_OBJS)
	ar rcs $@ $^

# The harness alone, with this lab's part (the top-level `make check` builds it once before building the labs
# in parallel; a class grading, before its builds).
.PHONY: harness
harness: require-nvcc require-check $(HARNESS_LIB) $(addprefix $(LAB_OBJ_DIR)/,$(LAB_OBJS))
