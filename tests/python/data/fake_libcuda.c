/* A fake libcuda.so.1 for the probe's tests (base/gpuprobe.py): just the driver API calls the
 * probe makes.  The environment says what it pretends:
 *   FAKE_CUDA         0 a good GPU; 1 cuInit finds no device; 2 the kernel faults; 3 it writes a wrong answer
 *   FAKE_CUDA_DRIVER  the CUDA release the driver supports, cuDriverGetVersion's 13000 (default)
 *   FAKE_CUDA_CC      the compute capability without the dot, 90 (default)
 *   FAKE_CUDA_NAME    the device name, "Fake GPU 80GB" (default)
 *   FAKE_CUDA_COMPUTE_MODE  the compute mode, 0 (default; 2: exclusive process) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char *name, int fallback) { const char *v = getenv(name); return v ? atoi(v) : fallback; }
static int mode(void) { return env_int("FAKE_CUDA", 0); }
int cuInit(unsigned f) { return mode() == 1 ? 100 : 0; }
int cuGetErrorName(int rc, const char **s) { *s = rc == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_X"; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *s, int n, int d) {
    const char *name = getenv("FAKE_CUDA_NAME");
    strncpy(s, name ? name : "Fake GPU 80GB", n);
    return 0;
}
int cuDeviceGetUuid_v2(unsigned char *u, int d) { for (int i = 0; i < 16; i++) u[i] = (unsigned char)(i * 17); return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) {
    const int cc = env_int("FAKE_CUDA_CC", 90);
    *v = a == 75 ? cc / 10 : a == 76 ? cc % 10 : a == 38 ? 50 << 20           /* major, minor, L2 bytes */
       : a == 20 ? env_int("FAKE_CUDA_COMPUTE_MODE", 0) : 0;

    return 0;
}
int cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_DRIVER", 13000); return 0; }
int cuDeviceTotalMem_v2(size_t *bytes, int d) { *bytes = (size_t)80 << 30; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)1; return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuModuleLoadData(void **m, const void *img) { *m = strstr((const char *)img, ".entry stencil_probe") ? (void *)2 : 0; return *m ? 0 : 218; }
int cuModuleGetFunction(void **f, void *m, const char *name) { *f = (void *)3; return strcmp(name, "stencil_probe") ? 500 : 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)calloc(1, n); return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *stream, void **params, void **extra) {
    uint64_t dptr = *(uint64_t *)params[0];
    if (mode() == 2) return 700;
    *(uint32_t *)(uintptr_t)dptr = mode() == 3 ? 7 : 1234567;
    return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { memcpy(dst, (void *)(uintptr_t)src, n); return 0; }
int cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
int cuModuleUnload(void *m) { return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { return 0; }
