// bench/step_bench.c — times dlcc's compiled train step or inference through libdlrt, for
// bench/compare.sh (driven by bench/compare.py).
//
// usage: step_bench ARTIFACT.so train|infer THREADS STEPS WARMUP [--init CKPT] [--ftz]
//                   NAME=POOL.npy...
// Each POOL.npy holds P >= 1 batches of input NAME back to back ([P, ...the input's shape], the
// input's dtype, C order): step i binds batch i % P (zero-copy, as a trainer would), so a
// training run sees P different batches and does not memorise one. --init loads params (and
// optimizer state) from a safetensors file before the first step, so that dlcc and PyTorch
// start from the same params. WARMUP steps run untimed, then STEPS steps are timed with the
// monotonic clock (wall time: with 2 threads both cores work), and one line is printed:
//   ms_per_step M steps N first_loss L0 last_loss L1
// (losses are those of the timed train steps; 0 for infer). Exit status 1 on any error.
#include "dlrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_INPUTS 8

typedef struct pool {
    const char *name;
    unsigned char *data; // OWNED: 64-byte aligned copy of the .npy payload
    size_t batch_bytes;  // one batch: the input's size
    size_t n_batches;
} pool;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, dlrt_status st) {
    fprintf(stderr, "step_bench: %s: %s (%s)\n", what, dlrt_status_str(st), dlrt_last_error());
    return 1;
}

// Reads the payload of a .npy file (versions 1-3) into an aligned buffer; *n: its size.
static unsigned char *read_npy(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    unsigned char head[12];
    unsigned char *data = NULL;
    if (fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, "\x93NUMPY", 6) == 0) {
        size_t hlen = head[6] == 1 ? (size_t)head[8] | (size_t)head[9] << 8
                                   : (size_t)head[8] | (size_t)head[9] << 8 |
                                         (size_t)head[10] << 16 | (size_t)head[11] << 24;
        long off = (long)(head[6] == 1 ? 10 + hlen : 12 + hlen);
        if (fseek(f, 0, SEEK_END) == 0) {
            long end = ftell(f);
            size_t size = end > off ? (size_t)(end - off) : 0;
            data = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
            if (data && (fseek(f, off, SEEK_SET) != 0 || fread(data, 1, size, f) != size)) {
                free(data);
                data = NULL;
            }
            *n = size;
        }
    }
    fclose(f);
    return data;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: step_bench ARTIFACT.so train|infer THREADS STEPS WARMUP [--init "
                        "CKPT] [--ftz] NAME=POOL.npy...\n");
        return 2;
    }
    int is_train = strcmp(argv[2], "train") == 0;
    int threads = atoi(argv[3]), steps = atoi(argv[4]), warmup = atoi(argv[5]);
    const char *init = NULL;
    int ftz = 0;
    pool pools[MAX_INPUTS];
    int n_pools = 0;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--init") == 0 && i + 1 < argc) {
            init = argv[++i];
        } else if (strcmp(argv[i], "--ftz") == 0) {
            ftz = 1;
        } else if (strchr(argv[i], '=') && n_pools < MAX_INPUTS) {
            char *eq = strchr(argv[i], '=');
            *eq = 0;
            pools[n_pools].name = argv[i];
            size_t n = 0;
            pools[n_pools].data = read_npy(eq + 1, &n);
            if (!pools[n_pools].data) {
                fprintf(stderr, "step_bench: cannot read %s\n", eq + 1);
                return 1;
            }
            pools[n_pools].n_batches = n; // divided by the batch size below
            n_pools++;
        } else {
            fprintf(stderr, "step_bench: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    dlrt_model *m;
    dlrt_session *s;
    dlrt_status st;
    if ((st = dlrt_model_load_file(argv[1], &m)) != DLRT_OK) {
        return fail(argv[1], st);
    }
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = threads;
    o.flush_denormals = ftz;
    if ((st = dlrt_session_create_ex(m, &o, &s)) != DLRT_OK) {
        return fail("session", st);
    }
    if (init && (st = dlrt_session_load(s, init)) != DLRT_OK) {
        return fail(init, st);
    }
    for (int p = 0; p < n_pools; p++) {
        dlrt_tensor_desc td;
        size_t i = 0, n_in = dlrt_model_num_inputs(m);
        for (; i < n_in; i++) {
            if (dlrt_model_input(m, i, &td) == DLRT_OK && strcmp(td.name, pools[p].name) == 0) {
                break;
            }
        }
        if (i == n_in || td.nbytes == 0 || pools[p].n_batches % td.nbytes != 0) {
            fprintf(stderr, "step_bench: '%s' is not an input or its pool is not whole batches\n",
                    pools[p].name);
            return 1;
        }
        pools[p].batch_bytes = td.nbytes;
        pools[p].n_batches /= td.nbytes;
    }
    double t0 = 0, first_loss = 0, last_loss = 0;
    for (int i = 0; i < warmup + steps; i++) {
        if (i == warmup) {
            t0 = now_s();
        }
        for (int p = 0; p < n_pools; p++) {
            const pool *pl = &pools[p];
            const unsigned char *b = pl->data + (size_t)i % pl->n_batches * pl->batch_bytes;
            if ((st = dlrt_session_bind_input(s, pl->name, b, pl->batch_bytes)) != DLRT_OK) {
                return fail("bind", st);
            }
        }
        if (is_train) {
            dlrt_step_info info;
            if ((st = dlrt_session_train_step(s, &info)) != DLRT_OK) {
                return fail("train step", st);
            }
            first_loss = i == warmup ? info.loss : first_loss;
            last_loss = info.loss;
        } else if ((st = dlrt_session_infer(s)) != DLRT_OK) {
            return fail("infer", st);
        }
    }
    double t = now_s() - t0;
    printf("ms_per_step %.6f steps %d first_loss %.9g last_loss %.9g\n", 1e3 * t / steps, steps,
           first_loss, last_loss);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    for (int p = 0; p < n_pools; p++) {
        free(pools[p].data);
    }
    return 0;
}
