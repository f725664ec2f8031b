// tests/cuda/gpu_replay.c — runs exported codegen cases (cg_check's DLCC_TEST_EXPORT: an
// artifact, its inputs and the reference evaluator's outputs per case directory) through
// libdlrt and compares, with the case's tolerance: |got - ref| <= atol + rtol * |ref| for floats
// (NaN matches NaN, an infinity only itself), exact for integers and bools. Links libdlrt and
// the LLVM-free base library only, so it runs where the compiler cannot: tools/gpu-check.sh
// exports the cases for cuda:sm_XX on the development machine and replays them on the GPU one.
// ctest replays CPU exports here (gpu_replay_cpu), which tests this tool.
//
// Usage: gpu_replay DIR    (DIR/case*/check.txt); exit 0 when every case matches.
//        gpu_replay train MODEL.so STEPS CKPT|- NAME=FILE.npy...
//            loads the checkpoint (unless -) into a session of MODEL.so, sets the inputs and runs
//            STEPS train steps on that batch, printing "step S loss L grad_norm G skipped K" per
//            step (%.9g): tools/gpu-check.sh compares a GPU run with the CPU's. With
//            GPU_REPLAY_SAVE=PATH the session is saved after the steps.
//        gpu_replay bench MODEL.so STEPS NAME=FILE.npy...
//            times STEPS train steps on that batch after 10 warm-up steps (wall clock, each
//            step as dlrt_session_train_step returns it: the loss read back) and prints
//            "ms_per_step T" (bench/gpu_step.sh).
#include "dl_base.h"
#include "dl_tensor_io.h"
#include "dlrt.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool close_enough(double g, double r, double atol, double rtol) {
    if (isnan(r) || isnan(g)) {
        return isnan(r) && isnan(g);
    }
    if (isinf(r) || isinf(g)) {
        return g == r;
    }
    return fabs(g - r) <= atol + rtol * fabs(r);
}

// One case directory: 1 matched, 0 differs or fails (printed).
static int replay(const char *dir) {
    char path[4800], line[600];
    snprintf(path, sizeof path, "%s/check.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: no check.txt\n", dir);
        return 0;
    }
    double atol = 0, rtol = 0;
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    snprintf(path, sizeof path, "%s/model.so", dir);
    int ok = dlrt_model_load_file(path, &m) == DLRT_OK && dlrt_session_create(m, &s) == DLRT_OK;
    if (!ok) {
        fprintf(stderr, "%s: %s\n", dir, dlrt_last_error());
    }
    bool ran = false;
    while (ok && fgets(line, sizeof line, f)) {
        char kind[16], name[256], file[256];
        if (sscanf(line, "tol %lf %lf", &atol, &rtol) == 2) {
            continue;
        }
        if (sscanf(line, "%15s %255s %255s", kind, name, file) != 3) {
            continue;
        }
        char err[256];
        dl_tensor t;
        memset(&t, 0, sizeof t);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (dl_npy_read(path, &t, err, sizeof err) != DL_OK) {
            fprintf(stderr, "%s: %s\n", path, err);
            ok = 0;
            break;
        }
        size_t nbytes = dl_tensor_nbytes(&t);
        if (strcmp(kind, "input") == 0) {
            if (dlrt_session_set_input(s, name, t.data, nbytes) != DLRT_OK) {
                fprintf(stderr, "%s: input %s: %s\n", dir, name, dlrt_last_error());
                ok = 0;
            }
        } else if (strcmp(kind, "output") == 0) {
            if (!ran) {
                ran = true;
                if (dlrt_session_infer(s) != DLRT_OK) {
                    fprintf(stderr, "%s: infer: %s\n", dir, dlrt_last_error());
                    ok = 0;
                    dl_tensor_free(&t);
                    break;
                }
            }
            dl_tensor got = t;
            got.data = malloc(nbytes ? nbytes : 1);
            if (!got.data || dlrt_session_output_copy(s, name, got.data, nbytes) != DLRT_OK) {
                fprintf(stderr, "%s: output %s: %s\n", dir, name, dlrt_last_error());
                ok = 0;
            }
            bool is_float = dl_dtype_is_float(t.dtype);
            int64_t n = dl_tensor_numel(&t), bad = 0;
            for (int64_t i = 0; ok && i < n; i++) {
                double g = dl_tensor_get(&got, i), r = dl_tensor_get(&t, i);
                bool same = is_float ? close_enough(g, r, atol, rtol) : g == r;
                if (!same && bad++ < 5) {
                    fprintf(stderr, "%s: output %s[%lld]: got %.9g, reference %.9g\n", dir, name,
                            (long long)i, g, r);
                }
            }
            if (bad) {
                fprintf(stderr, "%s: %lld of %lld elements of %s differ (atol %g, rtol %g)\n", dir,
                        (long long)bad, (long long)n, name, atol, rtol);
                ok = 0;
            }
            free(got.data);
        }
        dl_tensor_free(&t);
    }
    fclose(f);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    return ok;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int train(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: gpu_replay train MODEL.so STEPS CKPT|- NAME=FILE.npy...\n");
        return 2;
    }
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    if (dlrt_model_load_file(argv[2], &m) != DLRT_OK || dlrt_session_create(m, &s) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", argv[2], dlrt_last_error());
        dlrt_model_release(m);
        return 1;
    }
    int rc = 0;
    if (strcmp(argv[4], "-") != 0 && dlrt_session_load(s, argv[4]) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", argv[4], dlrt_last_error());
        rc = 1;
    }
    for (int i = 5; i < argc && rc == 0; i++) {
        char *eq = strchr(argv[i], '=');
        dl_tensor t;
        char err[256];
        memset(&t, 0, sizeof t);
        if (!eq || dl_npy_read(eq + 1, &t, err, sizeof err) != DL_OK) {
            fprintf(stderr, "%s: expected NAME=FILE.npy (%s)\n", argv[i], eq ? err : "no =");
            rc = 1;
            break;
        }
        *eq = '\0';
        if (dlrt_session_set_input(s, argv[i], t.data, dl_tensor_nbytes(&t)) != DLRT_OK) {
            fprintf(stderr, "input %s: %s\n", argv[i], dlrt_last_error());
            rc = 1;
        }
        dl_tensor_free(&t);
    }
    long steps = strtol(argv[3], NULL, 10);
    bool bench = strcmp(argv[1], "bench") == 0;
    long warm = bench ? 10 : 0;
    struct timespec t0 = {0, 0}, t1;
    for (long k = 0; k < warm + steps && rc == 0; k++) {
        if (k == warm) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
        }
        dlrt_step_info info;
        if (dlrt_session_train_step(s, &info) != DLRT_OK) {
            fprintf(stderr, "train_step: %s\n", dlrt_last_error());
            rc = 1;
            break;
        }
        if (!bench) {
            printf("step %ld loss %.9g grad_norm %.9g skipped %d\n", k, info.loss, info.grad_norm,
                   info.skipped);
        }
    }
    if (bench && rc == 0 && steps > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms =
            ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
        printf("ms_per_step %.4f\n", ms / (double)steps);
    }
    const char *save = getenv("GPU_REPLAY_SAVE"); // a checkpoint after the steps
    if (rc == 0 && save && save[0] && dlrt_session_save(s, save) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", save, dlrt_last_error());
        rc = 1;
    }
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "train") == 0) {
        return train(argc, argv);
    }
    if (argc >= 4 && strcmp(argv[1], "bench") == 0) { // as train, with no checkpoint
        char **av = calloc((size_t)argc + 2, sizeof *av);
        if (!av) {
            return 2;
        }
        memcpy(av, argv, 4 * sizeof *av);
        av[4] = "-";
        memcpy(av + 5, argv + 4, (size_t)(argc - 4) * sizeof *av);
        int rc = train(argc + 1, av);
        free(av);
        return rc;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: gpu_replay DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 2;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "case", 4) == 0) {
            char **nn = realloc(names, (n + 1) * sizeof *names);
            if (!nn) {
                return 2;
            }
            names = nn;
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    if (n) {
        qsort(names, n, sizeof *names, cmp_str);
    }
    size_t passed = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", argv[1], names[i]);
        int ok = replay(dir);
        passed += (size_t)ok;
        if (!ok) {
            fprintf(stderr, "FAIL %s (the model: %s/case.dlg)\n", names[i], dir);
        }
        free(names[i]);
    }
    free(names);
    printf("%zu passed, %zu failed\n", passed, n - passed);
    return n > 0 && passed == n ? 0 : 1;
}
