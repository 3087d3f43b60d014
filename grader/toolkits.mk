# The CUDA toolkits the kit supports: per major release, the GPU architectures it builds for
# (compute capabilities without the dot, 75 = 7.5, oldest first) and the oldest driver it runs
# on.  This is the one list: lab.mk includes this file, the grader reads it
# (stencil_grader/base/toolkit.py), and `make test` builds every lab for every architecture of
# each toolkit it has (the build matrix).
#
# From NVIDIA's release notes, compute capability 7.0 up to 12.0:
#   CUDA 12.9  Volta 7.0 (V100), Xavier 7.2, Turing 7.5, Ampere 8.0 8.6 8.7, Ada 8.9, Hopper 9.0,
#              Blackwell 10.0 10.1 10.3 12.0
#   CUDA 13.0  the same from Turing 7.5 on (Volta and Xavier are no longer supported), Thor's
#              10.1 renamed 11.0, and 8.8 added
# A GPU below its toolkit's first entry cannot run what that toolkit builds: the probe refuses
# it before any build, and lab.mk leaves such an architecture out of CUDA_ARCH with one line.
ARCHS_CUDA12 := 70 72 75 80 86 87 89 90 100 101 103 120
ARCHS_CUDA12_BELOW := Maxwell and Pascal (5.x, 6.x) are below the kit's minimum
ARCHS_CUDA13 := 75 80 86 87 88 89 90 100 103 110 120
ARCHS_CUDA13_BELOW := Volta (7.0) and Xavier (7.2) need CUDA 12

# The oldest Linux driver of each release (NVIDIA's CUDA Toolkit release notes, table 3): a
# driver below it cannot run what the toolkit builds; the probe names both and the fix.
DRIVER_CUDA12 := 525.60.13
DRIVER_CUDA13 := 580.65.06

# Without a GPU (and without CUDA_ARCH), a build holds machine code for these, plus PTX of the
# last one, which the driver of a later GPU compiles when it loads the program.
ARCHS_NO_GPU := 75 80 90
