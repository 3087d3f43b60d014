/* errors.c -- CUDA error checking and the pluggable failure handler. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "harness.h"
#include "protocol.h"

static void default_handler(const char *message)
{
    fprintf(stderr, "%s\n", message);
    exit(EXIT_CUDA_ERROR);
}

static harness_error_handler current_handler = default_handler;

void harness_set_error_handler(harness_error_handler handler)
{
    current_handler = handler ? handler : default_handler;
}

void harness_fail(const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    current_handler(message);
    abort(); /* a handler must not return */
}

void harness_cuda_check(cudaError_t err, const char *call, const char *file, int line)
{
    if (err != cudaSuccess)
        harness_fail("CUDA error: %s failed at %s:%d: %s (%s)", call, file, line,
                     cudaGetErrorString(err), cudaGetErrorName(err));
}

void harness_check_launch(cudaStream_t stream, int sync, const char *file, int line)
{
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        harness_fail("CUDA error: kernel launch failed at %s:%d: %s (%s)", file, line,
                     cudaGetErrorString(err), cudaGetErrorName(err));
    if (sync) {
        err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess)
            harness_fail("CUDA error: kernel failed while running (checked at %s:%d): %s (%s)",
                         file, line, cudaGetErrorString(err), cudaGetErrorName(err));
    }
}
