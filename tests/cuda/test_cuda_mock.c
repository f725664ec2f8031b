// tests/cuda/test_cuda_mock.c — libdlrt's CUDA device (runtime/rt_device_cuda.c) against the mock
// driver of mock_cuda.c (DLRT_LIBCUDA), on a machine without a GPU: everything but the kernels'
// execution. A model (argv[1], a sample with a train block) is compiled for cuda:sm_80 and for
// the CPU; then
//   - a CUDA session is made (the driver found, the PTX module loaded, every kernel found by
//     name, the argument table placed on the "GPU");
//   - every param, copied back from device memory, has the bytes a CPU session initialises it to
//     (the staging of param initialisers through copies), and set_param / get_param round-trip;
//   - infer and train_step launch exactly the plan's kernels of their entry point, each with the
//     kernel ABI's three parameters on a grid covering its range (checked by the mock);
//   - a checkpoint saved from the CUDA session loads into a CPU session with the same params;
//   - destroying the session frees every allocation, the module, the stream and the context;
//   - a driver that cannot JIT the PTX gives DLRT_ERR_UNSUPPORTED with its log, leaking nothing.
// Usage: test_cuda_mock MODEL.dlg LIBMOCKCUDA.so
#include "dl_base.h"
#include "dl_check.h"
#include "dlcc.h"
#include "dlrt.h"
#include "rt_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct mock_stats {
    long allocs_live, ctx_retains, modules_live, streams_live;
    long launches, bad_launches, copies_in, copies_out;
} mock_stats;

static dlrt_model *compile(const char *path, const char *target) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    dlcc_options o;
    dlcc_options_init(&o);
    o.cg.target = target;
    o.use_cache = false;
    dlcc_result r;
    memset(&r, 0, sizeof r);
    dlrt_model *m = NULL;
    if (dlcc_compile_file(path, &o, d, &r) != DL_OK) {
        for (size_t i = 0; i < dl_diags_count(d); i++) {
            fprintf(stderr, "  diag: %s\n", dl_diags_get(d, i)->msg);
        }
    } else if (dlrt_model_load_memory(r.artifact, r.artifact_len, &m) != DLRT_OK) {
        fprintf(stderr, "load (%s): %s\n", target, dlrt_last_error());
    }
    free(r.artifact);
    dl_diags_destroy(d);
    return m;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_cuda_mock MODEL.dlg LIBMOCKCUDA.so\n");
        return 2;
    }
    setenv("DLRT_LIBCUDA", argv[2], 1);
    void *mock = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL); // the same object libdlrt will open
    void (*stats)(mock_stats *) =
        mock ? (void (*)(mock_stats *))(uintptr_t)dlsym(mock, "mock_cuda_stats") : NULL;
    if (!stats) {
        fprintf(stderr, "cannot load the mock driver %s: %s\n", argv[2], dlerror());
        return 1;
    }
    dlrt_model *gm = compile(argv[1], "cuda:sm_80");
    dlrt_model *cm = compile(argv[1], "x86-64");
    if (!gm || !cm) {
        return 1;
    }
    CHECK(dlrt_model_device(gm) == DLRT_DEVICE_CUDA, "device %d", (int)dlrt_model_device(gm));

    dlrt_session *gs = NULL, *cs = NULL;
    dlrt_status st = dlrt_session_create(gm, &gs);
    CHECK(st == DLRT_OK, "CUDA session: %s", dlrt_last_error());
    st = dlrt_session_create(cm, &cs);
    CHECK(st == DLRT_OK, "CPU session: %s", dlrt_last_error());
    if (!gs || !cs) {
        return 1;
    }
    CHECK(dlrt_session_device(gs) == DLRT_DEVICE_CUDA, "session device");
    mock_stats ms;
    stats(&ms);
    CHECK(ms.ctx_retains == 1 && ms.modules_live == 1 && ms.streams_live == 1,
          "after create: %ld contexts, %ld modules, %ld streams", ms.ctx_retains, ms.modules_live,
          ms.streams_live);

    // Params: the same initial bytes as on the CPU, through the device's copies.
    size_t n_params = dlrt_model_num_params(gm);
    CHECK(n_params == dlrt_model_num_params(cm) && n_params > 0, "%zu params", n_params);
    for (size_t i = 0; i < n_params; i++) {
        dlrt_tensor_desc pd;
        if (dlrt_model_param(gm, i, &pd) != DLRT_OK) {
            dl_check_failures++;
            continue;
        }
        CHECK(pd.device == DLRT_DEVICE_CUDA, "param %s device", pd.name);
        uint8_t *g = malloc(pd.nbytes), *c = malloc(pd.nbytes);
        CHECK(dlrt_session_get_param(gs, pd.name, g, pd.nbytes) == DLRT_OK, "get %s: %s", pd.name,
              dlrt_last_error());
        CHECK(dlrt_session_get_param(cs, pd.name, c, pd.nbytes) == DLRT_OK, "get %s (CPU)",
              pd.name);
        CHECK(memcmp(g, c, pd.nbytes) == 0, "param %s differs from the CPU's initial value",
              pd.name);
        for (size_t b = 0; b < pd.nbytes; b++) {
            c[b] = (uint8_t)(b * 7 + i);
        }
        CHECK(dlrt_session_set_param(gs, pd.name, c, pd.nbytes) == DLRT_OK, "set %s", pd.name);
        CHECK(dlrt_session_get_param(gs, pd.name, g, pd.nbytes) == DLRT_OK &&
                  memcmp(g, c, pd.nbytes) == 0,
              "param %s: set then get differ", pd.name);
        free(g);
        free(c);
    }

    // Inputs (zeros), then each entry point: exactly its kernels, each launch well-formed.
    for (size_t i = 0; i < dlrt_model_num_inputs(gm); i++) {
        dlrt_tensor_desc in;
        if (dlrt_model_input(gm, i, &in) == DLRT_OK) {
            void *z = calloc(1, in.nbytes);
            CHECK(dlrt_session_set_input(gs, in.name, z, in.nbytes) == DLRT_OK, "input %s: %s",
                  in.name, dlrt_last_error());
            free(z);
        }
    }
    const dlrt_plan_hdr *h = gm->hdr;
    stats(&ms);
    long before = ms.launches;
    st = dlrt_session_infer(gs);
    stats(&ms);
    CHECK(st == DLRT_OK, "infer: %s", dlrt_last_error());
    CHECK(ms.launches - before == (long)h->entry_count[DLRT_ENTRY_INFER],
          "infer launched %ld kernels, the plan has %u", ms.launches - before,
          h->entry_count[DLRT_ENTRY_INFER]);
    dlrt_tensor_desc od;
    if (dlrt_model_output(gm, 0, &od) == DLRT_OK) {
        void *o = malloc(od.nbytes);
        CHECK(dlrt_session_output_copy(gs, od.name, o, od.nbytes) == DLRT_OK, "output copy: %s",
              dlrt_last_error());
        const void *borrowed = NULL;
        CHECK(dlrt_session_output(gs, od.name, &borrowed, NULL) != DLRT_OK ||
                  dlrt_session_device(gs) == DLRT_DEVICE_CUDA,
              "borrowed output");
        free(o);
    }
    before = ms.launches;
    dlrt_step_info info;
    st = dlrt_session_train_step(gs, &info);
    stats(&ms);
    CHECK(st == DLRT_OK, "train_step: %s", dlrt_last_error());
    CHECK(ms.launches - before == (long)h->entry_count[DLRT_ENTRY_TRAIN_STEP],
          "train_step launched %ld kernels, the plan has %u", ms.launches - before,
          h->entry_count[DLRT_ENTRY_TRAIN_STEP]);
    CHECK(ms.bad_launches == 0, "%ld launches broke the kernel ABI", ms.bad_launches);

    // A checkpoint of the CUDA session is the CPU session's after loading it.
    char ckpt[] = "/tmp/dlcc-cuda-mock-XXXXXX";
    int fd = mkstemp(ckpt);
    if (fd >= 0) {
        close(fd);
        CHECK(dlrt_session_save(gs, ckpt) == DLRT_OK, "save: %s", dlrt_last_error());
        CHECK(dlrt_session_load(cs, ckpt) == DLRT_OK, "load on the CPU: %s", dlrt_last_error());
        for (size_t i = 0; i < n_params; i++) {
            dlrt_tensor_desc pd;
            if (dlrt_model_param(gm, i, &pd) != DLRT_OK) {
                continue;
            }
            uint8_t *g = malloc(pd.nbytes), *c = malloc(pd.nbytes);
            CHECK(dlrt_session_get_param(gs, pd.name, g, pd.nbytes) == DLRT_OK &&
                      dlrt_session_get_param(cs, pd.name, c, pd.nbytes) == DLRT_OK &&
                      memcmp(g, c, pd.nbytes) == 0,
                  "param %s differs after the checkpoint round trip", pd.name);
            free(g);
            free(c);
        }
        unlink(ckpt);
    }
    dlrt_session_destroy(gs);
    stats(&ms);
    CHECK(ms.allocs_live == 0 && ms.ctx_retains == 0 && ms.modules_live == 0 &&
              ms.streams_live == 0,
          "after destroy: %ld allocations, %ld contexts, %ld modules, %ld streams live",
          ms.allocs_live, ms.ctx_retains, ms.modules_live, ms.streams_live);
    printf("CUDA session on the mock driver: %zu params, infer %u and train_step %u launches, "
           "%ld host-to-device and %ld device-to-host copies\n",
           n_params, h->entry_count[DLRT_ENTRY_INFER], h->entry_count[DLRT_ENTRY_TRAIN_STEP],
           ms.copies_in, ms.copies_out);

    // A driver that cannot compile the PTX: a clear refusal with its log, nothing left behind.
    setenv("MOCK_CUDA_JIT_FAIL", "1", 1);
    gs = NULL;
    st = dlrt_session_create(gm, &gs);
    CHECK(st == DLRT_ERR_UNSUPPORTED && !gs, "JIT failure gave %d", (int)st);
    CHECK(strstr(dlrt_last_error(), "mock JIT refusal") != NULL, "message: %s", dlrt_last_error());
    printf("a PTX the driver refuses: %s\n", dlrt_last_error());
    stats(&ms);
    CHECK(ms.allocs_live == 0 && ms.ctx_retains == 0 && ms.modules_live == 0 &&
              ms.streams_live == 0,
          "after the failed create: %ld allocations, %ld contexts live", ms.allocs_live,
          ms.ctx_retains);
    unsetenv("MOCK_CUDA_JIT_FAIL");

    dlrt_session_destroy(cs);
    dlrt_model_release(gm);
    dlrt_model_release(cm);
    printf("%s\n", dl_check_failures ? "FAILED" : "ok");
    return dl_check_failures ? 1 : 0;
}
