// runtime/rt_profile.c — the profiler: per-kernel timings of a session's steps, written as a
// Chrome trace-event JSON file (chrome://tracing, Perfetto) and summarised as the top kernels.
//
// Structure. dlrt_session_profile_begin allocates, once, one record per worker: a bounded event
// buffer (one event per executed chunk: kernel, sub-range, start and end) and per-kernel totals
// (time and calls, indexed by the plan's kernel id), plus a bounded list of steps and per-entry
// step totals. The executor (rt_exec.c) calls rt__prof_chunk from the worker that ran a chunk and
// rt__prof_step from the calling thread; each worker writes only its own record, so recording
// takes no lock and allocates nothing. Events beyond a buffer's capacity are dropped and counted
// (the totals, which the summary uses, are always complete).
//
// Names. The plan (format 5) names each kernel's IR ops as a string: "MatMul", or for a fused
// kernel the ops in order joined by '+' ("MatMul+Add+Relu"), "TrainStep" for the train step's
// own kernels (whose node names start with "train."); the runtime never sees the IR's op ids.
// The node name, the kernel's symbol name and the .dlg line come from the plan too. The .dlg file
// name is the session's source name (options, else the model's name).
//
// Invariant: with profiling off (s->prof == NULL) the executor pays one predictable branch per
// chunk and nothing else.
#define _GNU_SOURCE // (consistency with rt_exec.c: clock_gettime)
#include "dl_base.h"
#include "dl_json.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EVENTS_PER_WORKER ((size_t)1 << 18)
#define MAX_STEPS         ((size_t)1 << 16)

static const char *const entry_names[DLRT_ENTRY_COUNT] = {"infer", "train_step"};

typedef struct prof_event {
    int64_t t0, t1;       // ns, CLOCK_MONOTONIC
    int64_t begin, end;   // the chunk's sub-range
    uint32_t kernel, pad; // plan kernel id
} prof_event;

typedef struct prof_worker {
    prof_event *ev;   // [EVENTS_PER_WORKER]
    size_t n_ev;      // recorded (<= capacity)
    uint64_t dropped; // beyond capacity
    int64_t *k_ns;    // per plan kernel: total chunk time
    uint64_t *k_chunks;
    char pad[64]; // keep workers' counters on separate cache lines
} prof_worker;

typedef struct prof_step {
    int64_t t0, t1;
    int entry;
} prof_step;

typedef struct rt_prof rt_prof;

struct rt_prof {
    int64_t origin; // profile_begin time
    int n_workers;
    uint32_t n_kernels;
    prof_worker *w;
    prof_step *steps; // [MAX_STEPS]
    size_t n_steps;
    uint64_t steps_dropped;
    uint64_t entry_steps[DLRT_ENTRY_COUNT];
    int64_t entry_ns[DLRT_ENTRY_COUNT];
};

int64_t rt__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void rt__prof_chunk(dlrt_session *s, int w, uint32_t kernel, int64_t begin, int64_t end, int64_t t0,
                    int64_t t1) {
    prof_worker *pw = &s->prof->w[w];
    pw->k_ns[kernel] += t1 - t0;
    pw->k_chunks[kernel]++;
    if (pw->n_ev < EVENTS_PER_WORKER) {
        pw->ev[pw->n_ev++] = (prof_event){t0, t1, begin, end, kernel, 0};
    } else {
        pw->dropped++;
    }
}

void rt__prof_step(dlrt_session *s, int entry, int64_t t0, int64_t t1) {
    rt_prof *p = s->prof;
    p->entry_steps[entry]++;
    p->entry_ns[entry] += t1 - t0;
    if (p->n_steps < MAX_STEPS) {
        p->steps[p->n_steps++] = (prof_step){t0, t1, entry};
    } else {
        p->steps_dropped++;
    }
}

void rt__prof_destroy(dlrt_session *s) {
    rt_prof *p = s ? s->prof : NULL;
    if (!p) {
        return;
    }
    for (int i = 0; p->w && i < p->n_workers; i++) {
        free(p->w[i].ev);
        free(p->w[i].k_ns);
        free(p->w[i].k_chunks);
    }
    free(p->w);
    free(p->steps);
    free(p);
    s->prof = NULL;
}

dlrt_status dlrt_session_profile_begin(dlrt_session *s) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_profile_begin: session is NULL");
    }
    rt_prof *p = s->prof;
    uint32_t nk = s->model->hdr->n_kernels;
    if (!p) {
        p = dl_mem_calloc(1, sizeof *p);
        if (!p) {
            return rt__fail(DLRT_ERR_NOMEM, "out of memory");
        }
        s->prof = p;
        p->n_workers = s->n_threads;
        p->n_kernels = nk;
        p->w = dl_mem_calloc((size_t)p->n_workers, sizeof *p->w);
        p->steps = dl_mem_alloc(MAX_STEPS * sizeof *p->steps);
        bool ok = p->w && p->steps;
        for (int i = 0; ok && i < p->n_workers; i++) {
            p->w[i].ev = dl_mem_alloc(EVENTS_PER_WORKER * sizeof(prof_event));
            p->w[i].k_ns = dl_mem_calloc(nk ? nk : 1, sizeof(int64_t));
            p->w[i].k_chunks = dl_mem_calloc(nk ? nk : 1, sizeof(uint64_t));
            ok = p->w[i].ev && p->w[i].k_ns && p->w[i].k_chunks;
        }
        if (!ok) {
            rt__prof_destroy(s);
            return rt__fail(DLRT_ERR_NOMEM, "out of memory (profiler buffers)");
        }
    }
    for (int i = 0; i < p->n_workers; i++) {
        p->w[i].n_ev = 0;
        p->w[i].dropped = 0;
        memset(p->w[i].k_ns, 0, (nk ? nk : 1) * sizeof(int64_t));
        memset(p->w[i].k_chunks, 0, (nk ? nk : 1) * sizeof(uint64_t));
    }
    p->n_steps = 0;
    p->steps_dropped = 0;
    memset(p->entry_steps, 0, sizeof p->entry_steps);
    memset(p->entry_ns, 0, sizeof p->entry_ns);
    p->origin = rt__now_ns();
    return DLRT_OK;
}

// ---------------------------------------------------------------------------------------------
// Names

// A string of the plan (offset, length in its strings table).
typedef struct plan_str {
    const char *p;
    int n;
} plan_str;

// Kernel k's op names ("-" when the plan gives none). Lengths fit an int: validated strings
// lie inside the plan, which is far below 2 GiB in any artifact ld.so maps.
static plan_str kernel_ops(const dlrt_model *m, const dlrt_plan_kernel *k) {
    if (k->ops_len == 0) {
        return (plan_str){"-", 1};
    }
    return (plan_str){m->strings + k->ops_off, (int)k->ops_len};
}

// A JSON string (n bytes) through base's one escaper (dl_json.h).
static void json_str(FILE *f, const char *p, size_t n) {
    dl_strbuf b = {0};
    dl_json_put_string_n(&b, p, n);
    if (b.data) {
        fputs(b.data, f);
    }
    dl_strbuf_fini(&b);
}

static void json_cstr(FILE *f, const char *p) {
    json_str(f, p, strlen(p));
}

// The op names of a kernel as a JSON array: "MatMul+Add+Relu" -> ["MatMul","Add","Relu"].
static void json_ops(FILE *f, plan_str ops) {
    fputc('[', f);
    int at = 0;
    while (at <= ops.n) {
        const char *sep = memchr(ops.p + at, DLRT_OPS_SEPARATOR, (size_t)(ops.n - at));
        int end = sep ? (int)(sep - ops.p) : ops.n;
        if (at > 0) {
            fputc(',', f);
        }
        json_str(f, ops.p + at, (size_t)(end - at));
        at = end + 1;
    }
    fputc(']', f);
}

static double us(const rt_prof *p, int64_t t) {
    return (double)(t - p->origin) / 1e3;
}

static uint64_t total_dropped(const rt_prof *p) {
    uint64_t d = p->steps_dropped;
    for (int i = 0; i < p->n_workers; i++) {
        d += p->w[i].dropped;
    }
    return d;
}

static void write_trace(const dlrt_session *s, FILE *f) {
    const rt_prof *p = s->prof;
    const dlrt_model *m = s->model;
    const dlrt_plan_fn *fns = (const dlrt_plan_fn *)(m->plan + m->hdr->off_fns);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":");
    json_cstr(f, m->name);
    fprintf(f, ",\"source\":");
    json_cstr(f, s->source_name);
    fprintf(f, ",\"threads\":%d,\"dropped_events\":%llu},\n\"traceEvents\":[\n", p->n_workers,
            (unsigned long long)total_dropped(p));
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
    json_cstr(f, m->name);
    fprintf(f, "}}");
    for (int w = 0; w < p->n_workers; w++) {
        fprintf(f,
                ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":"
                "\"worker %d%s\"}}",
                w, w, w == 0 ? " (caller)" : "");
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        const prof_step *st = &p->steps[i];
        fprintf(f,
                ",\n{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":0,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%zu}}",
                entry_names[st->entry], us(p, st->t0), (double)(st->t1 - st->t0) / 1e3, i);
    }
    for (int w = 0; w < p->n_workers; w++) {
        const prof_worker *pw = &p->w[w];
        for (size_t i = 0; i < pw->n_ev; i++) {
            const prof_event *e = &pw->ev[i];
            const dlrt_plan_kernel *k = &m->kernels[e->kernel];
            const dlrt_plan_fn *fn = &fns[k->fn];
            plan_str ops = kernel_ops(m, k);
            fprintf(f, ",\n{\"name\":");
            char name[256];
            int nn = snprintf(name, sizeof name, "%.*s %.*s", ops.n, ops.p, (int)k->name_len,
                              m->strings + k->name_off);
            json_str(f, name, nn < 0 ? 0 : (size_t)nn < sizeof name ? (size_t)nn : sizeof name - 1);
            fprintf(f,
                    ",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,"
                    "\"dur\":%.3f,\"args\":{\"op\":",
                    w, us(p, e->t0), (double)(e->t1 - e->t0) / 1e3);
            json_str(f, ops.p, (size_t)ops.n);
            fprintf(f, ",\"ops\":");
            json_ops(f, ops);
            fprintf(f, ",\"symbol\":");
            json_str(f, m->strings + fn->name_off, fn->name_len);
            fprintf(f, ",\"node\":");
            json_str(f, m->strings + k->name_off, k->name_len);
            fprintf(f, ",\"source\":");
            json_cstr(f, s->source_name);
            fprintf(f, ",\"line\":%u,\"kernel\":%u,\"begin\":%lld,\"end\":%lld,\"range\":%lld}}",
                    k->src_line, e->kernel, (long long)e->begin, (long long)e->end,
                    (long long)k->range);
        }
    }
    fprintf(f, "\n]}\n");
}

dlrt_status dlrt_session_profile_write(dlrt_session *s, const char *path) {
    if (!s || !path || !*path) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_profile_write: NULL argument");
    }
    if (!s->prof) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "profiling is off (call dlrt_session_profile_begin first)");
    }
    // dl_out: a temporary file renamed over the target, or a stream written in place. The trace
    // goes through stdio on a duplicate of its descriptor, which dl_out_close then finishes.
    dl_out o;
    if (dl_out_open(path, &o) != DL_OK) {
        return rt__fail(DLRT_ERR_IO, "cannot write profile %s", path);
    }
    int dup_fd = dup(o.fd);
    FILE *f = dup_fd >= 0 ? fdopen(dup_fd, "w") : NULL;
    if (!f && dup_fd >= 0) {
        close(dup_fd);
    }
    bool ok = f != NULL;
    if (f) {
        write_trace(s, f);
        ok = !ferror(f);
        ok = fclose(f) == 0 && ok;
    }
    if (dl_out_close(&o, ok) != DL_OK) {
        return rt__fail(DLRT_ERR_IO, "cannot write profile %s", path);
    }
    return DLRT_OK;
}

// ---------------------------------------------------------------------------------------------
// Summary

typedef struct kernel_total {
    uint32_t kernel;
    int64_t ns;
} kernel_total;

static int cmp_total(const void *a, const void *b) {
    const kernel_total *x = a, *y = b;
    if (x->ns != y->ns) {
        return x->ns > y->ns ? -1 : 1;
    }
    return x->kernel < y->kernel ? -1 : x->kernel > y->kernel;
}

dlrt_status dlrt_session_profile_summary(dlrt_session *s, FILE *f, size_t top) {
    if (!s || !f) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_profile_summary: NULL argument");
    }
    const rt_prof *p = s->prof;
    if (!p) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "profiling is off (call dlrt_session_profile_begin first)");
    }
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    kernel_total *t = dl_mem_calloc(h->n_entry_kernels ? h->n_entry_kernels : 1, sizeof *t);
    if (!t) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
        uint64_t steps = p->entry_steps[e];
        uint32_t first = h->entry_first[e], n = h->entry_count[e];
        if (steps == 0 || n == 0) {
            continue;
        }
        int64_t busy = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t kid = m->entry_kernels[first + i];
            t[i].kernel = kid;
            t[i].ns = 0;
            for (int w = 0; w < p->n_workers; w++) {
                t[i].ns += p->w[w].k_ns[kid];
            }
            busy += t[i].ns;
        }
        qsort(t, n, sizeof *t, cmp_total);
        double step_ms = (double)p->entry_ns[e] / 1e6 / (double)steps;
        double busy_ms = (double)busy / 1e6 / (double)steps;
        fprintf(f,
                "profile: %s, %llu step%s, %.3f ms per step, %d thread%s, kernel time %.3f ms "
                "per step (%u kernels)\n",
                entry_names[e], (unsigned long long)steps, steps == 1 ? "" : "s", step_ms,
                p->n_workers, p->n_workers == 1 ? "" : "s", busy_ms, n);
        for (uint32_t i = 0; i < n && i < top; i++) {
            const dlrt_plan_kernel *k = &m->kernels[t[i].kernel];
            double ms = (double)t[i].ns / 1e6 / (double)steps;
            double share = busy > 0 ? 100.0 * (double)t[i].ns / (double)busy : 0.0;
            plan_str ops = kernel_ops(m, k);
            fprintf(f, "  %5.1f%%  %.3f ms  %.*s %.*s", share, ms, ops.n, ops.p, (int)k->name_len,
                    m->strings + k->name_off);
            if (k->src_line) {
                fprintf(f, " (%s:%u)", s->source_name, k->src_line);
            }
            fputc('\n', f);
        }
    }
    uint64_t dropped = total_dropped(p);
    if (dropped) {
        fprintf(f, "profile: %llu trace events dropped (buffers full; totals are complete)\n",
                (unsigned long long)dropped);
    }
    free(t);
    return DLRT_OK;
}
