// runtime/rt_comm.h — the interface between libdlrt's communicator (rt_comm.c) and a transport
// plugin (rt_comm_mpi.c, built as libdlrt_mpi.so). libdlrt never links a transport: it dlopens
// the plugin and looks up RT_COMM_PLUGIN_SYMBOL, a function returning this table. Private to the
// runtime; the plugin includes nothing else of it (no base/, no dlrt.h types).
//
// Contract of every operation: blocking, called from one thread at a time (the communicator's
// thread), collective (every rank calls the same operations in the same order), and bounded: a
// peer that does not take part within timeout_s seconds makes it fail with a message naming the
// peer. Returns 0 on success, else -1 with a NUL-terminated message in err[0, n_err).
#ifndef RT_COMM_H
#define RT_COMM_H

#include <stddef.h>
#include <stdint.h>

#define RT_COMM_PLUGIN_ABI    1u
#define RT_COMM_PLUGIN_SYMBOL "dlrt_comm_plugin_v1"

typedef struct rt_comm_plugin {
    uint32_t abi; // RT_COMM_PLUGIN_ABI
    const char *name;
    // Opens a context over `comm` (NULL: the world, initialising the transport if needed; else a
    // transport handle of the caller's, e.g. an MPI_Comm *, duplicated). Sets rank and size.
    int (*open)(const void *comm, void **out_ctx, int *out_rank, int *out_size, char *err,
                size_t n_err);
    // Frees the context; finalises the transport if open initialised it, unless is_broken (an
    // operation failed: peers may be gone and a finalise could wait for them).
    void (*close)(void *ctx, int is_broken);
    // buf[0, n) := scale * sum over ranks r = 0..size-1 (in that order) of rank r's buf, the
    // same bits on every rank: a reduce-scatter where each rank sums its segment's contributions
    // in rank order, then an all-gather. scratch holds at least rt_comm_scratch_floats(n, size)
    // floats.
    int (*allreduce_f32)(void *ctx, float *buf, size_t n, float scale, float *scratch,
                         double timeout_s, char *err, size_t n_err);
    // all[r * size, (r + 1) * size) := rank r's mine[0, size), on every rank.
    int (*allgather)(void *ctx, const void *mine, void *all, size_t size, double timeout_s,
                     char *err, size_t n_err);
    // buf[0, size) := root's buf[0, size), on every rank.
    int (*bcast)(void *ctx, void *buf, size_t size, int root, double timeout_s, char *err,
                 size_t n_err);
} rt_comm_plugin;

typedef const rt_comm_plugin *(*rt_comm_plugin_fn)(void);

// Segment s of n elements over `size` ranks: [n * s / size, n * (s + 1) / size).
static inline size_t rt_comm_seg_lo(size_t n, int size, int s) {
    size_t q = n / (size_t)size, r = n % (size_t)size; // floor(n * s / size), without overflow
    return q * (size_t)s + r * (size_t)s / (size_t)size;
}

// The scratch an all-reduce of n floats needs: one contribution per rank of the largest segment.
static inline size_t rt_comm_scratch_floats(size_t n, int size) {
    return ((n + (size_t)size - 1) / (size_t)size) * (size_t)size;
}

#endif
