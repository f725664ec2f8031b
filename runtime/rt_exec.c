// runtime/rt_exec.c — the CPU device's executor (rt_device_cpu.c's run): a session's thread pool
// and its step scheduler. Kernels are the artifact's host functions, resolved once per session
// (kernel-table entry i is the function named by the plan's dlrt_plan_fn i).
//
// Structure. At session creation rt__exec_create resolves the thread count T (the options,
// else $DLRT_THREADS, else the online cores), builds one schedule per entry point and starts
// T - 1 workers, each pinned to a CPU of its own when T is the number of CPUs the creating
// thread may run on (worker_cpus); the thread that calls a step is worker 0. A schedule is the
// entry's kernel DAG in CSR form (each kernel's predecessor count inside the entry and its list of
// successors) plus preallocated per-step counters, and each kernel's chunks: a kernel whose
// arguments total at least `split_bytes` is cut into chunks of its outer range (intra-op
// parallelism), smaller kernels run whole. The cut is guided: each chunk takes 1/(2T) of the
// iterations still left, but at least MIN_CHUNK_BYTES worth of arguments (or one iteration), so the
// first chunks are large (little overhead) and the last ones small (the threads finish together: a
// GEMM of 24 iterations of ~70 us becomes 6, 5, 4, 3, 2, 1, 1, 1, 1). A step resets the counters,
// queues every chunk of the kernels with no predecessor and then every thread pops chunks from one
// FIFO; the thread that finishes a kernel's last chunk (an atomic count) decrements its successors'
// predecessor counts under the pool mutex and queues those that reach zero (inter-op
// parallelism). The step ends when every kernel has finished.
//
// Small steps. The pool's hand-offs (a queue under a mutex, a wake-up per kernel that becomes
// ready) cost a few microseconds per kernel: more than a second thread saves on a step of tens
// of microseconds (the CNN at batch 1 took 0.149 ms on 2 threads, 0.115 on 1). So a schedule
// whose kernels cannot run concurrently at all (rt_sched.serial) runs on the calling thread
// alone. With DLRT_PROBE=1 a multi-threaded session also probes its other schedules during
// their first steps: a pooled step of PROBE_SMALL_NS or more keeps the pool at once; otherwise
// blocks of steps run pooled and alone in turn, and the faster way stays for the session's life.
// Either way computes the same bytes. The probe is off by default: the first steps of a session
// are not its steady state, and in quiet runs it kept the lone way for a 256^3 product in 2 of
// 5 sessions (0.32 ms per product instead of 0.17). An explicit DLRT_SPLIT_BYTES turns it off.
//
// Data-parallel sessions (rt_dp.c) run the train step as two schedules around its all-reduce
// point, RT_SCHED_TRAIN_A (the plan's train kernels before comm_at) and RT_SCHED_TRAIN_B (the
// rest), built only when the plan has one; a done hook on A starts each gradient bucket's
// all-reduce as soon as the last kernel touching it has finished.
//
// Prepacked weights (format 8). When the infer entry has kernels flagged DLRT_KERNEL_F_PREPACK
// (they copy params into PACKED buffers in a GEMM's layout), a third extra schedule,
// RT_SCHED_INFER_PACKED, is the entry without them, a dependency on one of them counting as
// satisfied. rt__run_entry runs the whole entry when the session's packed_stale is set (at
// creation, and after anything that may have changed a param: rt_internal.h) and clears it, and
// the packed schedule otherwise, so weights are packed once per change instead of once per call;
// the profiler's step is an infer step either way.
//
// Invariants.
//   - A step allocates nothing and creates no thread: queue, counters and schedules are sized at
//     creation (every chunk is queued exactly once per step, so the queue never wraps).
//   - Results do not depend on T: the kernel ABI guarantees any partition of [0, range) gives the
//     same bytes, and the plan's dependencies cover every hazard between kernels.
//   - T = 1 (and DLRT_DEBUG_SPLIT) runs the entry's kernels in plan order on the calling thread,
//     touching no lock and no atomic; so does an entry with no concurrency at all (no kernel cut,
//     each kernel waiting for the one before: rt_sched.serial).
//   - Memory ordering: a kernel's writes happen before its successors run (the chunk count is
//     acq_rel, queueing goes through the mutex), and before the step returns (kernels_left is
//     released by the finisher and acquired by worker 0).
//   - Idle threads spin briefly on an atomic, then sleep on the condition variable; `sleepers`
//     (guarded by the mutex) tells a producer whether a broadcast is needed.
//   - Flush-to-zero (the session option flush_denormals): the workers set FTZ and DAZ once, when
//     they start (they run nothing but this session's kernels); the calling thread sets them
//     for each schedule it runs and restores its own floating-point mode afterwards.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include "dl_base.h"
#include "rt_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#    include <xmmintrin.h>
#    define HAS_FTZ   1
#    define MXCSR_FTZ 0x8000u // flush denormal results to zero
#    define MXCSR_DAZ 0x0040u // read denormal operands as zero
#else
#    define HAS_FTZ 0
#endif

#define DEFAULT_SPLIT_BYTES (64u * 1024u) // kernels touching fewer bytes run whole
#define MIN_CHUNK_BYTES     (16u * 1024u) // a chunk covers at least this share of the arguments
#define WORKER_STACK_BYTES  ((size_t)16 << 20) // each worker thread's stack
#define SPIN_WORK           2000               // polls for a ready chunk before sleeping
#define SPIN_IDLE           5000               // polls for the next step before sleeping
// The probe of small steps (run_probed): PROBE_WARM untimed pooled steps, then PROBE_BLOCKS
// blocks of PROBE_BLOCK steps, pooled and alone in turn. The first step of a block is not timed:
// after a block alone the workers have gone to sleep, and a pooled step that wakes them is not
// what a run of pooled steps costs (timing single steps alternately made the small MLP's pooled
// steps look slower than they are). The first timed pooled step ends the probe when it takes
// PROBE_SMALL_NS or more.
#define PROBE_WARM     2u
#define PROBE_BLOCK    4u
#define PROBE_BLOCKS   4u
#define PROBE_SMALL_NS 500000
#define PROBE_DONE     UINT32_MAX

typedef struct rt_kx {
    dlrt_kernel_fn fn;
    void *const *args;
    int64_t range;
    int64_t min_iters;    // smallest chunk (range: the kernel runs whole)
    uint32_t kid;         // global kernel id (profiler)
    uint32_t n_chunks;    // >= 1
    uint32_t first_bound; // chunk c is [bounds[first_bound + c], bounds[first_bound + c + 1])
    uint32_t n_preds;     // predecessors inside the entry
    uint32_t first_succ, n_succ;
} rt_kx;

typedef struct rt_sched {
    uint32_t n; // kernels of the entry (or of the phase)
    // Called once per step for each kernel i when it has finished (its last chunk), by the
    // thread that finished it, with no lock held; NULL: none (rt__exec_set_done_hook).
    void (*done)(void *u, uint32_t i);
    void *done_u;
    rt_kx *k;
    uint32_t *succ;           // successor lists (local indices)
    int64_t *bounds;          // chunk boundaries of every kernel (n_chunks + 1 each)
    uint32_t *preds_left;     // per step; guarded by the pool mutex
    atomic_uint *chunks_left; // per step
    uint32_t total_chunks;
    // No kernel is cut and each kernel waits for the one before it: nothing can ever run at the
    // same time as anything else, so the calling thread runs the entry alone (run_sequential)
    // and a step never pays the pool's hand-offs (a 32^3 product took 2 us on 2 threads, 1 on 1).
    bool serial;
    // The probe (run_probed): a multi-threaded session times its first steps of the schedule in
    // both ways; where the calling thread alone was faster (a step of tens of microseconds, whose
    // hand-offs between threads cost more than they save), it keeps running it so.
    uint32_t probe;         // steps of the probe run so far (PROBE_DONE: decided)
    int64_t par_ns, seq_ns; // their wall times, summed per way
    bool alone;             // the decision: run_sequential
} rt_sched;

typedef struct rt_task {
    uint32_t k, chunk;
} rt_task;

typedef struct rt_exec rt_exec;

typedef struct rt_worker {
    rt_exec *x;
    int id;
    pthread_t th;
    bool started;
} rt_worker;

struct rt_exec {
    dlrt_session *s;
    int n_threads;
    bool is_ftz;                    // the session option flush_denormals
    rt_sched sched[RT_SCHED_COUNT]; // per entry point, then the train step's two phases
    rt_task *queue;                 // capacity: the largest total_chunks
    rt_worker *workers;
    bool sync_made;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    // Guarded by mu:
    rt_sched *cur;
    uint32_t q_head, q_tail;
    int sleepers;
    // Read without the lock while spinning:
    atomic_uint q_avail;      // q_tail - q_head
    atomic_uint kernels_left; // unfinished kernels of the current step
    atomic_uint epoch;        // steps started
    atomic_bool stop;
};

// The calling thread's floating-point mode, with FTZ and DAZ set when `on` (returns the mode to
// restore; only called where HAS_FTZ or with on == false).
static inline unsigned fp_mode_enter(bool on) {
#if HAS_FTZ
    if (on) {
        unsigned old = _mm_getcsr();
        _mm_setcsr(old | MXCSR_FTZ | MXCSR_DAZ);
        return old;
    }
#endif
    (void)on;
    return 0;
}

static inline void fp_mode_leave(bool on, unsigned old) {
#if HAS_FTZ
    if (on) {
        _mm_setcsr(old);
    }
#endif
    (void)on;
    (void)old;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// The guided cut of [0, range) for T threads: chunk sizes max(min_iters, ceil(left / 2T)).
// Writes the n + 1 boundaries to `bounds` when non-NULL; returns the chunk count n.
static uint32_t guided_cut(int64_t range, int T, int64_t min_iters, int64_t *bounds) {
    uint32_t n = 0;
    int64_t at = 0;
    if (bounds) {
        bounds[0] = 0;
    }
    while (at < range) {
        int64_t left = range - at, size = (left + 2 * T - 1) / (2 * T);
        size = size < min_iters ? min_iters : size;
        at += size < left ? size : left;
        n++;
        if (bounds) {
            bounds[n] = at;
        }
    }
    return n;
}

static inline void run_chunk(dlrt_session *s, const rt_sched *sc, const rt_kx *k, uint32_t c,
                             int w) {
    int64_t b = sc->bounds[k->first_bound + c], e = sc->bounds[k->first_bound + c + 1];
    if (s->prof) {
        int64_t t0 = rt__now_ns();
        k->fn(k->args, b, e);
        rt__prof_chunk(s, w, k->kid, b, e, t0, rt__now_ns());
    } else {
        k->fn(k->args, b, e);
    }
}

// ---------------------------------------------------------------------------------------------
// Sequential path (T = 1, DLRT_DEBUG_SPLIT)

// Runs [0, range) of plan kernel `kid` as `parts` uneven chunks (chunk j has about j+1 shares),
// last chunk first, each through the device's launch_range (a testing aid, not a hot path).
static void run_split(dlrt_session *s, uint32_t kid, int64_t range, int parts) {
    if (parts > 64) {
        parts = 64;
    }
    int64_t shares = (int64_t)parts * (parts + 1) / 2;
    int64_t bounds[65];
    int64_t acc = 0;
    bounds[0] = 0;
    for (int j = 0; j < parts; j++) {
        acc += j + 1;
        bounds[j + 1] = range / shares * acc + range % shares * acc / shares; // no overflow
    }
    for (int j = parts - 1; j >= 0; j--) {
        if (bounds[j + 1] > bounds[j]) {
            s->dev.ops->launch_range(&s->dev, kid, bounds[j], bounds[j + 1]);
        }
    }
}

static void run_sequential(dlrt_session *s, const rt_sched *sc) {
    for (uint32_t i = 0; i < sc->n; i++) {
        const rt_kx *k = &sc->k[i];
        if (s->debug_split > 1 && k->range > 1) {
            int64_t t0 = s->prof ? rt__now_ns() : 0;
            run_split(s, k->kid, k->range, s->debug_split);
            if (s->prof) {
                rt__prof_chunk(s, 0, k->kid, 0, k->range, t0, rt__now_ns());
            }
        } else if (s->prof) {
            int64_t t0 = rt__now_ns();
            k->fn(k->args, 0, k->range);
            rt__prof_chunk(s, 0, k->kid, 0, k->range, t0, rt__now_ns());
        } else {
            k->fn(k->args, 0, k->range);
        }
        if (sc->done) {
            sc->done(sc->done_u, i);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parallel path

// Queues every chunk of kernel i. Caller holds mu.
static bool push_kernel(rt_exec *x, const rt_sched *sc, uint32_t i) {
    uint32_t n = sc->k[i].n_chunks;
    for (uint32_t c = 0; c < n; c++) {
        x->queue[x->q_tail++] = (rt_task){i, c};
    }
    atomic_fetch_add_explicit(&x->q_avail, n, memory_order_release);
    return true;
}

// Runs chunks of the current step until every kernel has finished. Worker w.
static void work(rt_exec *x, int w) {
    dlrt_session *s = x->s;
    for (;;) {
        // Spin for a chunk, at most SPIN_WORK polls in all, then sleep. Both threads may see the
        // same last chunk and race for it: the loser spins on with what is left of its polls
        // instead of sleeping at once (a futex wake took 10-60 us under KVM: the batch-1 MLP's
        // calling thread slept in ~45 % of its 0.15 ms steps, each time its worker took the
        // last kernel, and saw the step end ~35 us late).
        int spin = 0;
        for (;;) {
            for (; spin < SPIN_WORK; spin++) {
                if (atomic_load_explicit(&x->q_avail, memory_order_acquire) != 0 ||
                    atomic_load_explicit(&x->kernels_left, memory_order_acquire) == 0) {
                    break;
                }
                cpu_relax();
            }
            pthread_mutex_lock(&x->mu);
            if (x->q_head != x->q_tail ||
                atomic_load_explicit(&x->kernels_left, memory_order_acquire) == 0 ||
                spin >= SPIN_WORK) {
                break;
            }
            pthread_mutex_unlock(&x->mu); // lost the race for the chunk seen
            spin++;
        }
        while (x->q_head == x->q_tail &&
               atomic_load_explicit(&x->kernels_left, memory_order_acquire) != 0) {
            x->sleepers++;
            pthread_cond_wait(&x->cv, &x->mu);
            x->sleepers--;
        }
        if (x->q_head == x->q_tail) {
            pthread_mutex_unlock(&x->mu);
            return; // the step is over
        }
        rt_task t = x->queue[x->q_head++];
        atomic_fetch_sub_explicit(&x->q_avail, 1, memory_order_relaxed);
        rt_sched *sc = x->cur;
        pthread_mutex_unlock(&x->mu);

        const rt_kx *k = &sc->k[t.k];
        run_chunk(s, sc, k, t.chunk, w);
        if (atomic_fetch_sub_explicit(&sc->chunks_left[t.k], 1, memory_order_acq_rel) != 1) {
            continue;
        }
        if (sc->done) { // before the step can end: the caller's wait follows run_parallel
            sc->done(sc->done_u, t.k);
        }
        // The kernel's last chunk: release its successors.
        pthread_mutex_lock(&x->mu);
        bool pushed = false;
        for (uint32_t j = 0; j < k->n_succ; j++) {
            uint32_t su = sc->succ[k->first_succ + j];
            if (--sc->preds_left[su] == 0) {
                pushed = push_kernel(x, sc, su);
            }
        }
        unsigned left = atomic_fetch_sub_explicit(&x->kernels_left, 1, memory_order_acq_rel) - 1;
        if (x->sleepers > 0 && (pushed || left == 0)) {
            pthread_cond_broadcast(&x->cv);
        }
        pthread_mutex_unlock(&x->mu);
    }
}

static void *worker_main(void *arg) {
    rt_worker *wk = arg;
    rt_exec *x = wk->x;
    unsigned seen = 0;
    (void)fp_mode_enter(x->is_ftz); // for the thread's life: it runs only this session's kernels
    for (;;) {
        for (int spin = 0; spin < SPIN_IDLE; spin++) {
            if (atomic_load_explicit(&x->epoch, memory_order_acquire) != seen ||
                atomic_load_explicit(&x->stop, memory_order_acquire)) {
                break;
            }
            cpu_relax();
        }
        pthread_mutex_lock(&x->mu);
        while (atomic_load_explicit(&x->epoch, memory_order_acquire) == seen &&
               !atomic_load_explicit(&x->stop, memory_order_acquire)) {
            x->sleepers++;
            pthread_cond_wait(&x->cv, &x->mu);
            x->sleepers--;
        }
        if (atomic_load_explicit(&x->stop, memory_order_acquire)) {
            pthread_mutex_unlock(&x->mu);
            return NULL;
        }
        seen = atomic_load_explicit(&x->epoch, memory_order_acquire);
        pthread_mutex_unlock(&x->mu);
        work(x, wk->id);
    }
}

static void run_parallel(rt_exec *x, rt_sched *sc) {
    for (uint32_t i = 0; i < sc->n; i++) {
        sc->preds_left[i] = sc->k[i].n_preds;
        atomic_store_explicit(&sc->chunks_left[i], sc->k[i].n_chunks, memory_order_relaxed);
    }
    pthread_mutex_lock(&x->mu);
    x->cur = sc;
    x->q_head = x->q_tail = 0;
    atomic_store_explicit(&x->q_avail, 0, memory_order_relaxed);
    atomic_store_explicit(&x->kernels_left, sc->n, memory_order_release);
    for (uint32_t i = 0; i < sc->n; i++) {
        if (sc->k[i].n_preds == 0) {
            (void)push_kernel(x, sc, i);
        }
    }
    atomic_fetch_add_explicit(&x->epoch, 1, memory_order_release);
    if (x->sleepers > 0) {
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    work(x, 0);
}

// One step of a schedule still being probed (see PROBE_BLOCK): the faster of the pooled and
// the lone blocks' timed steps wins, each way having the same number. Either way computes the
// same bytes.
static void run_probed(dlrt_session *s, rt_sched *sc) {
    uint32_t i = sc->probe++;
    if (i < PROBE_WARM) {
        run_parallel(s->exec, sc);
        return;
    }
    uint32_t j = i - PROBE_WARM, pos = j % PROBE_BLOCK;
    bool alone = (j / PROBE_BLOCK) % 2 == 1;
    int64_t t0 = rt__now_ns();
    if (alone) {
        run_sequential(s, sc);
    } else {
        run_parallel(s->exec, sc);
    }
    int64_t dt = rt__now_ns() - t0;
    if (pos == 0) {
        return; // untimed: the block's first step
    }
    if (j == 1 && dt >= PROBE_SMALL_NS) {
        sc->probe = PROBE_DONE;
        return;
    }
    *(alone ? &sc->seq_ns : &sc->par_ns) += dt;
    if (j == PROBE_BLOCKS * PROBE_BLOCK - 1) {
        sc->alone = sc->seq_ns < sc->par_ns;
        sc->probe = PROBE_DONE;
    }
}

static void run_sched(dlrt_session *s, rt_sched *sc) {
    rt_exec *x = s->exec;
    if (sc->n == 0) {
        return;
    }
    unsigned fp_mode = fp_mode_enter(x->is_ftz);
    if (x->n_threads == 1 || s->debug_split > 1 || sc->serial || sc->alone) {
        run_sequential(s, sc);
    } else if (sc->probe != PROBE_DONE) {
        run_probed(s, sc);
    } else {
        run_parallel(x, sc);
    }
    fp_mode_leave(x->is_ftz, fp_mode);
}

// The train step's schedules write params: whatever runs them, the packs are stale after (the
// API's train step says so too; this keeps the executor right on its own).
static void note_params_written(dlrt_session *s, int sched) {
    if (sched != DLRT_ENTRY_INFER && sched != RT_SCHED_INFER_PACKED) {
        s->packed_stale = true;
    }
}

void rt__run_entry(dlrt_session *s, int entry) {
    int64_t t0 = s->prof ? rt__now_ns() : 0;
    int sched = entry;
    bool is_packing = false;
    if (entry == DLRT_ENTRY_INFER && s->model->n_prepack > 0) {
        // Format 8: the prepack kernels run only when the params may have changed since they
        // last ran (the session's packed_stale); else the PACKED buffers still hold their bytes
        // (no other kernel writes them, and the memory plan shares them with nothing).
        is_packing = s->packed_stale;
        sched = is_packing ? DLRT_ENTRY_INFER : RT_SCHED_INFER_PACKED;
    }
    note_params_written(s, sched);
    run_sched(s, &s->exec->sched[sched]);
    if (is_packing) {
        s->packed_stale = false;
    }
    if (s->prof) {
        rt__prof_step(s, entry, t0, rt__now_ns());
    }
}

void rt__run_sched(dlrt_session *s, int sched) {
    note_params_written(s, sched);
    run_sched(s, &s->exec->sched[sched]);
}

void rt__exec_set_done_hook(dlrt_session *s, int sched, void (*done)(void *u, uint32_t i),
                            void *u) {
    s->exec->sched[sched].done = done;
    s->exec->sched[sched].done_u = u;
}

uint32_t rt__sched_size(const dlrt_session *s, int sched) {
    return s->exec->sched[sched].n;
}

// ---------------------------------------------------------------------------------------------
// Creation

// The CPUs the calling thread may run on, into *set; their count, 0 when unknown.
static int allowed_cpus(cpu_set_t *set) {
    CPU_ZERO(set);
    return sched_getaffinity(0, sizeof *set, set) == 0 ? CPU_COUNT(set) : 0;
}

static int online_cores(void) {
    cpu_set_t set;
    int n_set = allowed_cpus(&set);
    if (n_set > 0) {
        return n_set;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < DLRT_MAX_THREADS ? n : DLRT_MAX_THREADS) : 1;
}

// Worker placement. Left to the kernel's scheduler, a worker woken for a step is often placed on
// the CPU of the thread that woke it (the caller), so that both share one CPU while the other
// idles until the load balancer moves one, milliseconds later: a 256^3 product took 0.34 ms on
// 2 threads and 0.32 on 1, and 0.15 with the worker pinned (2 vCPUs, Xeon family 6 model 207).
// So when the session has exactly as many threads as the CPUs the creating thread may run on
// (the default thread count), worker i (1 .. T-1) is pinned to the i-th of those CPUs other
// than the one the creating thread is on; the calling thread is never pinned (it is the
// application's), and the scheduler moves it off a pinned worker's CPU. Not with fewer threads
// (always pinning to the lowest CPUs would pile the workers of several processes onto them
// while other CPUs idle), nor with more (oversubscribed: the kernel's balancing is all there
// is), nor with DLRT_AFFINITY=0. Fills cpus[1 .. T).
static bool worker_cpus(int n_threads, int *cpus) {
    const char *env = getenv("DLRT_AFFINITY");
    if (n_threads < 2 || (env && strcmp(env, "0") == 0)) {
        return false;
    }
    cpu_set_t set;
    if (allowed_cpus(&set) != n_threads) {
        return false;
    }
    int self = sched_getcpu(), n = 1;
    for (int c = 0; c < CPU_SETSIZE && n < n_threads; c++) {
        if (CPU_ISSET(c, &set) && c != self) {
            cpus[n++] = c;
        }
    }
    return n == n_threads;
}

static dlrt_status resolve_threads(int requested, int *out) {
    if (requested < 0 || requested > DLRT_MAX_THREADS) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "threads must be 0 (automatic) or 1..%d, got %d",
                        DLRT_MAX_THREADS, requested);
    }
    if (requested > 0) {
        *out = requested;
        return DLRT_OK;
    }
    const char *env = getenv("DLRT_THREADS");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (*end || errno == ERANGE || v < 1 || v > DLRT_MAX_THREADS) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "DLRT_THREADS='%s': expected an integer 1..%d",
                            env, DLRT_MAX_THREADS);
        }
        *out = (int)v;
        return DLRT_OK;
    }
    int n = online_cores();
    *out = n < DLRT_MAX_THREADS ? n : DLRT_MAX_THREADS;
    return DLRT_OK;
}

// A testing and tuning aid: DLRT_SPLIT_BYTES=0 splits every kernel with range > 1. *is_set: the
// variable gave the value (the pool is then used as told: no probe).
static size_t split_bytes_setting(bool *is_set) {
    const char *env = getenv("DLRT_SPLIT_BYTES");
    *is_set = false;
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end) {
            *is_set = true;
            return (size_t)v;
        }
    }
    return DEFAULT_SPLIT_BYTES;
}

// Schedule `slot` over the kernels kids[0, n) (plan kernel ids in increasing order: an entry
// point, one phase of one, or the infer entry without its prepack kernels). A dependency on a
// kernel outside the list counts as satisfied: right for the train step's second phase since
// the first has finished before it starts, and for the skipped prepack kernels since their
// PACKED buffers still hold what they wrote last (the validator makes prepack kernels wait for
// prepack kernels only, so no order between the others went through them).
static dlrt_status build_sched(rt_exec *x, int slot, const uint32_t *kids, uint32_t n,
                               uint32_t *pos, size_t split_bytes) {
    dlrt_session *s = x->s;
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    const uint32_t *deps = (const uint32_t *)(m->plan + h->off_deps);
    rt_sched *sc = &x->sched[slot];
    sc->n = n;
    if (n == 0) {
        return DLRT_OK;
    }
    sc->k = dl_mem_calloc(n, sizeof *sc->k);
    sc->preds_left = dl_mem_calloc(n, sizeof *sc->preds_left);
    sc->chunks_left = dl_mem_calloc(n, sizeof *sc->chunks_left);
    if (!sc->k || !sc->preds_left || !sc->chunks_left) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        pos[i] = UINT32_MAX;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kid = kids[i];
        if (pos[kid] != UINT32_MAX) {
            return rt__fail(DLRT_ERR_CORRUPT,
                            "corrupt artifact: kernel %u listed twice in an "
                            "entry point",
                            kid);
        }
        pos[kid] = i;
    }
    // Predecessor counts and successor counts (a dependency outside the entry is satisfied).
    uint32_t n_edges = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kid = kids[i];
        const dlrt_plan_kernel *pk = &m->kernels[kid];
        rt_kx *k = &sc->k[i];
        k->fn = m->desc->fns[pk->fn];
        k->args = s->kargs + pk->first_arg;
        k->range = pk->range;
        k->kid = kid;
        uint64_t bytes = 0;
        for (uint32_t a = 0; a < pk->n_args; a++) {
            bytes += m->buffers[m->args[pk->first_arg + a]].size;
        }
        uint32_t chunks = 1;
        k->min_iters = pk->range; // one chunk
        if (x->n_threads > 1 && pk->range > 1 && bytes >= split_bytes) {
            // Iterations worth MIN_CHUNK_BYTES: ceil(MIN_CHUNK_BYTES * range / bytes), >= 1.
            double per = (double)MIN_CHUNK_BYTES * (double)pk->range / (double)bytes;
            k->min_iters = per < 1.0 ? 1 : per >= (double)pk->range ? pk->range : (int64_t)per + 1;
            chunks = guided_cut(pk->range, x->n_threads, k->min_iters, NULL);
        }
        k->n_chunks = chunks;
        k->first_bound = sc->total_chunks + i; // n_chunks + 1 boundaries per kernel
        sc->total_chunks += chunks;
        for (uint32_t j = 0; j < pk->n_deps; j++) {
            uint32_t d = deps[pk->first_dep + j];
            if (pos[d] == UINT32_MAX || (j > 0 && deps[pk->first_dep + j - 1] == d)) {
                continue;
            }
            if (pos[d] >= i) {
                return rt__fail(DLRT_ERR_CORRUPT,
                                "corrupt artifact: kernel %u waits for a "
                                "later kernel of its entry point",
                                kid);
            }
            k->n_preds++;
            sc->k[pos[d]].n_succ++;
            n_edges++;
        }
    }
    sc->succ = dl_mem_calloc(n_edges ? n_edges : 1, sizeof *sc->succ);
    sc->bounds = dl_mem_calloc((size_t)sc->total_chunks + n, sizeof *sc->bounds);
    if (!sc->succ || !sc->bounds) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        rt_kx *k = &sc->k[i];
        guided_cut(k->range, x->n_threads, k->min_iters, sc->bounds + k->first_bound);
    }
    uint32_t acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        sc->k[i].first_succ = acc;
        acc += sc->k[i].n_succ;
        sc->k[i].n_succ = 0; // refilled below
    }
    for (uint32_t i = 0; i < n; i++) {
        const dlrt_plan_kernel *pk = &m->kernels[sc->k[i].kid];
        for (uint32_t j = 0; j < pk->n_deps; j++) {
            uint32_t d = deps[pk->first_dep + j];
            if (pos[d] == UINT32_MAX || (j > 0 && deps[pk->first_dep + j - 1] == d)) {
                continue;
            }
            rt_kx *p = &sc->k[pos[d]];
            sc->succ[p->first_succ + p->n_succ++] = i;
        }
    }
    sc->serial = sc->total_chunks == n;
    for (uint32_t i = 1; i < n && sc->serial; i++) {
        const rt_kx *p = &sc->k[i - 1];
        bool waits = false;
        for (uint32_t j = 0; j < p->n_succ && !waits; j++) {
            waits = sc->succ[p->first_succ + j] == i;
        }
        sc->serial = waits;
    }
    return DLRT_OK;
}

dlrt_status rt__exec_create(dlrt_session *s, int requested, bool is_ftz) {
    if (is_ftz && !HAS_FTZ) {
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "flush_denormals: this CPU has no flush-to-zero mode libdlrt can set");
    }
    int n_threads = 1;
    dlrt_status st = resolve_threads(requested, &n_threads);
    if (st != DLRT_OK) {
        return st;
    }
    rt_exec *x = dl_mem_calloc(1, sizeof *x);
    if (!x) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    s->exec = x;
    s->n_threads = n_threads;
    x->s = s;
    x->n_threads = n_threads;
    x->is_ftz = is_ftz;
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t *pos = dl_mem_calloc(h->n_kernels ? h->n_kernels : 1, sizeof *pos);
    // The infer entry's kernels but the prepack ones (format 8), for RT_SCHED_INFER_PACKED.
    uint32_t n_inf = h->entry_count[DLRT_ENTRY_INFER], n_packed = 0;
    uint32_t *packed = dl_mem_calloc(n_inf ? n_inf : 1, sizeof *packed);
    if (!pos || !packed) {
        free(pos);
        free(packed);
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; m->n_prepack > 0 && i < n_inf; i++) {
        uint32_t kid = m->entry_kernels[h->entry_first[DLRT_ENTRY_INFER] + i];
        if (!(m->kernels[kid].flags & DLRT_KERNEL_F_PREPACK)) {
            packed[n_packed++] = kid;
        }
    }
    bool split_set = false;
    size_t split_bytes = split_bytes_setting(&split_set);
    const char *probe_env = getenv("DLRT_PROBE");
    bool no_probe = split_set || !probe_env || strcmp(probe_env, "1") != 0;
    uint32_t max_chunks = 1;
    // The train step's phases around its all-reduce point (data-parallel sessions, rt_dp.c).
    uint32_t tf = h->entry_first[DLRT_ENTRY_TRAIN_STEP], tn = h->entry_count[DLRT_ENTRY_TRAIN_STEP];
    uint32_t at = h->n_grads > 0 ? h->comm_at : 0;
    for (int e = 0; e < RT_SCHED_COUNT && st == DLRT_OK; e++) {
        const uint32_t *kids = m->entry_kernels + (e < DLRT_ENTRY_COUNT ? h->entry_first[e] : tf);
        uint32_t n = e < DLRT_ENTRY_COUNT ? h->entry_count[e] : 0;
        if (e == RT_SCHED_TRAIN_A && at > 0) {
            n = at;
        } else if (e == RT_SCHED_TRAIN_B && at > 0) {
            kids = m->entry_kernels + tf + at;
            n = tn - at;
        } else if (e == RT_SCHED_INFER_PACKED) {
            kids = packed; // empty without prepack kernels (rt__run_entry never runs it then)
            n = n_packed;
        }
        st = build_sched(x, e, kids, n, pos, split_bytes);
        x->sched[e].probe = no_probe ? PROBE_DONE : 0;
        if (x->sched[e].total_chunks > max_chunks) {
            max_chunks = x->sched[e].total_chunks;
        }
    }
    free(pos);
    free(packed);
    if (st != DLRT_OK || n_threads == 1) {
        return st;
    }
    x->queue = dl_mem_calloc(max_chunks, sizeof *x->queue);
    x->workers = dl_mem_calloc((size_t)n_threads, sizeof *x->workers);
    if (!x->queue || !x->workers) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    if (pthread_mutex_init(&x->mu, NULL) != 0) {
        return rt__fail(DLRT_ERR_NOMEM, "cannot create the thread pool's mutex");
    }
    if (pthread_cond_init(&x->cv, NULL) != 0) {
        pthread_mutex_destroy(&x->mu);
        return rt__fail(DLRT_ERR_NOMEM, "cannot create the thread pool's condition variable");
    }
    x->sync_made = true;
    // Workers run kernels whose frames take up to ~1.2 MiB (the GEMM's packing buffers): their
    // stack is set, not left to the default (2 MiB under an unlimited stack limit, less with
    // other C libraries).
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        return rt__fail(DLRT_ERR_NOMEM, "cannot create the worker threads' attributes");
    }
    (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    int cpus[DLRT_MAX_THREADS];
    bool pin = worker_cpus(n_threads, cpus);
    for (int i = 1; i < n_threads; i++) {
        rt_worker *wk = &x->workers[i];
        wk->x = x;
        wk->id = i;
        int rc = pthread_create(&wk->th, &attr, worker_main, wk);
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            return rt__fail(DLRT_ERR_NOMEM, "cannot start worker thread %d of %d: %s", i + 1,
                            n_threads, strerror(rc));
        }
        wk->started = true;
        if (pin) { // a placement hint: where the kernel refuses it, the worker runs unpinned
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[i], &one);
            (void)pthread_setaffinity_np(wk->th, sizeof one, &one);
        }
    }
    pthread_attr_destroy(&attr);
    return DLRT_OK;
}

void rt__exec_destroy(dlrt_session *s) {
    rt_exec *x = s ? s->exec : NULL;
    if (!x) {
        return;
    }
    if (x->sync_made) {
        pthread_mutex_lock(&x->mu);
        atomic_store_explicit(&x->stop, true, memory_order_release);
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        for (int i = 1; i < x->n_threads; i++) {
            if (x->workers[i].started) {
                pthread_join(x->workers[i].th, NULL);
            }
        }
        pthread_cond_destroy(&x->cv);
        pthread_mutex_destroy(&x->mu);
    }
    for (int e = 0; e < RT_SCHED_COUNT; e++) {
        free(x->sched[e].k);
        free(x->sched[e].succ);
        free(x->sched[e].bounds);
        free(x->sched[e].preds_left);
        free(x->sched[e].chunks_left);
    }
    free(x->queue);
    free(x->workers);
    free(x);
    s->exec = NULL;
}
