// codegen/cg_target.h — the target interface of codegen. Private to codegen/.
//
// A target is a struct of capability data and function pointers (as QBE's Target, Glow's
// Backend, tinygrad's Renderer), never an #ifdef: what differs between the host CPU and a GPU
// sits behind it, and a new target is a new folder (codegen/x86/, codegen/nvptx/) holding one
// cg_target. The lowering that is the same for every target (elementwise, shape ops, the
// train-step structure) is shared and asks the target through c->target: the kernel ABI and
// parallel index model (cg_kernel_begin / cg_kernel_end), math functions (cg_libm1 / cg_libm2),
// vector widths. Per-target op families (GEMM, convolution, pooling, normalisation, reductions,
// losses) live in the target's folder (codegen/x86/x86_linalg.c, x86_nn.c, x86_grad_nn.c,
// x86_reduce.c, x86_loss.c: register-tiled loops sized by vector_width) and are reached through
// the target's lower_node: x86-64 lowers every op; NVPTX reuses the same hooks at vector width 1
// (correct, not yet GPU-shaped: cuBLASLt and block reductions are issue 14).
//
// Flow (cg_compile.c): make_machine -> every node through lower_node (kernels opened and closed
// through kernel_begin / kernel_end) -> the plan (plan.c) -> finish_module (plan globals on
// x86-64; libdevice linked on NVPTX) -> verify, optimise -> package (an ELF .so with the plan
// inside on x86-64; PTX text on NVPTX).
#ifndef CG_TARGET_H
#define CG_TARGET_H

#include "dl_cg.h"

#include <llvm-c/Core.h>

typedef struct cg cg;
typedef struct cg_kernel cg_kernel;

// How a kernel invocation learns which part of its parallel range [0, range) it computes.
typedef enum cg_index_model {
    // Host: void k(ptr args, i64 begin, i64 end); a worker thread calls it for a sub-range
    // [begin, end) and the kernel loops over it (any partition gives the same bytes).
    CG_INDEX_HOST_RANGE,
    // GPU grid: the same parameters, one index per thread, i = begin + ctaid.x * ntid.x +
    // tid.x, computed only when i < end (the kernel's range becomes [i, i + 1)).
    CG_INDEX_GPU_GRID,
} cg_index_model;

// What compilation produces.
typedef enum cg_packaging {
    CG_PACKAGE_ELF_SO,       // kernels and plan linked into an ELF shared object (+ trailer)
    CG_PACKAGE_DEVICE_IMAGE, // device code for a driver to load (PTX text today)
} cg_packaging;

typedef struct cg_target {
    const char *name; // "x86-64", "nvptx"
    cg_index_model index_model;
    cg_packaging packaging;

    // Checks the user's options for this target (CPU and feature names); on failure writes a
    // one-line reason naming the value and returns DL_ERR_INVALID_ARG.
    DL_NODISCARD dl_status (*options_check)(const dl_cg_options *o, char *err, size_t err_size);
    // The target description recorded in the plan and printed by `dlcc -v`:
    // "x86_64-pc-linux-gnu/skylake-avx512", "nvptx64-nvidia-cuda/sm_80". No LLVM target
    // initialisation (the warm cache path uses it).
    void (*describe)(const dl_cg_options *o, char *buf, size_t size);
    // The target's part of the cache key: every target input that changes the code (triple,
    // CPU, the exact feature string), as a heap string the caller frees; NULL when out of
    // memory. Cheap, like describe.
    char *(*key_part)(const dl_cg_options *o);
    // Creates c->tm for checked options, sets the module's triple and data layout and c->isa
    // (the DLRT_ISA_* bits the code needs).
    DL_NODISCARD dl_status (*make_machine)(cg *c, const dl_cg_options *o);
    // Elements of dtype t in one vector register the kernels are tiled for (1: scalar code per
    // thread). x86-64: 512 bits with AVX-512F, 256 with AVX2 and FMA, else 128.
    int64_t (*vector_width)(const cg *c, dl_dtype t);
    // A float function of the C math library by its libm name ("erff", "powf"): a libm call on
    // x86-64, libdevice's __nv_* on NVPTX. Builds the call at the builder's position.
    LLVMValueRef (*math1)(cg *c, const char *name, LLVMValueRef a);
    LLVMValueRef (*math2)(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b);
    // Kernel ABI. kernel_begin adds the function `name` with the kernel signature
    // void(ptr args, i64 begin, i64 end), its entry block, and sets k->fn, k->args and the
    // range this invocation computes, [k->begin, k->end) (the index model above); the builder
    // is left where the body goes. kernel_end closes the function (ret void; an entry mark).
    void (*kernel_begin)(cg *c, cg_kernel *k, const char *name);
    void (*kernel_end)(cg *c, cg_kernel *k);
    // Lowers one node: the shared families plus this target's own. Refuses, with a diagnostic
    // and DL_ERR_UNSUPPORTED, an op the target has no lowering for.
    DL_NODISCARD dl_status (*lower_node)(cg *c, const dl_ir_node *n);
    // After lowering and the plan, before verification and optimisation: what the module needs
    // beyond its kernels (x86-64: the plan and kernel table as globals; NVPTX: libdevice, when
    // a kernel calls it).
    DL_NODISCARD dl_status (*finish_module)(cg *c, const uint8_t *plan, size_t plan_len);
    // Packaging, from the optimised module: on DL_OK *out (malloc'd) holds the output bytes.
    DL_NODISCARD dl_status (*package)(cg *c, const dl_cg_options *o, uint8_t **out,
                                      size_t *out_len);
} cg_target;

// The targets (x86/x86_target.c, nvptx/nvptx_target.c).
extern const cg_target dl_cg__x86_64_target;
extern const cg_target dl_cg__nvptx_target;

// The target `o` selects (o->target NULL, "" or "x86-64": x86-64), or NULL when the name is
// not one dl_cg_compile builds for (dl_cg_options_check says why).
const cg_target *dl_cg__target_of(const dl_cg_options *o);

#endif
