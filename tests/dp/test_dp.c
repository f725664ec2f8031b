// tests/dp/test_dp.c — a small data-parallel trainer for tests/dp/test_dp.sh, run under
// `mpirun -np N` (or alone for the single-process reference). It trains an artifact of the MLP
// sample on synthetic data: global batch t holds samples G*t .. G*t + G - 1 (G = ranks x the
// artifact's batch B), sample i's pixels and label drawn from a counter-based generator keyed on
// i, and rank r takes rows [r*B, (r+1)*B) of it, so N ranks of batch B see exactly the global
// batch one process of batch N*B sees.
//
// usage: test_dp train ART STEPS OUT [options]   (under mpirun; the communicator is MPI's world)
//        test_dp single ART STEPS OUT [options]  (one process, no communicator)
// options: --bucket BYTES, --threads T, --timeout S, --plugin PATH (single: bind a communicator
//          of that transport plugin anyway, e.g. tests/dp/loop_plugin.c's world of one; a failed
//          step is then tried again, to show the error stays, and everything is freed before the
//          exit, for LeakSanitizer), --bench (no checks, no OUT: rank 0 prints
//          the mean step time of steps 2.. and the communication figures, bench/dp_scaling.sh),
//          --accumulate (the artifact accumulates:
//          micro-batch m of global step t is global batch k*t + m), --chunks C (single: a
//          session of C chunks, dlrt_session_set_chunks, bound with the whole global batch of
//          C x B rows: chunk r is what rank r of C reads),
//          --state (the digest and OUT cover every state tensor too: optimizer slots and, with
//          accumulation, the accumulators; the line names accum_count; without --accumulate
//          an accumulating artifact then shows every call, mid-cycle ones included),
//          --fail-rank R --fail-step K --fail-mode exit|hang|oom (rank R leaves before step K;
//          oom: it first runs out of memory for real, its address space capped (RLIMIT_AS) at
//          what it has mapped so that a second session's arena cannot be had, and exits as a
//          trainer does on that error).
// After every step each rank compares its params with rank 0's (a broadcast), and rank 0
// prints "step K loss L digest D" (L: the global batch's loss, the mean over ranks that the
// bound step reports on every rank, averaged over the micro-steps; D: FNV-1a of
// every param's bytes). OUT receives rank 0's
// params and the first step's Adam exp_avg (SGD: momentum_buffer) tensors (raw float32, param
// order); with --state its params and then every state tensor after the last step (model order).
// Exit status: 0 ok, 1 usage or set-up failure, 2 a step failed (message on stderr), 3 the ranks'
// params differ.
#include "dlrt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x) { // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

// Sample `i`: 784 pixels in [0, 1) and a label in [0, 10) that depends on them a little.
static void sample(int64_t i, float *x, int64_t *y) {
    double s = 0;
    for (int k = 0; k < 784; k++) {
        x[k] = (float)((double)(mix((uint64_t)i * 1000003u + (uint64_t)k) >> 11) * 0x1p-53);
        s += k < 392 ? x[k] : -x[k];
    }
    *y = (int64_t)((uint64_t)(s * 7.0 + 1000.0) % 10u);
}

// Caps this process's address space at what it has mapped now (/proc/self/statm's size):
// any new mapping fails with ENOMEM. 0 on success.
static int cap_memory(void) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1) {
        if (f) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0) {
        return -1;
    }
    rl.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    return setrlimit(RLIMIT_AS, &rl);
}

static int fail(const char *what) {
    fprintf(stderr, "test_dp: %s: %s\n", what, dlrt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_dp train|single ART STEPS OUT [options]\n");
        return 1;
    }
    int is_dp = strcmp(argv[1], "train") == 0;
    const char *art = argv[2], *out_path = argv[4];
    int steps = atoi(argv[3]), threads = 1, fail_rank = -1, fail_step = -1, accumulate = 0;
    int chunks = 1;
    int bench = 0, with_state = 0;
    size_t bucket = 0;
    double timeout = 0;
    const char *fail_mode = "exit", *plugin = NULL;
    for (int a = 5; a < argc; a++) {
        if (strcmp(argv[a], "--accumulate") == 0 || strcmp(argv[a], "--bench") == 0 ||
            strcmp(argv[a], "--state") == 0) {
            accumulate |= argv[a][2] == 'a';
            bench |= argv[a][2] == 'b';
            with_state |= argv[a][2] == 's';
            continue;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "test_dp: %s needs a value\n", argv[a]);
            return 1;
        }
        if (strcmp(argv[a], "--bucket") == 0) {
            bucket = (size_t)atoll(argv[++a]);
        } else if (strcmp(argv[a], "--threads") == 0) {
            threads = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--timeout") == 0) {
            timeout = atof(argv[++a]);
        } else if (strcmp(argv[a], "--fail-rank") == 0) {
            fail_rank = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--fail-step") == 0) {
            fail_step = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--fail-mode") == 0) {
            fail_mode = argv[++a];
        } else if (strcmp(argv[a], "--plugin") == 0) {
            plugin = argv[++a];
        } else if (strcmp(argv[a], "--chunks") == 0) {
            chunks = atoi(argv[++a]);
        } else {
            fprintf(stderr, "test_dp: unknown option %s\n", argv[a]);
            return 1;
        }
    }
    dlrt_comm *comm = NULL;
    int rank = 0, world = 1;
    if (is_dp || plugin) {
        dlrt_comm_options co;
        dlrt_comm_options_init(&co);
        co.timeout_s = timeout;
        co.plugin_path = plugin;
        if (dlrt_comm_open_mpi(NULL, &co, &comm) != DLRT_OK) {
            return fail("open the communicator");
        }
        rank = dlrt_comm_rank(comm);
        world = dlrt_comm_size(comm);
    }
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    dlrt_session_options so;
    dlrt_session_options_init(&so);
    so.threads = threads;
    if (dlrt_model_load_file(art, &m) != DLRT_OK || dlrt_session_create_ex(m, &so, &s) != DLRT_OK) {
        return fail("load the artifact");
    }
    dlrt_tensor_desc xd, yd; // the data [B, 784 values] and labels [B]
    if (dlrt_model_input(m, 0, &xd) != DLRT_OK || dlrt_model_input(m, 1, &yd) != DLRT_OK) {
        return fail("inputs");
    }
    int64_t B = xd.dims[0], G = B * world * chunks;
    int k = 1;
    if (accumulate) {
        double kd = 1;
        if (dlrt_session_get_hparam(s, "accumulate", &kd) != DLRT_OK) {
            return fail("accumulate");
        }
        k = (int)kd;
    }
    double t_bind = now_s();
    if (comm && dlrt_session_bind_comm(s, comm, bucket) != DLRT_OK) {
        fprintf(stderr, "rank %d: bind failed after %.2f s: %s\n", rank, now_s() - t_bind,
                dlrt_last_error());
        if (plugin) { // freed, for LeakSanitizer (no peer to leave behind)
            dlrt_session_destroy(s);
            dlrt_model_release(m);
            dlrt_comm_destroy(comm);
        }
        return 2;
    }
    if (chunks > 1 && dlrt_session_set_chunks(s, chunks) != DLRT_OK) {
        return fail("set chunks");
    }
    int64_t R = B * chunks; // the rows this process gives a step
    size_t np = dlrt_model_num_params(m), total = 0, n_state = 0, state_bytes = 0;
    for (size_t i = 0; i < np; i++) {
        dlrt_tensor_desc d;
        (void)dlrt_model_param(m, i, &d);
        total += d.nbytes;
    }
    for (size_t i = 0; with_state && i < dlrt_model_num_state(m); i++) {
        dlrt_tensor_desc d;
        (void)dlrt_model_state(m, i, &d);
        state_bytes += d.nbytes;
        n_state++;
    }
    unsigned char *mine = malloc(total), *root = malloc(total), *avg1 = malloc(total);
    unsigned char *state = malloc(state_bytes ? state_bytes : 1);
    float *x = malloc((size_t)R * 784 * sizeof *x);
    int64_t *y = malloc((size_t)R * sizeof *y);
    if (!mine || !root || !avg1 || !state || !x || !y) {
        fprintf(stderr, "test_dp: out of memory\n");
        return 1;
    }
    int rc = 0;
    double t_steps = 0, w_sum = 0, c_sum = 0;
    for (int t = 0; t < steps && rc == 0; t++) {
        if (rank == fail_rank && t == fail_step) {
            fprintf(stderr, "rank %d: leaving before step %d (%s)\n", rank, t + 1, fail_mode);
            fflush(stderr);
            if (strcmp(fail_mode, "hang") == 0) {
                sleep(600); // killed by mpirun once the others have failed
            }
            if (strcmp(fail_mode, "oom") == 0) {
                dlrt_session *s2 = NULL;
                dlrt_status st = cap_memory() == 0 ? dlrt_session_create_ex(m, &so, &s2) : DLRT_OK;
                fprintf(stderr, "rank %d: out of memory: %s\n", rank,
                        st != DLRT_OK ? dlrt_last_error() : "no (the memory cap failed)");
                fflush(stderr);
                _exit(st != DLRT_OK ? 9 : 8);
            }
            _exit(9); // no MPI_Finalize: as a crash
        }
        dlrt_step_info info;
        double loss = 0;
        for (int mi = 0; mi < k; mi++) {
            int64_t base = ((int64_t)t * k + mi) * G + (int64_t)rank * B;
            for (int64_t j = 0; j < R; j++) {
                sample(base + j, x + j * 784, y + j);
            }
            if (chunks > 1
                    ? dlrt_session_bind_input(s, xd.name, x, (size_t)R * 784 * sizeof *x) !=
                              DLRT_OK ||
                          dlrt_session_bind_input(s, yd.name, y, (size_t)R * sizeof *y) != DLRT_OK
                    : dlrt_session_set_input(s, xd.name, x, (size_t)B * 784 * sizeof *x) !=
                              DLRT_OK ||
                          dlrt_session_set_input(s, yd.name, y, (size_t)B * sizeof *y) != DLRT_OK) {
                return fail("set inputs");
            }
            double t0 = now_s();
            if (dlrt_session_train_step(s, &info) != DLRT_OK) {
                fprintf(stderr, "rank %d: step %d failed after %.2f s: %s\n", rank, t + 1,
                        now_s() - t0, dlrt_last_error());
                if (!plugin) {
                    return 2; // no dlrt_comm_destroy: a peer is gone (as a trainer would exit)
                }
                dlrt_status again = dlrt_session_train_step(s, &info);
                fprintf(stderr, "rank %d: step %d again: %s\n", rank, t + 1,
                        again != DLRT_OK ? dlrt_last_error() : "ok");
                rc = 2;
                break;
            }
            if (t > 0) { // step 1 warms up (page faults, the pool's first wake-up)
                double w = 0, c = 0;
                dlrt_session_comm_stats(s, &w, &c, NULL, NULL);
                t_steps += now_s() - t0;
                w_sum += w;
                c_sum += c;
            }
            loss += info.loss / k;
        }
        if (rc != 0) {
            break;
        }
        if (bench) {
            continue;
        }
        size_t at = 0;
        for (size_t i = 0; i < np; i++) {
            dlrt_tensor_desc d;
            (void)dlrt_model_param(m, i, &d);
            if (dlrt_session_get_param(s, d.name, mine + at, d.nbytes) != DLRT_OK) {
                return fail("get param");
            }
            if (t == 0) { // Adam's exp_avg, or SGD's momentum_buffer
                char name[256], name2[256];
                snprintf(name, sizeof name, "%s.exp_avg", d.name);
                snprintf(name2, sizeof name2, "%s.momentum_buffer", d.name);
                if (dlrt_session_get_param(s, name, avg1 + at, d.nbytes) != DLRT_OK &&
                    dlrt_session_get_param(s, name2, avg1 + at, d.nbytes) != DLRT_OK) {
                    return fail("get exp_avg / momentum_buffer");
                }
            }
            at += d.nbytes;
        }
        // --state: every state tensor (the accumulators differ between ranks mid-cycle: each
        // holds its own micro-batches' sum until the boundary's all-reduce).
        for (size_t i = 0, sat = 0; i < n_state; i++) {
            dlrt_tensor_desc d;
            (void)dlrt_model_state(m, i, &d);
            if (dlrt_session_get_param(s, d.name, state + sat, d.nbytes) != DLRT_OK) {
                return fail("get state");
            }
            sat += d.nbytes;
        }
        double accum_count = 0;
        if (with_state && accumulate == 0) {
            (void)dlrt_session_get_hparam(s, "accum_count", &accum_count);
        }
        if (comm) { // every rank's params against rank 0's, and the verdict to all
            memcpy(root, mine, total);
            float bad = 0;
            if (dlrt_comm_broadcast(comm, root, total, 0) != DLRT_OK) {
                return fail("broadcast params");
            }
            bad = memcmp(root, mine, total) != 0 ? 1.0f : 0.0f;
            if (dlrt_comm_allreduce(comm, &bad, 1, 1.0f) != DLRT_OK) {
                return fail("all-reduce verdict");
            }
            if (bad != 0) {
                fprintf(stderr, "rank %d: step %d: params differ on %g rank(s)\n", rank, t + 1,
                        bad);
                rc = 3;
            }
        }
        if (rank == 0 && with_state) {
            printf("step %d loss %.9g grad_norm %.9g skipped %d accum_count %g digest %016llx "
                   "state %016llx%s\n",
                   t + 1, loss, info.grad_norm, info.skipped, accum_count,
                   (unsigned long long)fnv(0xcbf29ce484222325ull, mine, total),
                   (unsigned long long)fnv(0xcbf29ce484222325ull, state, state_bytes),
                   comm && rc == 0 ? " ranks identical" : "");
        } else if (rank == 0) {
            printf("step %d loss %.9g grad_norm %.9g skipped %d digest %016llx%s\n", t + 1, loss,
                   info.grad_norm, info.skipped,
                   (unsigned long long)fnv(0xcbf29ce484222325ull, mine, total),
                   comm && rc == 0 ? " ranks identical" : "");
        }
    }
    if (bench) {
        uint64_t bytes = 0;
        int nb = 0;
        dlrt_session_comm_stats(s, NULL, NULL, &bytes, &nb);
        double n = (double)(steps - 1) * k, ms = t_steps * 1e3 / n;
        if (rank == 0) {
            printf("bench: %d ranks x %d threads, batch %lld (global %lld): %.3f ms/step, "
                   "comm wait %.3f ms/step (%.1f%% of the step), comm %.3f ms/step, %llu "
                   "bytes/step, %d buckets\n",
                   world, dlrt_session_threads(s), (long long)B, (long long)G, ms, w_sum / n,
                   100.0 * w_sum / n / ms, c_sum / n, (unsigned long long)bytes, nb);
        }
        steps = 0;
    }
    if (rc == 0 && rank == 0 && !bench) {
        double wait = 0, cms = 0;
        uint64_t bytes = 0;
        int nb = 0;
        dlrt_session_comm_stats(s, &wait, &cms, &bytes, &nb);
        if (comm) {
            printf("comm: %d ranks, %d buckets, %llu bytes per step\n", world, nb,
                   (unsigned long long)bytes);
        }
        FILE *f = fopen(out_path, "wb");
        const unsigned char *second = with_state ? state : avg1;
        size_t n2 = with_state ? state_bytes : total;
        if (!f || fwrite(mine, 1, total, f) != total || fwrite(second, 1, n2, f) != n2 ||
            fclose(f) != 0) {
            fprintf(stderr, "test_dp: cannot write %s\n", out_path);
            rc = 1;
        }
    }
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    dlrt_comm_destroy(comm);
    free(mine);
    free(root);
    free(avg1);
    free(state);
    free(x);
    free(y);
    return rc;
}
