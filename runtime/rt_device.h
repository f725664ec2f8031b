// runtime/rt_device.h — the device interface of libdlrt: what a session needs from the hardware
// its model was compiled for (runtime/dlrt_format.h's dlrt_plan_hdr.device). A device is a table
// of functions plus capability data, as QBE's Target and Glow's Backend are; a session holds one
// instance (rt_device) and goes through it for memory, copies and kernel execution, so the rest
// of the runtime (sessions, training, checkpoints, the profiler) is the same on every device.
//
// Devices: the CPU (rt_device_cpu.c: the committed session arena of rt_arena.c, kernels called
// through the artifact's function table, the thread-pool executor of rt_exec.c) and CUDA
// (rt_device_cuda.c: libcuda through dlopen, the plan's PTX image loaded as a module, kernels
// found by name with cuModuleGetFunction and launched on their grid on one stream).
//
// Pointers. Device memory is addressed by `void *` values the device gave (dev_alloc and offsets
// into it); only a device with RT_DEVCAP_HOST_MEMORY lets the host dereference them. Host
// pointers are plain host memory. Every copy is synchronous: it returns once the bytes have
// arrived.
//
// Invariant (the CPU's step path): run and launch_range allocate nothing, take no lock beyond the
// executor's pool mutex and make no system call but the futex a sleeping worker needs.
#ifndef RT_DEVICE_H
#define RT_DEVICE_H

#include "dlrt.h"
#include "dlrt_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rt_device rt_device;

// Capability bits (rt_device_ops.caps).
enum {
    RT_DEVCAP_HOST_MEMORY = 1u << 0, // the host may dereference device pointers: borrowed
                                     // outputs are host pointers, inputs can be bound zero-copy
    RT_DEVCAP_RANGE = 1u << 1,       // kernels run any sub-range [b, e) of [0, range): launch_range
    RT_DEVCAP_GRID = 1u << 2,        // kernels run once on their grid: launch_grid
    RT_DEVCAP_ASYNC = 1u << 3,       // run returns before the kernels finish: sync waits for them
};

typedef struct rt_device_ops {
    const char *name;      // "cpu", as dlrt_device_name
    dlrt_device_kind kind; // == the plan's device kind it runs
    uint32_t caps;         // RT_DEVCAP_*
    // Makes d's per-session state for session s (whose model is set, nothing else): resolves the
    // model's kernels (CPU: function-table entry i is the kernel named by dlrt_plan_fn i; CUDA:
    // cuModuleGetFunction of each name in the device image) and whatever runs them (CPU: the
    // thread pool, with opts->threads). `opts` may be NULL. On failure the last error says why;
    // close is still called.
    dlrt_status (*open)(rt_device *d, const dlrt_session_options *opts);
    void (*close)(rt_device *d); // after open, whatever it returned
    // Device memory: `size` bytes, DLRT_BUFFER_ALIGN-aligned, zeroed and committed (a memory
    // limit is hit here, not during a step). dev_free accepts NULL.
    dlrt_status (*dev_alloc)(rt_device *d, size_t size, void **out);
    void (*dev_free)(rt_device *d, void *p, size_t size);
    // Synchronous copies between host memory and device memory, and filling device memory with
    // a byte. They fail only on a device error (the last error says which); the CPU's never do.
    dlrt_status (*copy_in)(rt_device *d, void *dev_dst, const void *host_src, size_t n);
    dlrt_status (*copy_out)(rt_device *d, void *host_dst, const void *dev_src, size_t n);
    dlrt_status (*fill)(rt_device *d, void *dev_dst, int byte, size_t n);
    // One kernel: plan kernel record `kernel` on the sub-range [begin, end) of its range
    // (RT_DEVCAP_RANGE), or once on its grid (RT_DEVCAP_GRID). NULL without the capability.
    void (*launch_range)(rt_device *d, uint32_t kernel, int64_t begin, int64_t end);
    dlrt_status (*launch_grid)(rt_device *d, uint32_t kernel);
    // Every kernel of entry point `entry` (DLRT_ENTRY_*) in an order its dependencies allow
    // (with RT_DEVCAP_ASYNC it may return before they finish).
    dlrt_status (*run)(rt_device *d, int entry);
    // Waits until everything run or launched so far has finished.
    dlrt_status (*sync)(rt_device *d);
    // Frees what the device keeps per session beyond open/close (CUDA: the context reference
    // dev_alloc took), last in dlrt_session_destroy, after dev_free. NULL: nothing to free.
    void (*release)(rt_device *d);
} rt_device_ops;

struct rt_device {
    const rt_device_ops *ops;
    dlrt_session *s; // the session it serves (BORROWED: the session owns the device)
    void *impl;      // the device's own per-session state (CUDA: rt_device_cuda.c), or NULL
};

// The device for plan device kind `kind` (DLRT_PLAN_DEVICE_*) in this build of the runtime, or
// NULL when it has none.
const rt_device_ops *rt__device_ops_for(uint32_t kind);

// The CPU device (rt_device_cpu.c).
extern const rt_device_ops rt__device_cpu;
extern const rt_device_ops rt__device_cuda;

#endif
