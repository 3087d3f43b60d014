# The CUDA toolkits the kit supports: per release row, the GPU architectures it builds for
# (compute capabilities without the dot, 75 = 7.5, oldest first); per major release, the oldest
# driver it runs on.  This is the one list: lab.mk includes this file, the grader reads it
# (stencil_grader/base/toolkit.py), and `make test` builds every lab for every architecture of
# each toolkit it has (the build matrix).
#
# A row ARCHS_CUDA<release> holds from that release up to the next row of the same major
# (CUDA 12.4 takes ARCHS_CUDA12.0's).  From NVIDIA's release notes and `nvcc --list-gpu-code`,
# compute capability 7.0 up to 12.0:
#   CUDA 12.0  Volta 7.0 (V100), Xavier 7.2, Turing 7.5, Ampere 8.0 8.6 8.7, Ada 8.9, Hopper 9.0
#              (12.4's nvcc, built by `make test`, lists exactly these)
#   CUDA 12.8  Blackwell 10.0 10.1 12.0 added
#   CUDA 12.9  Blackwell 10.3 added
#   CUDA 13.0  from Turing 7.5 on (Volta and Xavier are no longer supported), Thor's 10.1
#              renamed 11.0, and 8.8 added
# Older than the first row: CUDA 11.8 (Debian bookworm's nvcc 11.8.89) does not build the kit:
# the bench's launch audit reads CUPTI's CUpti_ActivityKernel9, which 11.8's CUPTI lacks, and
# 11.8 refuses a host gcc newer than 11 (README.md, Requirements).
# A GPU outside its toolkit's row cannot run what that toolkit builds: the preflight names the
# release that builds for it, and lab.mk leaves an architecture below the row out of CUDA_ARCH
# with one line.
ARCHS_CUDA12.0 := 70 72 75 80 86 87 89 90
ARCHS_CUDA12.8 := 70 72 75 80 86 87 89 90 100 101 120
ARCHS_CUDA12.9 := 70 72 75 80 86 87 89 90 100 101 103 120
ARCHS_CUDA12_BELOW := Maxwell and Pascal (5.x, 6.x) are below the kit's minimum
ARCHS_CUDA13.0 := 75 80 86 87 88 89 90 100 103 110 120
ARCHS_CUDA13_BELOW := Volta (7.0) and Xavier (7.2) need CUDA 12

# The oldest Linux driver of each major release (NVIDIA's CUDA Toolkit release notes, table 3):
# a driver below it cannot run what the toolkit builds; the probe names both and the fix.
DRIVER_CUDA12 := 525.60.13
DRIVER_CUDA13 := 580.65.06

# Without a GPU (and without CUDA_ARCH), a build holds machine code for these, plus PTX of the
# last one, which the driver of a later GPU compiles when it loads the program.
ARCHS_NO_GPU := 75 80 90
