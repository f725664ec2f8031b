// runtime/rt_device_cpu.c — the CPU device (rt_device.h): what libdlrt has always done on the
// host, behind the device interface. Memory is the committed session arena of rt_arena.c (one
// anonymous mapping; the host reads it directly, so borrowed outputs are host pointers and inputs
// can be bound zero-copy); copies are memcpy; a kernel is the artifact's host function of the
// same table index as its dlrt_plan_fn (whose symbol name it carries), called on any sub-range
// of its range; an entry point runs on the session's thread pool (rt_exec.c), synchronously, so
// sync has nothing to wait for.
//
// Invariant: run and launch_range allocate nothing and make no system call of their own (the
// executor's pool mutex and condition variable are the only synchronisation).
#include "rt_device.h"
#include "rt_internal.h"

#include <string.h>

static dlrt_status cpu_open(rt_device *d, const dlrt_session_options *opts) {
    return rt__exec_create(d->s, opts ? opts->threads : 0, opts && opts->flush_denormals);
}

static void cpu_close(rt_device *d) {
    rt__exec_destroy(d->s);
}

static dlrt_status cpu_alloc(rt_device *d, size_t size, void **out) {
    (void)d;
    uint8_t *p = NULL;
    dlrt_status st = rt__arena_alloc(size, &p);
    *out = p;
    return st;
}

static void cpu_free(rt_device *d, void *p, size_t size) {
    (void)d;
    rt__arena_free(p, size);
}

static dlrt_status cpu_copy_in(rt_device *d, void *dst, const void *src, size_t n) {
    (void)d;
    if (n) {
        memcpy(dst, src, n);
    }
    return DLRT_OK;
}

static dlrt_status cpu_copy_out(rt_device *d, void *dst, const void *src, size_t n) {
    (void)d;
    if (n) {
        memcpy(dst, src, n);
    }
    return DLRT_OK;
}

static dlrt_status cpu_fill(rt_device *d, void *dst, int byte, size_t n) {
    (void)d;
    memset(dst, byte, n);
    return DLRT_OK;
}

static void cpu_launch_range(rt_device *d, uint32_t kernel, int64_t begin, int64_t end) {
    const dlrt_session *s = d->s;
    const dlrt_plan_kernel *k = &s->model->kernels[kernel];
    s->model->desc->fns[k->fn](s->kargs + k->first_arg, begin, end);
}

static dlrt_status cpu_run(rt_device *d, int entry) {
    rt__run_entry(d->s, entry);
    return DLRT_OK;
}

static dlrt_status cpu_sync(rt_device *d) {
    (void)d; // run returns when every kernel has finished
    return DLRT_OK;
}

const rt_device_ops rt__device_cpu = {
    .name = "cpu",
    .kind = DLRT_DEVICE_CPU,
    .caps = RT_DEVCAP_HOST_MEMORY | RT_DEVCAP_RANGE,
    .open = cpu_open,
    .close = cpu_close,
    .dev_alloc = cpu_alloc,
    .dev_free = cpu_free,
    .copy_in = cpu_copy_in,
    .copy_out = cpu_copy_out,
    .fill = cpu_fill,
    .launch_range = cpu_launch_range,
    .launch_grid = NULL,
    .run = cpu_run,
    .sync = cpu_sync,
};
