// samples/train_fmnist.c — a complete C trainer: compiles a .dlg model through the compilation
// cache (libdlcc), loads the artifact into the runtime (libdlrt), trains it on Fashion-MNIST with
// the runtime's data loader feeding the compiled train step without copies, then measures the
// test accuracy with the infer entry point. It includes only the two installed headers, so it
// builds outside the tree against an installed dlcc too (docs/install.md):
//
//     cc -std=c17 -D_POSIX_C_SOURCE=200809L train_fmnist.c $(pkg-config --cflags --libs dlcc dlrt)
//
// and is built as `train_fmnist` next to `dlcc`:
//
//     build/train_fmnist [MODEL.dlg] [--epochs E] [--batch B] [--threads T]
//                        [--loader-threads P] [--prefetch K] [--seed S] [--lr V]
//                        [--limit-train N] [--limit-test N] [--data DIR] [--save CKPT]
//                        [--max-skipped-steps N] [--comm auto|mpi|none]
//
// MODEL.dlg (default samples/mlp_fmnist.dlg) has a `train` block, a float data input whose first
// dim is the batch dim N (bound to --batch), an int64 or int32 label input [N], and a float
// output [N, C] (probabilities or logits) for the accuracy. It prints the same lines as
// `dlcc train`: per epoch "epoch E: mean loss L, T s, S samples/s, skipped K, data wait W
// ms/batch", and "test accuracy: A (CORRECT/TOTAL)". Any error is printed with its cause and
// the exit status is 1; a checkpoint is written only after training and testing succeeded.
// Divergence, as in `dlcc train`: the first non-finite step (a non-finite loss, or an update the
// runtime skipped for a non-finite gradient) is reported, and after N = --max-skipped-steps of
// them in a row, or with fewer than N finite steps between any two (default 10; 0: never stop),
// training stops with exit status 4 and nothing is saved.
// Data parallelism, as `dlcc train --comm`: under `mpirun -np R build/train_fmnist ...` (--comm
// auto, the default, when mpirun started more than one rank; mpi forces it, none runs R
// independent trainings) every rank opens MPI's world through the runtime's communicator, reads
// its shard of every epoch (the loader's shard_count / shard_index) with --batch B, and binds its
// session to the communicator, so each step averages the R ranks' gradients (a global batch of
// R x B). Rank 0 alone prints the epoch lines (the global batch's loss; samples/s of all ranks),
// tests and writes --save; a rank that dies or hangs stops the others naming it.
//
// The loop, the non-finite guard and the accuracy are the runtime's (dlrt_train_run,
// dlrt_evaluate_accuracy: runtime/rt_trainloop.c, shared with `dlcc train` and Python); this file
// parses arguments, sets up the loaders and prints.
//
// The recipe: pixels scaled to [0, 1], normalised with the training samples' mean and standard
// deviation (computed by the loader), a new seeded order every epoch, the final partial batch
// dropped; the test set in file order, its last batch padded (only real rows counted).
#include "dlrt.h"    // the runtime: models, sessions, train steps, the data loader
#include "libdlcc.h" // the compiler as a library: dlcc_lib_compile (through the cache)

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *model, *data, *save, *comm;
    long epochs, batch, threads, producers, slots, seed, limit_train, limit_test, max_skipped;
    double lr; // < 0: the model's own
} options;

// The model's interface as this trainer uses it.
typedef struct interface {
    dlrt_tensor_desc x, y, out; // data input, label input, the [N, C] float output
    int64_t n_classes;
} interface;

// Prints `what` and the runtime's last error; returns 1 (the exit status).
static int rt_error(const char *what) {
    fprintf(stderr, "train_fmnist: %s: %s\n", what, dlrt_last_error());
    return 1;
}

static int usage(const char *msg, const char *arg) {
    fprintf(stderr,
            "train_fmnist: %s '%s'\n"
            "usage: train_fmnist [MODEL.dlg] [--epochs E] [--batch B] [--threads T] "
            "[--loader-threads P] [--prefetch K] [--seed S] [--lr V] [--limit-train N] "
            "[--limit-test N] [--data DIR] [--save CKPT] [--max-skipped-steps N] "
            "[--comm auto|mpi|none]\n",
            msg, arg);
    return 2;
}

static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.model = "samples/mlp_fmnist.dlg",
                   .data = "/usr/share/datasets/fashion-mnist",
                   .epochs = 1,
                   .batch = 128,
                   .producers = 2,
                   .slots = 4,
                   .max_skipped = 10,
                   .lr = -1};
    struct {
        const char *flag;
        long *value;
        long min;
    } ints[] = {{"--epochs", &o->epochs, 1},
                {"--batch", &o->batch, 1},
                {"--threads", &o->threads, 1},
                {"--loader-threads", &o->producers, 1},
                {"--prefetch", &o->slots, 2},
                {"--seed", &o->seed, 0},
                {"--limit-train", &o->limit_train, 1},
                {"--limit-test", &o->limit_test, 1},
                {"--max-skipped-steps", &o->max_skipped, 0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            o->model = a;
            continue;
        }
        size_t k = 0;
        while (k < sizeof ints / sizeof ints[0] && strcmp(a, ints[k].flag) != 0) {
            k++;
        }
        bool is_int = k < sizeof ints / sizeof ints[0];
        if (!is_int && strcmp(a, "--data") != 0 && strcmp(a, "--save") != 0 &&
            strcmp(a, "--lr") != 0 && strcmp(a, "--comm") != 0) {
            return usage("unknown flag", a);
        }
        if (i + 1 >= argc) {
            return usage("missing value after", a);
        }
        const char *v = argv[++i];
        if (strcmp(a, "--data") == 0) {
            o->data = v;
            continue;
        }
        if (strcmp(a, "--save") == 0) {
            o->save = v;
            continue;
        }
        if (strcmp(a, "--comm") == 0) {
            if (strcmp(v, "auto") != 0 && strcmp(v, "mpi") != 0 && strcmp(v, "none") != 0) {
                return usage("--comm expects auto, mpi or none, got", v);
            }
            o->comm = v;
            continue;
        }
        if (strcmp(a, "--lr") == 0) {
            char *end = NULL;
            o->lr = strtod(v, &end);
            if (!*v || *end || !(o->lr >= 0)) {
                return usage("--lr expects a number >= 0, got", v);
            }
            continue;
        }
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!*v || *end || errno == ERANGE || n < ints[k].min) {
            return usage("expected an integer in range, got", v);
        }
        *ints[k].value = n;
    }
    return 0;
}

// --comm: mpi, none, or auto (the default): MPI when mpirun (or another launcher) started more
// than one rank.
static bool wants_mpi(const char *comm) {
    if (comm && strcmp(comm, "auto") != 0) {
        return strcmp(comm, "mpi") == 0;
    }
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) {
            return true;
        }
    }
    return false;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// Compiles the model with N = batch through the cache (a lookup after the first run) and loads
// the artifact. Compile errors are printed as `file:line:col: error: ...`.
static int compile_and_load(const options *o, dlrt_model **out) {
    const char *dim_names[1] = {"N"};
    int64_t dim_values[1] = {o->batch};
    void *art = NULL;
    size_t art_len = 0;
    int hit = 0;
    char *messages = NULL;
    double t0 = now_ms();
    int rc = dlcc_lib_compile(o->model, dim_names, dim_values, 1, NULL, 1, -1, &art, &art_len, &hit,
                              &messages);
    if (messages) {
        fputs(messages, stderr); // errors, or a warning such as an unusable cache
    }
    dlcc_lib_free(messages);
    if (rc != 0) {
        return 1;
    }
    fprintf(stderr, "train_fmnist: %s: %s (%.0f ms)\n", o->model, hit ? "cache hit" : "compiled",
            now_ms() - t0);
    dlrt_status rs = dlrt_model_load_memory(art, art_len, out);
    dlcc_lib_free(art); // the runtime keeps what it needs
    return rs == DLRT_OK ? 0 : rt_error(o->model);
}

// Finds the data and label inputs and the [N, C] float output.
static int find_interface(const dlrt_model *m, const char *path, interface *io) {
    memset(io, 0, sizeof *io);
    for (size_t i = 0; i < dlrt_model_num_inputs(m); i++) {
        dlrt_tensor_desc t;
        dlrt_model_input(m, i, &t);
        if (t.dtype == DLRT_FLOAT32 && !io->x.name) {
            io->x = t;
        } else if ((t.dtype == DLRT_INT64 || t.dtype == DLRT_INT32) && t.rank == 1) {
            io->y = t;
        }
    }
    for (size_t i = 0; i < dlrt_model_num_outputs(m) && !io->out.name; i++) {
        dlrt_tensor_desc t;
        dlrt_model_output(m, i, &t);
        if (t.dtype == DLRT_FLOAT32 && t.rank == 2 && io->x.name && t.dims[0] == io->x.dims[0]) {
            io->out = t;
            io->n_classes = t.dims[1];
        }
    }
    if (!io->x.name || !io->y.name || !io->out.name || !dlrt_model_has_train_step(m)) {
        fprintf(stderr,
                "train_fmnist: %s: expected a train block, a float data input, an int label "
                "input [N] and a float output [N, C]\n",
                path);
        return 1;
    }
    return 0;
}

// "DIR/NAME.gz" when it exists, else "DIR/NAME" (the loader reads both).
static void data_path(const char *dir, const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s.gz", dir, name);
    FILE *f = fopen(buf, "rb");
    if (f) {
        fclose(f);
    } else {
        snprintf(buf, size, "%s/%s", dir, name);
    }
}

// A loader over one IDX image/label pair with the common options; the caller sets the rest.
static dlrt_loader_options loader_options(const options *o, const interface *io) {
    dlrt_loader_options lo;
    dlrt_loader_options_init(&lo);
    lo.batch_size = o->batch;
    lo.producers = (int)o->producers;
    lo.slots = (int)o->slots;
    lo.seed = (uint64_t)o->seed;
    lo.scale = 1.0f / 255.0f;
    lo.labels = io->y.dtype == DLRT_INT32 ? DLRT_INT32 : DLRT_INT64;
    lo.n_classes = io->n_classes;
    return lo;
}

// Exit status of a run that diverged.
#define EXIT_DIVERGED 4

// The runtime's training loop (dlrt_train_run) calls this after every step and epoch: the
// first non-finite step gets a warning, and every epoch its line on stdout. `user`: the number
// of data-parallel ranks (samples/s counts them all); 0 on a rank other than 0 (quiet: every
// rank takes the same decisions, rank 0 reports them).
static int on_event(void *user, const dlrt_train_event *ev) {
    int world = *(const int *)user;
    if (world == 0) {
        return 0;
    }
    if (ev->kind == DLRT_TRAIN_EVENT_STEP && ev->nonfinite && ev->guard->first) {
        const dlrt_step_info *si = &ev->info;
        fprintf(stderr,
                "train_fmnist: warning: step %lld (epoch %lld, batch %lld) is non-finite "
                "(loss %g, grad_norm %g)%s\n",
                (long long)ev->step + 1, (long long)ev->epoch + 1, (long long)ev->batch + 1,
                isnan(si->loss) ? NAN : si->loss, // NAN: "nan", never "-nan"
                isnan(si->grad_norm) ? NAN : si->grad_norm,
                si->skipped ? "; its update was skipped" : "");
    }
    if (ev->kind == DLRT_TRAIN_EVENT_STEP && ev->nonfinite && ev->guard->stop) {
        fflush(stdout);
        fprintf(stderr,
                "train_fmnist: error: training diverged at step %lld (epoch %lld, batch "
                "%lld): %lld non-finite steps without %lld finite ones in a row between them "
                "(--max-skipped-steps %lld); "
                "nothing saved\n",
                (long long)ev->step + 1, (long long)ev->epoch + 1, (long long)ev->batch + 1,
                (long long)ev->guard->run, (long long)ev->guard->max, (long long)ev->guard->max);
    }
    if (ev->kind == DLRT_TRAIN_EVENT_EPOCH) {
        double steps = (double)ev->steps_per_epoch, el = ev->epoch_s;
        printf("epoch %lld: mean loss %.6g, %.2f s, %.0f samples/s, skipped %lld, data wait "
               "%.3f ms/batch\n",
               (long long)ev->epoch + 1, ev->loss_sum / steps, el,
               steps * (double)ev->batch_size * world / el, (long long)ev->skipped,
               ev->wait_ms / steps);
        fflush(stdout);
    }
    return 0;
}

// Trains `epochs` epochs with the runtime's loop: each batch bound in place, the model's lr
// (or --lr), and the non-finite guard (--max-skipped-steps; EXIT_DIVERGED when it stops).
static int train(dlrt_session *s, const interface *io, dlrt_loader *ld, long epochs,
                 long max_skipped, int *report_world) {
    dlrt_train_options to;
    dlrt_train_options_init(&to);
    to.data_input = io->x.name;
    to.label_input = io->y.name;
    to.epochs = epochs;
    to.max_skipped = max_skipped;
    to.callback = on_event;
    to.user = report_world;
    dlrt_train_result r;
    if (dlrt_train_run(s, ld, &to, &r) != DLRT_OK) {
        return rt_error("train step");
    }
    return r.diverged ? EXIT_DIVERGED : 0;
}

static int evaluate(dlrt_session *s, const interface *io, dlrt_loader *ld) {
    int64_t correct = 0, total = 0;
    if (dlrt_evaluate_accuracy(s, ld, io->x.name, io->y.name, io->out.name, &correct, &total) !=
        DLRT_OK) {
        return rt_error("test set");
    }
    printf("test accuracy: %.4f (%lld/%lld)\n", total ? (double)correct / (double)total : 0.0,
           (long long)correct, (long long)total);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    dlrt_loader *train_ld = NULL, *test_ld = NULL;
    dlrt_comm *comm = NULL;
    int rank = 0, world = 1;
    interface io;
    char images[4096], labels[4096];
    // Data parallelism (under mpirun): MPI's world through the runtime's communicator.
    if (wants_mpi(o.comm)) {
        if (dlrt_comm_open_mpi(NULL, NULL, &comm) != DLRT_OK) {
            rc = rt_error("--comm mpi");
            goto out;
        }
        rank = dlrt_comm_rank(comm);
        world = dlrt_comm_size(comm);
    }
    if ((rc = compile_and_load(&o, &m)) != 0 || (rc = find_interface(m, o.model, &io)) != 0) {
        goto out;
    }

    // The session: params initialised from the artifact, o.threads workers (0: every core).
    dlrt_session_options so;
    dlrt_session_options_init(&so);
    so.threads = (int)o.threads;
    if (dlrt_session_create_ex(m, &so, &s) != DLRT_OK) {
        rc = rt_error("session");
        goto out;
    }
    if (o.lr >= 0 && dlrt_session_set_hparam(s, "lr", o.lr) != DLRT_OK) {
        rc = rt_error("--lr");
        goto out;
    }
    // Collective: checks that every rank runs the same artifact, then broadcasts rank 0's state.
    if (comm && dlrt_session_bind_comm(s, comm, 0) != DLRT_OK) {
        rc = rt_error("data-parallel binding");
        goto out;
    }

    // Training data: shuffled per epoch, normalised with statistics of the samples used.
    dlrt_loader_options lo = loader_options(&o, &io);
    lo.norm = DLRT_LOADER_NORM_COMPUTE;
    lo.epochs = o.epochs;
    lo.limit = o.limit_train;
    lo.shard_count = world; // data-parallel: this rank's shard (DistributedSampler's order)
    lo.shard_index = rank;
    data_path(o.data, "train-images-idx3-ubyte", images, sizeof images);
    data_path(o.data, "train-labels-idx1-ubyte", labels, sizeof labels);
    if (dlrt_loader_create_idx(images, labels, &lo, &train_ld) != DLRT_OK) {
        rc = rt_error("training data");
        goto out;
    }
    dlrt_loader_info info;
    dlrt_loader_info_get(train_ld, &info);
    if (info.sample_numel * o.batch != (int64_t)(io.x.nbytes / sizeof(float))) {
        fprintf(stderr, "train_fmnist: %s: input '%s' does not take batches of %ld images\n",
                o.model, io.x.name, o.batch);
        rc = 1;
        goto out;
    }
    if (rank == 0) {
        fprintf(stderr,
                "train_fmnist: %lld samples, %lld steps per epoch, %d step thread(s), %ld loader "
                "thread(s)\n",
                (long long)info.n_samples, (long long)info.batches_per_epoch,
                dlrt_session_threads(s), o.producers);
    }
    if (comm && rank == 0) {
        fprintf(stderr,
                "train_fmnist: data-parallel: %d ranks (MPI), a shard of %lld samples and batch "
                "%ld each, global batch %ld\n",
                world, (long long)info.epoch_samples, o.batch, o.batch * world);
    }
    int report = rank == 0 ? world : 0;
    if ((rc = train(s, &io, train_ld, o.epochs, o.max_skipped, &report)) != 0) {
        goto out;
    }
    if (rank != 0) { // the ranks' params are identical: rank 0 tests and saves
        goto out;
    }

    // Test data: file order, the training statistics, the last batch padded.
    lo = loader_options(&o, &io);
    lo.shuffle = 0;
    lo.epochs = 1;
    lo.last = DLRT_LOADER_PAD_LAST;
    lo.pad_label = 0;
    lo.limit = o.limit_test;
    lo.norm = DLRT_LOADER_NORM_GIVEN;
    lo.n_norm = 1;
    lo.mean[0] = info.mean[0];
    lo.std[0] = info.std[0];
    data_path(o.data, "t10k-images-idx3-ubyte", images, sizeof images);
    data_path(o.data, "t10k-labels-idx1-ubyte", labels, sizeof labels);
    if (dlrt_loader_create_idx(images, labels, &lo, &test_ld) != DLRT_OK) {
        rc = rt_error("test data");
        goto out;
    }
    if ((rc = evaluate(s, &io, test_ld)) != 0) {
        goto out;
    }
    if (o.save && dlrt_session_save(s, o.save) != DLRT_OK) {
        rc = rt_error(o.save);
    }

out:
    dlrt_loader_destroy(test_ld);
    dlrt_loader_destroy(train_ld);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    dlrt_comm_destroy(comm); // after the session bound to it
    return rc;
}
