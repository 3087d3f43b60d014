/*
 * launch_guard.c -- what a student's launcher asked the runtime for, so that a
 * launch the runtime refuses is reported as the student's launch, not as a
 * line of the harness (harness.h, "the student's launches").
 *
 * Every <<<grid, block, shared, stream>>> launch goes through nvcc's
 * __cudaPushCallConfiguration before the kernel's stub launches it.  lab.mk
 * links check and bench with `--wrap=__cudaPushCallConfiguration`, so that
 * the call reaches __wrap___cudaPushCallConfiguration below first, which notes
 * the configuration while a launcher runs and hands it on unchanged.  The
 * student's object cannot name __real_ or __wrap_ symbols (the grader's
 * symbol whitelist, symbols.py), so it cannot step around the note.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "harness.h"
#include "protocol.h"

/* The configurations one launcher call pushed (the first KEPT of them). */
enum { KEPT = 64 };
typedef struct {
    unsigned grid[3], block[3];
    size_t smem;
} launch_config;

static launch_config configs[KEPT];
static int nconfigs, recording;
static const char *current = "the launcher";

/* The runtime's own function, reached through the linker's --wrap; weak, so that a program
 * linked without the wrap (the harness's unit tests) still links: there the wrapper is never
 * called. */
extern unsigned __real___cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_mem,
                                                   struct CUstream_st *stream) __attribute__((weak));
unsigned __wrap___cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_mem,
                                            struct CUstream_st *stream);

unsigned __wrap___cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_mem,
                                            struct CUstream_st *stream)
{
    if (recording && nconfigs < KEPT) {
        launch_config *c = &configs[nconfigs++];
        c->grid[0] = grid.x; c->grid[1] = grid.y; c->grid[2] = grid.z;
        c->block[0] = block.x; c->block[1] = block.y; c->block[2] = block.z;
        c->smem = shared_mem;
    }
    return __real___cudaPushCallConfiguration(grid, block, shared_mem, stream);
}

void harness_launcher_begin(const char *launcher)
{
    current = launcher;
    nconfigs = 0;
    recording = 1;
    (void)cudaGetLastError();  /* nothing of the harness's own is charged to the launcher */
}

int harness_launch_breaks(const harness_launch_limits *lim, const unsigned grid[3], const unsigned block[3],
                          size_t smem, char *why, size_t n)
{
    static const char axis[3] = { 'x', 'y', 'z' };
    unsigned long long threads = 1;
    for (int d = 0; d < 3; d++) {
        if (grid[d] == 0 || block[d] == 0) {
            snprintf(why, n, "%s.%c is 0", grid[d] == 0 ? "gridDim" : "blockDim", axis[d]);
            return 1;
        }
        if (grid[d] > (unsigned)lim->grid[d]) {
            snprintf(why, n, "gridDim.%c = %u is more than the %d this GPU allows", axis[d], grid[d],
                     lim->grid[d]);
            return 1;
        }
        if (block[d] > (unsigned)lim->block[d]) {
            snprintf(why, n, "blockDim.%c = %u is more than the %d this GPU allows", axis[d], block[d],
                     lim->block[d]);
            return 1;
        }
        threads *= block[d];
    }
    if (threads > (unsigned long long)lim->threads) {
        snprintf(why, n, "%llu threads per block are more than the %d this GPU allows", threads, lim->threads);
        return 1;
    }
    if (smem > (size_t)lim->smem_optin) {
        snprintf(why, n, "%zu bytes of dynamic shared memory per block are more than the %d this GPU has "
                 "for a block", smem, lim->smem_optin);
        return 1;
    }
    if (smem > (size_t)lim->smem_default) {
        snprintf(why, n, "%zu bytes of dynamic shared memory per block are more than the %d a block gets "
                 "unless cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...) "
                 "raised it", smem, lim->smem_default);
        return 1;
    }
    return 0;
}

static void device_limits(harness_launch_limits *lim)
{
    static const enum cudaDeviceAttr grid[3] = { cudaDevAttrMaxGridDimX, cudaDevAttrMaxGridDimY,
                                                 cudaDevAttrMaxGridDimZ };
    static const enum cudaDeviceAttr block[3] = { cudaDevAttrMaxBlockDimX, cudaDevAttrMaxBlockDimY,
                                                  cudaDevAttrMaxBlockDimZ };
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    for (int d = 0; d < 3; d++) {
        CUDA_CHECK(cudaDeviceGetAttribute(&lim->grid[d], grid[d], dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&lim->block[d], block[d], dev));
    }
    CUDA_CHECK(cudaDeviceGetAttribute(&lim->threads, cudaDevAttrMaxThreadsPerBlock, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&lim->smem_default, cudaDevAttrMaxSharedMemoryPerBlock, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&lim->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
}

/* The runtime's answers to a configuration it would not launch. */
static int refused(cudaError_t err)
{
    return err == cudaErrorInvalidConfiguration || err == cudaErrorInvalidValue ||
           err == cudaErrorLaunchOutOfResources;
}

void harness_launcher_end(cudaStream_t stream, int sync)
{
    const cudaError_t err = cudaGetLastError();
    recording = 0;
    if (err == cudaSuccess) {
        const cudaError_t ran = sync ? cudaStreamSynchronize(stream) : cudaSuccess;
        if (ran != cudaSuccess)
            harness_fail("CUDA error: a kernel of %s failed while running: %s (%s)", current,
                         cudaGetErrorString(ran), cudaGetErrorName(ran));
        return;
    }
    if (!refused(err) || nconfigs == 0)
        harness_fail("CUDA error: a kernel launch of %s failed: %s (%s)", current, cudaGetErrorString(err),
                     cudaGetErrorName(err));
    harness_launch_limits lim;
    device_limits(&lim);
    char why[256];
    const launch_config *c = &configs[0];
    int found = 0;
    for (int i = 0; i < nconfigs && !found; i++)
        if (harness_launch_breaks(&lim, configs[i].grid, configs[i].block, configs[i].smem, why, sizeof why))
            c = &configs[i], found = 1;
    if (!found)
        snprintf(why, sizeof why, "it breaks no grid or block limit, so the kernel's registers times its threads "
                 "may be more than a multiprocessor has (cudaFuncGetAttributes: maxThreadsPerBlock)%s",
                 nconfigs > 1 ? "; the configuration shown is the first of its launches" : "");
    harness_fail(LAUNCH_REFUSED " %s asked for a kernel launch of %u x %u x %u blocks of %u x %u x %u threads "
                 "and %zu bytes of dynamic shared memory, and the runtime refused it (%s): %s",
                 current, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2], c->smem,
                 cudaGetErrorName(err), why);
}
