/* Known cheat (driver_api_module): the sweep is lab 1's kernel (no shared memory), kept as PTX text
 * in a string and loaded at run time through the driver API, whose functions the file reaches by
 * cudaGetDriverEntryPointByVersion (cudaGetDriverEntryPoint before CUDA 12.5; no driver symbol is
 * linked): cuModuleLoadData, then cuLaunchKernel.  Its machine code is in no ELF of the program,
 * so no rule could read it.  What catches it: the symbol whitelist (neither entry-point query is
 * a call a launcher needs): forbidden in the static stage.  Were it allowed, the audit would find
 * a launched kernel the student's machine code lacks, which fails every rule that reads code. */
#include <cuda.h>
#include <cuda_runtime.h>

/* The versioned entry-point query came with CUDA 12.5; older toolkits have the plain one. */
#if CUDART_VERSION >= 12050
#define DRIVER_ENTRY(name, fn) cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, 0)
#else
#define DRIVER_ENTRY(name, fn) cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, 0)
#endif

#include "stencil_lab.h"

static const char ptx[] =
    ".version 9.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "	// .globl	fast\n"
    ".visible .entry fast(\n"
    "	.param .u64 fast_param_0,\n"
    "	.param .u64 fast_param_1,\n"
    "	.param .u32 fast_param_2,\n"
    "	.param .u32 fast_param_3,\n"
    "	.param .align 4 .b8 fast_param_4[20]\n"
    ")\n"
    "{\n"
    "	.reg .pred 	%p<11>;\n"
    "	.reg .f32 	%f<23>;\n"
    "	.reg .b32 	%r<14>;\n"
    "	.reg .b64 	%rd<19>;\n"
    "	ld.param.u64 	%rd7, [fast_param_0];\n"
    "	ld.param.u64 	%rd6, [fast_param_1];\n"
    "	ld.param.u32 	%r6, [fast_param_2];\n"
    "	ld.param.u32 	%r7, [fast_param_3];\n"
    "	ld.param.f32 	%f13, [fast_param_4+16];\n"
    "	ld.param.f32 	%f12, [fast_param_4+12];\n"
    "	ld.param.f32 	%f11, [fast_param_4+8];\n"
    "	ld.param.f32 	%f10, [fast_param_4+4];\n"
    "	ld.param.f32 	%f9, [fast_param_4];\n"
    "	cvta.to.global.u64 	%rd1, %rd7;\n"
    "	mov.u32 	%r8, %ntid.x;\n"
    "	mov.u32 	%r9, %ctaid.x;\n"
    "	mov.u32 	%r10, %tid.x;\n"
    "	mad.lo.s32 	%r1, %r9, %r8, %r10;\n"
    "	setp.ge.s32 	%p1, %r1, %r6;\n"
    "	@%p1 bra 	$L__BB0_6;\n"
    "	mov.u32 	%r13, %ctaid.y;\n"
    "	setp.ge.s32 	%p2, %r13, %r7;\n"
    "	@%p2 bra 	$L__BB0_6;\n"
    "	cvt.s64.s32 	%rd2, %r6;\n"
    "	cvt.s64.s32 	%rd3, %r1;\n"
    "	mov.u32 	%r3, %nctaid.y;\n"
    "	shl.b64 	%rd14, %rd2, 2;\n"
    "	cvta.to.global.u64 	%rd16, %rd6;\n"
    "$L__BB0_3:\n"
    "	add.s32 	%r11, %r6, -1;\n"
    "	setp.eq.s32 	%p3, %r1, %r11;\n"
    "	cvt.s64.s32 	%rd8, %r13;\n"
    "	mul.lo.s64 	%rd9, %rd8, %rd2;\n"
    "	add.s64 	%rd4, %rd9, %rd3;\n"
    "	setp.eq.s32 	%p4, %r13, 0;\n"
    "	setp.eq.s32 	%p5, %r1, 0;\n"
    "	or.pred  	%p6, %p5, %p4;\n"
    "	or.pred  	%p7, %p3, %p6;\n"
    "	add.s32 	%r12, %r7, -1;\n"
    "	setp.eq.s32 	%p8, %r13, %r12;\n"
    "	or.pred  	%p9, %p8, %p7;\n"
    "	shl.b64 	%rd10, %rd4, 2;\n"
    "	add.s64 	%rd5, %rd1, %rd10;\n"
    "	ld.global.nc.f32 	%f22, [%rd5];\n"
    "	@%p9 bra 	$L__BB0_5;\n"
    "	ld.global.nc.f32 	%f14, [%rd5+-4];\n"
    "	mul.f32 	%f15, %f10, %f14;\n"
    "	fma.rn.f32 	%f16, %f9, %f22, %f15;\n"
    "	ld.global.nc.f32 	%f17, [%rd5+4];\n"
    "	fma.rn.f32 	%f18, %f11, %f17, %f16;\n"
    "	sub.s64 	%rd11, %rd4, %rd2;\n"
    "	shl.b64 	%rd12, %rd11, 2;\n"
    "	add.s64 	%rd13, %rd1, %rd12;\n"
    "	ld.global.nc.f32 	%f19, [%rd13];\n"
    "	fma.rn.f32 	%f20, %f12, %f19, %f18;\n"
    "	add.s64 	%rd15, %rd5, %rd14;\n"
    "	ld.global.nc.f32 	%f21, [%rd15];\n"
    "	fma.rn.f32 	%f22, %f13, %f21, %f20;\n"
    "$L__BB0_5:\n"
    "	add.s64 	%rd18, %rd16, %rd10;\n"
    "	st.global.f32 	[%rd18], %f22;\n"
    "	add.s32 	%r13, %r13, %r3;\n"
    "	setp.lt.s32 	%p10, %r13, %r7;\n"
    "	@%p10 bra 	$L__BB0_3;\n"
    "$L__BB0_6:\n"
    "	ret;\n"
    "}\n"
    ;

typedef CUresult (*load_fn)(CUmodule *, const void *);
typedef CUresult (*get_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    static CUfunction fast;
    static launch_fn launch;
    if (!fast) {
        void *load = 0, *get = 0;
        DRIVER_ENTRY("cuModuleLoadData", &load);
        DRIVER_ENTRY("cuModuleGetFunction", &get);
        DRIVER_ENTRY("cuLaunchKernel", (void **)&launch);
        CUmodule module;
        ((load_fn)load)(&module, ptx);
        ((get_fn)get)(&fast, module, "fast");
    }
    void *args[] = {&d_in, &d_out, &nx, &ny, &c};
    const int blocks_y = ny < 65535 ? ny : 65535;
    launch(fast, (nx + 127) / 128, blocks_y, 1, 128, 1, 1, 0, (CUstream)stream, args, 0);
}
