// tests/loader/test_loader.c — the data loader of libdlrt (dlrt.h, "Data loader"), through the
// public API only (plus base/dl_idx.h to locate and read Fashion-MNIST for comparison).
//
// Determinism across producer counts, the per-epoch shuffle, drop/pad of the last batch,
// normalisation, crop/flip geometry, IDX (real Fashion-MNIST t10k) and .npy (float32, uint8)
// sources, the callback source, errors with their messages, and release/next misuse.
#include "dl_idx.h"
#include "dl_test.h"
#include "dlrt.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// python/dlcc mirrors these structs with ctypes (tests/python checks the same numbers).
_Static_assert(sizeof(dlrt_loader_options) == 248, "python/dlcc/__init__.py _LoaderOptions");
_Static_assert(offsetof(dlrt_loader_options, shard_count) == 216, "_LoaderOptions.shard_count");
_Static_assert(offsetof(dlrt_loader_options, u8_to_unit) == 232, "_LoaderOptions.u8_to_unit");
_Static_assert(offsetof(dlrt_loader_options, start_batch) == 240, "_LoaderOptions.start_batch");
_Static_assert(sizeof(dlrt_train_options) == 104, "python/dlcc/__init__.py _TrainOptions");
_Static_assert(offsetof(dlrt_train_options, start_guard) == 96, "_TrainOptions.start_guard");
_Static_assert(sizeof(dlrt_loader_info) == 240, "python/dlcc/__init__.py _LoaderInfo");
_Static_assert(offsetof(dlrt_loader_info, epoch_samples) == 232, "_LoaderInfo.epoch_samples");

// ---------------------------------------------------------------------------------------------
// Helpers

// Callback source: sample i of shape [C, H, W] (numel elements) holds i * 1000 + k at element k,
// label i. `fail_at` >= 0 makes that sample fail with -5.
typedef struct cb_data {
    int64_t numel;
    int64_t fail_at;
} cb_data;

static int cb_sample(void *user, int64_t index, float *x, int64_t *y) {
    const cb_data *d = user;
    if (index == d->fail_at) {
        return -5;
    }
    for (int64_t k = 0; k < d->numel; k++) {
        x[k] = (float)(index * 1000 + k);
    }
    *y = index;
    return 0;
}

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int i;
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "%s/dlrt-loader-XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(tmpdir)) {
            abort();
        }
    }
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

// Writes a version 1.0 .npy file.
static void write_npy(const char *path, const char *descr, const int64_t *dims, int rank,
                      const void *data, size_t nbytes) {
    char shape[128] = "";
    size_t o = 0;
    for (int i = 0; i < rank; i++) {
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld,%s", (long long)dims[i],
                              i + 1 < rank ? " " : "");
    }
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, shape);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) {
        abort();
    }
    uint16_t hl = (uint16_t)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) {
        fputc(' ', f);
    }
    fputc('\n', f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

static dlrt_loader_options opts_default(void) {
    dlrt_loader_options o;
    dlrt_loader_options_init(&o);
    return o;
}

// ---------------------------------------------------------------------------------------------
// Determinism and order

// Collects every byte of `n_batches` batches (x, labels, n_valid) into one buffer.
static unsigned char *collect(const dlrt_loader_options *o, const char *x_path, const char *y_path,
                              int n_batches, size_t *out_len) {
    dlrt_loader *l = NULL;
    if (dlrt_loader_create_npy(x_path, y_path, o, &l) != DLRT_OK) {
        fprintf(stderr, "create: %s\n", dlrt_last_error());
        return NULL;
    }
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    size_t per = (size_t)o->batch_size * ((size_t)info.sample_numel * 4 + 8) + 8;
    unsigned char *buf = malloc(per * (size_t)n_batches);
    size_t at = 0;
    for (int b = 0; b < n_batches; b++) {
        dlrt_loader_batch bt;
        if (dlrt_loader_next(l, &bt) != DLRT_OK) {
            free(buf);
            dlrt_loader_destroy(l);
            return NULL;
        }
        memcpy(buf + at, bt.x, (size_t)o->batch_size * (size_t)info.sample_numel * 4);
        at += (size_t)o->batch_size * (size_t)info.sample_numel * 4;
        memcpy(buf + at, bt.y, (size_t)o->batch_size * 8);
        at += (size_t)o->batch_size * 8;
        memcpy(buf + at, &bt.n_valid, 8);
        at += 8;
        if (dlrt_loader_release(l, &bt) != DLRT_OK) {
            free(buf);
            dlrt_loader_destroy(l);
            return NULL;
        }
    }
    dlrt_loader_destroy(l);
    *out_len = at;
    return buf;
}

// 53 images [3, 6, 7] uint8 with labels 0..52, the worst case for ordering: shuffle, pad, crop,
// flip, computed normalisation, small ring.
static void write_images(const char *xp, const char *yp, int64_t n) {
    int64_t dims[4] = {n, 3, 6, 7}, ydims[1] = {n};
    size_t numel = (size_t)n * 3 * 6 * 7;
    unsigned char *px = malloc(numel);
    int64_t *lab = malloc((size_t)n * 8);
    for (size_t i = 0; i < numel; i++) {
        px[i] = (unsigned char)((i * 37 + i / 11) & 0xff);
    }
    for (int64_t i = 0; i < n; i++) {
        lab[i] = i;
    }
    write_npy(xp, "|u1", dims, 4, px, numel);
    write_npy(yp, "<i8", ydims, 1, lab, (size_t)n * 8);
    free(px);
    free(lab);
}

DL_TEST(loader_deterministic_across_producers) {
    const char *xp = tmp_path("det_x.npy"), *yp = tmp_path("det_y.npy");
    write_images(xp, yp, 53);
    dlrt_loader_options o = opts_default();
    o.batch_size = 8;
    o.seed = 1234;
    o.last = DLRT_LOADER_PAD_LAST;
    o.crop_pad = 2;
    o.hflip = 1;
    o.scale = 1.0f / 255.0f;
    o.norm = DLRT_LOADER_NORM_COMPUTE;
    int n_batches = 2 * 7; // two epochs of ceil(53 / 8) = 7 batches
    size_t len1 = 0;
    o.producers = 1;
    o.slots = 1;
    unsigned char *ref = collect(&o, xp, yp, n_batches, &len1);
    DL_CHECK(ref != NULL);
    const int ps[] = {2, 8, 8}, ks[] = {3, 16, 2};
    for (int i = 0; i < 3; i++) {
        o.producers = ps[i];
        o.slots = ks[i];
        size_t len = 0;
        unsigned char *got = collect(&o, xp, yp, n_batches, &len);
        bool same = got && len == len1 && memcmp(got, ref, len) == 0;
        free(got);
        if (!same) {
            free(ref);
            DL_FAIL_("P = %d, K = %d gives other bytes than P = 1", ps[i], ks[i]);
        }
    }
    // Another seed gives another stream.
    o.seed = 1235;
    size_t len2 = 0;
    unsigned char *other = collect(&o, xp, yp, n_batches, &len2);
    bool differs = other && memcmp(other, ref, len1) != 0;
    free(other);
    free(ref);
    DL_CHECK(differs);
}

// Labels of one epoch of a callback loader whose label is the sample index.
static bool epoch_labels(dlrt_loader *l, int64_t n, int64_t *lab, int64_t epoch) {
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    int64_t at = 0;
    for (int64_t b = 0; b < info.batches_per_epoch; b++) {
        dlrt_loader_batch bt;
        if (dlrt_loader_next(l, &bt) != DLRT_OK || bt.epoch != epoch || bt.index != b) {
            return false;
        }
        for (int64_t j = 0; j < bt.n_valid && at < n; j++) {
            // x's first element identifies the sample as well: i * 1000
            if (bt.x[j * info.sample_numel] != (float)(bt.y[j] * 1000)) {
                return false;
            }
            lab[at++] = bt.y[j];
        }
        if (dlrt_loader_release(l, &bt) != DLRT_OK) {
            return false;
        }
    }
    return at == n;
}

static bool is_perm(const int64_t *v, int64_t n) {
    char *seen = calloc((size_t)n, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = v[i] >= 0 && v[i] < n && !seen[v[i]];
        if (ok) {
            seen[v[i]] = 1;
        }
    }
    free(seen);
    return ok;
}

DL_TEST(loader_shuffle_is_a_permutation_per_epoch) {
    enum { N = 1000 };
    cb_data d = {2, -1};
    int64_t dims[1] = {2};
    dlrt_loader_options o = opts_default();
    o.batch_size = 10;
    o.producers = 3;
    o.seed = 7;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims, 1, cb_sample, &d, &o, &l));
    static int64_t e0[N], e1[N], e2[N];
    bool ok = epoch_labels(l, N, e0, 0) && epoch_labels(l, N, e1, 1) && epoch_labels(l, N, e2, 2);
    dlrt_loader_destroy(l);
    DL_CHECK(ok);
    DL_CHECK(is_perm(e0, N) && is_perm(e1, N) && is_perm(e2, N));
    // dlrt_loader_sample_index predicts every position of every epoch without producing it.
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims, 1, cb_sample, &d, &o, &l));
    int64_t bad_index = 0, got = -1;
    for (int64_t i = 0; i < N; i++) {
        bad_index += dlrt_loader_sample_index(l, 0, i, &got) != DLRT_OK || got != e0[i];
        bad_index += dlrt_loader_sample_index(l, 2, i, &got) != DLRT_OK || got != e2[i];
    }
    DL_CHECK_EQ_I64(bad_index, 0);
    DL_CHECK_EQ_I64(dlrt_loader_sample_index(l, 0, N, &got), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "no position 1000 of epoch 0 (positions 0..999") != NULL);
    DL_CHECK_EQ_I64(dlrt_loader_sample_index(l, -1, 0, &got), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_loader_sample_index(l, 0, 0, NULL), DLRT_ERR_INVALID_ARG);
    dlrt_loader_destroy(l);
    int same01 = 0, fixed = 0;
    for (int i = 0; i < N; i++) {
        same01 += e0[i] == e1[i];
        fixed += e0[i] == i;
    }
    DL_CHECK(same01 < 20); // independent permutations agree at ~1 place
    DL_CHECK(fixed < 20);
    DL_CHECK(memcmp(e1, e2, sizeof e1) != 0);
    // Every small size is a permutation too (cycle walking over a power-of-four domain).
    for (int64_t n = 1; n <= 70; n++) {
        o.batch_size = 1;
        o.producers = 2;
        DL_CHECK_OK(dlrt_loader_create_callback(n, dims, 1, cb_sample, &d, &o, &l));
        ok = epoch_labels(l, n, e0, 0) && is_perm(e0, n);
        dlrt_loader_destroy(l);
        if (!ok) {
            DL_FAIL_("n = %lld: not a permutation", (long long)n);
        }
    }
    // shuffle = 0: file order, every epoch.
    o.shuffle = 0;
    o.batch_size = 7;
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims, 1, cb_sample, &d, &o, &l));
    ok = epoch_labels(l, N - N % 7, e0, 0) && epoch_labels(l, N - N % 7, e1, 1);
    dlrt_loader_destroy(l);
    DL_CHECK(ok);
    for (int i = 0; i < N - N % 7; i++) {
        DL_CHECK_EQ_I64(e0[i], i);
        DL_CHECK_EQ_I64(e1[i], i);
    }
}

DL_TEST(loader_drop_and_pad_last_batch) {
    cb_data d = {3, -1};
    int64_t dims[1] = {3};
    dlrt_loader_options o = opts_default();
    o.batch_size = 4;
    o.shuffle = 0;
    o.producers = 2;
    dlrt_loader *l = NULL;
    dlrt_loader_info info;
    dlrt_loader_batch b;
    // drop: 10 samples -> 2 batches of 4 per epoch; samples 8, 9 never appear in file order.
    DL_CHECK_OK(dlrt_loader_create_callback(10, dims, 1, cb_sample, &d, &o, &l));
    dlrt_loader_info_get(l, &info);
    DL_CHECK_EQ_I64(info.batches_per_epoch, 2);
    for (int k = 0; k < 5; k++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK_EQ_I64(b.n_valid, 4);
        DL_CHECK_EQ_I64(b.epoch, k / 2);
        DL_CHECK_EQ_I64(b.index, k % 2);
        DL_CHECK_EQ_I64(b.seq, k);
        DL_CHECK_EQ_I64(b.y[0], (k % 2) * 4);
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    // pad: 3 batches, the last with 2 real rows, then zeros and pad_label.
    o.last = DLRT_LOADER_PAD_LAST;
    o.pad_label = -7;
    DL_CHECK_OK(dlrt_loader_create_callback(10, dims, 1, cb_sample, &d, &o, &l));
    dlrt_loader_info_get(l, &info);
    DL_CHECK_EQ_I64(info.batches_per_epoch, 3);
    for (int k = 0; k < 6; k++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK_EQ_I64(b.n_valid, k % 3 == 2 ? 2 : 4);
        if (k % 3 == 2) {
            DL_CHECK_EQ_I64(b.y[0], 8);
            DL_CHECK_EQ_I64(b.y[1], 9);
            DL_CHECK(b.x[3] == 9000.0f && b.x[5] == 9002.0f);
            DL_CHECK_EQ_I64(b.y[2], -7);
            DL_CHECK_EQ_I64(b.y[3], -7);
            for (int i = 6; i < 12; i++) {
                DL_CHECK(b.x[i] == 0.0f);
            }
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    // int32 labels.
    o.labels = DLRT_INT32;
    DL_CHECK_OK(dlrt_loader_create_callback(10, dims, 1, cb_sample, &d, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    DL_CHECK(b.y == NULL && b.y_i32 != NULL);
    DL_CHECK_EQ_I64(b.y_i32[3], 3);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
}

DL_TEST(loader_epochs_end) {
    cb_data d = {1, -1};
    int64_t dims[1] = {1};
    dlrt_loader_options o = opts_default();
    o.batch_size = 3;
    o.epochs = 2;
    o.producers = 4;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(9, dims, 1, cb_sample, &d, &o, &l));
    dlrt_loader_batch b;
    for (int k = 0; k < 6; k++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK(b.x != NULL);
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    for (int k = 0; k < 2; k++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK(b.x == NULL);
        DL_CHECK_EQ_I64(b.n_valid, 0);
        DL_CHECK(dlrt_loader_release(l, &b) == DLRT_ERR_INVALID_ARG); // the end marker
    }
    dlrt_loader_stats st;
    dlrt_loader_stats_get(l, &st);
    DL_CHECK_EQ_I64(st.batches, 6);
    DL_CHECK(st.first_wait_ms >= 0.0 && st.mean_wait_ms >= 0.0 && st.max_wait_ms >= 0.0);
    dlrt_loader_destroy(l);
}

// ---------------------------------------------------------------------------------------------
// Transforms

DL_TEST(loader_normalisation) {
    // 4 samples [2, 1, 3] float32: channel 0 holds i + k, channel 1 holds 10 * (i + k).
    enum { N = 4 };
    float x[N][2][3];
    double s0 = 0, s1 = 0, q0 = 0, q1 = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++) {
            x[i][0][k] = (float)(i + k);
            x[i][1][k] = (float)(10 * (i + k));
            s0 += x[i][0][k] * 0.5;
            q0 += (x[i][0][k] * 0.5) * (x[i][0][k] * 0.5);
            s1 += x[i][1][k] * 0.5;
            q1 += (x[i][1][k] * 0.5) * (x[i][1][k] * 0.5);
        }
    }
    int64_t dims[4] = {N, 2, 1, 3};
    const char *xp = tmp_path("norm_x.npy");
    write_npy(xp, "<f4", dims, 4, x, sizeof x);
    dlrt_loader_options o = opts_default();
    o.batch_size = N;
    o.shuffle = 0;
    o.scale = 0.5f;
    o.norm = DLRT_LOADER_NORM_COMPUTE;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    double m0 = s0 / 12, m1 = s1 / 12, sd0 = sqrt(q0 / 12 - m0 * m0), sd1 = sqrt(q1 / 12 - m1 * m1);
    DL_CHECK_EQ_I64(info.n_channels, 2);
    DL_CHECK_EQ_I64(info.sample_rank, 3);
    DL_CHECK_NEAR(info.mean[0], m0, 1e-6, 1e-6);
    DL_CHECK_NEAR(info.mean[1], m1, 1e-6, 1e-6);
    DL_CHECK_NEAR(info.std[0], sd0, 1e-6, 1e-6);
    DL_CHECK_NEAR(info.std[1], sd1, 1e-6, 1e-6);
    dlrt_loader_batch b;
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    DL_CHECK(b.y == NULL && b.y_i32 == NULL); // no label file
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++) {
            DL_CHECK_NEAR(b.x[i * 6 + k], (x[i][0][k] * 0.5 - m0) / sd0, 1e-5, 1e-5);
            DL_CHECK_NEAR(b.x[i * 6 + 3 + k], (x[i][1][k] * 0.5 - m1) / sd1, 1e-5, 1e-5);
            sum += b.x[i * 6 + 3 + k];
            sq += b.x[i * 6 + 3 + k] * b.x[i * 6 + 3 + k];
        }
    }
    DL_CHECK_NEAR(sum / 12, 0.0, 1e-5, 0);
    DL_CHECK_NEAR(sq / 12, 1.0, 1e-5, 0);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
    // Given values: one for all channels, then per channel.
    o.norm = DLRT_LOADER_NORM_GIVEN;
    o.n_norm = 1;
    o.mean[0] = 1.0f;
    o.std[0] = 4.0f;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    DL_CHECK(b.x[2 * 6 + 4] == (x[2][1][1] * 0.5f - 1.0f) / 4.0f);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
    o.n_norm = 2;
    o.mean[1] = -3.0f;
    o.std[1] = 0.25f;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    DL_CHECK(b.x[2 * 6 + 1] == (x[2][0][1] * 0.5f - 1.0f) / 4.0f);
    DL_CHECK(b.x[2 * 6 + 4] == (x[2][1][1] * 0.5f + 3.0f) / 0.25f);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
}

DL_TEST(loader_crop_and_flip) {
    // 200 samples [2, 4, 5] (callback: element k of sample i is i * 1000 + k), crop_pad 1 + flip.
    enum { C = 2, H = 4, W = 5, N = 200 };
    cb_data d = {C * H * W, -1};
    int64_t dims[3] = {C, H, W};
    dlrt_loader_options o = opts_default();
    o.batch_size = 8;
    o.producers = 4;
    o.crop_pad = 1;
    o.hflip = 1;
    o.seed = 99;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims, 3, cb_sample, &d, &o, &l));
    int seen[3][3][2] = {{{0}}}; // (dy, dx, flip) counts
    for (int bi = 0; bi < N / 8; bi++) {
        dlrt_loader_batch b;
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        for (int j = 0; j < 8; j++) {
            const float *img = b.x + j * C * H * W;
            int64_t i = b.y[j];
            int matches = 0;
            for (int dy = 0; dy < 3; dy++) {
                for (int dx = 0; dx < 3; dx++) {
                    for (int fl = 0; fl < 2; fl++) {
                        bool ok = true;
                        for (int c = 0; c < C && ok; c++) {
                            for (int y = 0; y < H && ok; y++) {
                                for (int x = 0; x < W && ok; x++) {
                                    int sy = y + dy - 1, sx = (fl ? W - 1 - x : x) + dx - 1;
                                    float want = 0.0f;
                                    if (sy >= 0 && sy < H && sx >= 0 && sx < W) {
                                        want = (float)(i * 1000 + (c * H + sy) * W + sx);
                                    }
                                    ok = img[(c * H + y) * W + x] == want;
                                }
                            }
                        }
                        if (ok) {
                            matches++;
                            seen[dy][dx][fl]++;
                        }
                    }
                }
            }
            if (matches != 1) {
                DL_FAIL_("sample %lld matches %d crop/flip candidates, expected 1", (long long)i,
                         matches);
            }
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    for (int dy = 0; dy < 3; dy++) {
        for (int dx = 0; dx < 3; dx++) {
            for (int fl = 0; fl < 2; fl++) {
                // 200 draws over 18 outcomes: each expected ~11, all must occur.
                if (seen[dy][dx][fl] == 0) {
                    DL_FAIL_("crop (%d, %d) flip %d never drawn", dy, dx, fl);
                }
            }
        }
    }
    // Flip only, on [H, W] samples: each row is the original or its mirror.
    int64_t dims2[2] = {H, W};
    cb_data d2 = {H * W, -1};
    o.crop_pad = 0;
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims2, 2, cb_sample, &d2, &o, &l));
    dlrt_loader_batch b;
    int flipped = 0;
    for (int bi = 0; bi < N / 8; bi++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        for (int j = 0; j < 8; j++) {
            const float *img = b.x + j * H * W;
            int64_t i = b.y[j];
            bool fl = img[0] != (float)(i * 1000);
            flipped += fl;
            for (int y = 0; y < H; y++) {
                for (int x = 0; x < W; x++) {
                    DL_CHECK(img[y * W + x] == (float)(i * 1000 + y * W + (fl ? W - 1 - x : x)));
                }
            }
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    DL_CHECK(flipped > N / 4 && flipped < 3 * N / 4);
}

// ---------------------------------------------------------------------------------------------
// Sources

DL_TEST(loader_idx_fashion_mnist_t10k) {
    dl_idx_mnist_paths p;
    char err[512];
    if (dl_idx_find_mnist_files(dl_idx_default_fashion_mnist_dir(), &p, err, sizeof err) != DL_OK) {
        printf("  (skipped: %s)\n", err);
        return;
    }
    dl_idx img = {0}, lab = {0};
    DL_CHECK_OK(dl_idx_read(p.path[DL_IDX_TEST_IMAGES], &img, err, sizeof err));
    DL_CHECK_OK(dl_idx_read(p.path[DL_IDX_TEST_LABELS], &lab, err, sizeof err));
    dlrt_loader_options o = opts_default();
    o.batch_size = 100;
    o.shuffle = 0;
    o.producers = 4;
    o.slots = 8;
    o.scale = 1.0f / 255.0f;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(
        dlrt_loader_create_idx(p.path[DL_IDX_TEST_IMAGES], p.path[DL_IDX_TEST_LABELS], &o, &l));
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    DL_CHECK_EQ_I64(info.n_samples, 10000);
    DL_CHECK_EQ_I64(info.batches_per_epoch, 100);
    DL_CHECK_EQ_I64(info.sample_rank, 2);
    DL_CHECK_EQ_I64(info.sample_dims[0], 28);
    DL_CHECK_EQ_I64(info.sample_dims[1], 28);
    const unsigned char *px = img.data, *lb = lab.data;
    int64_t hist[10] = {0};
    bool ok = true;
    for (int bi = 0; bi < 100 && ok; bi++) {
        dlrt_loader_batch b;
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        for (int j = 0; j < 100 && ok; j++) {
            int64_t i = bi * 100 + j;
            ok = b.y[j] == lb[i];
            hist[b.y[j] % 10]++;
            for (int k = 0; k < 784 && ok; k++) {
                ok = b.x[j * 784 + k] == (float)px[i * 784 + k] * (1.0f / 255.0f);
            }
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    dl_idx_free(&img);
    dl_idx_free(&lab);
    dl_idx_mnist_paths_fini(&p);
    DL_CHECK(ok);
    for (int c = 0; c < 10; c++) {
        DL_CHECK_EQ_I64(hist[c], 1000); // the t10k set is balanced
    }
}

DL_TEST(loader_npy_float32_and_uint8) {
    // float32 x [6, 3], int64 y.
    float xf[6][3];
    int64_t y64[6];
    for (int i = 0; i < 6; i++) {
        for (int k = 0; k < 3; k++) {
            xf[i][k] = (float)i * 0.25f - (float)k;
        }
        y64[i] = 100 + i;
    }
    int64_t d2[2] = {6, 3}, d1[1] = {6};
    const char *xp = tmp_path("f32_x.npy"), *yp = tmp_path("f32_y.npy");
    write_npy(xp, "<f4", d2, 2, xf, sizeof xf);
    write_npy(yp, "<i8", d1, 1, y64, sizeof y64);
    dlrt_loader_options o = opts_default();
    o.batch_size = 6;
    o.shuffle = 0;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l));
    dlrt_loader_batch b;
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    DL_CHECK(memcmp(b.x, xf, sizeof xf) == 0);
    DL_CHECK(memcmp(b.y, y64, sizeof y64) == 0);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
    // uint8 x [5, 2, 2], uint8 y, scaled.
    unsigned char xu[5][4], yu[5];
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 4; k++) {
            xu[i][k] = (unsigned char)(i * 50 + k);
        }
        yu[i] = (unsigned char)(9 - i);
    }
    int64_t d3[3] = {5, 2, 2}, d1b[1] = {5};
    const char *xp2 = tmp_path("u8_x.npy"), *yp2 = tmp_path("u8_y.npy");
    write_npy(xp2, "|u1", d3, 3, xu, sizeof xu);
    write_npy(yp2, "|u1", d1b, 1, yu, sizeof yu);
    o.batch_size = 5;
    o.scale = 0.5f;
    DL_CHECK_OK(dlrt_loader_create_npy(xp2, yp2, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    for (int i = 0; i < 5; i++) {
        DL_CHECK_EQ_I64(b.y[i], 9 - i);
        for (int k = 0; k < 4; k++) {
            DL_CHECK(b.x[i * 4 + k] == (float)xu[i][k] * 0.5f);
        }
    }
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
}

// limit: the first N samples only (order, batches per epoch and normalisation over those);
// n_classes: labels checked at creation for files, as made for a callback.
DL_TEST(loader_limit_and_label_range) {
    unsigned char xu[8], yu[8];
    for (int i = 0; i < 8; i++) {
        xu[i] = (unsigned char)(i < 4 ? 10 : 200); // the first four are all 10
        yu[i] = (unsigned char)(i < 6 ? i : 12);   // samples 6 and 7 have label 12
    }
    int64_t d2[2] = {8, 1}, d1[1] = {8};
    const char *xp = tmp_path("lim_x.npy"), *yp = tmp_path("lim_y.npy");
    write_npy(xp, "|u1", d2, 2, xu, sizeof xu);
    write_npy(yp, "|u1", d1, 1, yu, sizeof yu);
    dlrt_loader_options o = opts_default();
    o.batch_size = 2;
    o.n_classes = 10;
    dlrt_loader *l = NULL;
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(xp, yp, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "label 12 of sample 6 is outside [0, 10)") != NULL);
    DL_CHECK(l == NULL);
    o.limit = 4;
    o.norm = DLRT_LOADER_NORM_COMPUTE;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l));
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    DL_CHECK_EQ_I64(info.n_samples, 4);
    DL_CHECK_EQ_I64(info.batches_per_epoch, 2);
    DL_CHECK(info.mean[0] == 10.0f); // over the first four samples only
    for (int k = 0; k < 4; k++) {
        dlrt_loader_batch b;
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK(b.y[0] < 4 && b.y[1] < 4);
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    dlrt_loader_destroy(l);
    o = opts_default();
    o.limit = -1;
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(xp, yp, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "limit must be >= 0") != NULL);
    // A callback's labels (label = index) are checked as samples are made.
    cb_data d = {2, -1};
    int64_t dims[1] = {2};
    o = opts_default();
    o.batch_size = 10;
    o.shuffle = 0;
    o.n_classes = 15;
    DL_CHECK_OK(dlrt_loader_create_callback(40, dims, 1, cb_sample, &d, &o, &l));
    // Batch 1 (samples 10..19) fails; a failure is sticky and may be seen before batch 0.
    dlrt_loader_batch b;
    dlrt_status st = dlrt_loader_next(l, &b);
    if (st == DLRT_OK) {
        DL_CHECK_OK(dlrt_loader_release(l, &b));
        st = dlrt_loader_next(l, &b);
    }
    DL_CHECK_EQ_I64(st, DLRT_ERR_IO);
    DL_CHECK(strstr(dlrt_last_error(), "label 15 of sample 15 is outside [0, 15)") != NULL);
    dlrt_loader_destroy(l);
}

// Sample i of an npy pair of n (<= 16) samples: pixel i, label i.
static void write_counting(const char *xp, const char *yp, int n) {
    unsigned char xu[16];
    int64_t y[16];
    for (int i = 0; i < n; i++) {
        xu[i] = (unsigned char)i;
        y[i] = i;
    }
    int64_t d2[2] = {n, 1}, d1[1] = {n};
    write_npy(xp, "|u1", d2, 2, xu, (size_t)n);
    write_npy(yp, "<i8", d1, 1, y, (size_t)n * sizeof *y);
}

// Shards (data parallelism): with the same seed, shard r of W takes positions r, r+W, ... of
// the epoch-wide order, ceil(N / W) each, the last wrapping round; the W shards of an epoch
// cover every sample, and shard_count 1 is the unsharded loader.
DL_TEST(loader_shards_cover_every_sample) {
    enum { N = 10, W = 3 };
    const char *xp = tmp_path("shard_x.npy"), *yp = tmp_path("shard_y.npy");
    write_counting(xp, yp, N);
    dlrt_loader_options o = opts_default();
    o.batch_size = 2;
    o.seed = 7;
    o.epochs = 2;
    int64_t whole[2][N];
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l)); // the unsharded epoch order
    for (int e = 0; e < 2; e++) {
        for (int p = 0; p < N; p++) {
            DL_CHECK_OK(dlrt_loader_sample_index(l, e, p, &whole[e][p]));
        }
    }
    dlrt_loader_destroy(l);
    o.shard_count = W;
    for (int e = 0; e < 2; e++) {
        int seen[N] = {0};
        for (int r = 0; r < W; r++) {
            o.shard_index = r;
            DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l));
            dlrt_loader_info info;
            dlrt_loader_info_get(l, &info);
            DL_CHECK_EQ_I64(info.n_samples, N);
            DL_CHECK_EQ_I64(info.epoch_samples, 4); // ceil(10 / 3)
            DL_CHECK_EQ_I64(info.batches_per_epoch, 2);
            for (int p = 0; p < 4; p++) {
                int64_t idx = -1;
                DL_CHECK_OK(dlrt_loader_sample_index(l, e, p, &idx));
                DL_CHECK_EQ_I64(idx, whole[e][(p * W + r) % N]);
                seen[idx]++;
            }
            // The batches hold those samples, in that order (epoch e: batches 2e, 2e+1).
            dlrt_loader_batch b;
            for (int k = 0; k < 4; k++) {
                DL_CHECK_OK(dlrt_loader_next(l, &b));
                if (b.epoch == e) {
                    for (int j = 0; j < 2; j++) {
                        DL_CHECK_EQ_I64(b.y[j], whole[e][((b.index * 2 + j) * W + r) % N]);
                    }
                }
                DL_CHECK_OK(dlrt_loader_release(l, &b));
            }
            dlrt_loader_destroy(l);
        }
        int twice = 0;
        for (int i = 0; i < N; i++) {
            DL_CHECK(seen[i] >= 1);
            twice += seen[i] == 2;
        }
        DL_CHECK_EQ_I64(twice, 2); // 12 positions over 10 samples: two wrapped round
    }
    o.shard_index = W;
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(xp, yp, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "shard_index 3 must lie in 0..shard_count-1") != NULL);
}

// Every shard at once (DLRT_LOADER_ALL_SHARDS, a session of chunks): batch b is W chunks of
// B / W rows, chunk r holding what shard r's own loader (batch B / W) gives as batch b; positions
// follow the rows (b * B + j), then the dropped tail shard by shard.
DL_TEST(loader_all_shards_are_chunks) {
    enum { N = 10, W = 2, BS = 2 };
    const char *xp = tmp_path("all_x.npy"), *yp = tmp_path("all_y.npy");
    write_counting(xp, yp, N);
    dlrt_loader_options o = opts_default();
    o.batch_size = BS;
    o.seed = 11;
    o.epochs = 2;
    o.shard_count = W;
    int64_t rank_y[W][2][4]; // shard r, epoch, 2 batches x BS rows (5 positions: 1 dropped)
    dlrt_loader *l = NULL;
    for (int r = 0; r < W; r++) {
        o.shard_index = r;
        DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l));
        for (int k = 0; k < 4; k++) {
            dlrt_loader_batch b;
            DL_CHECK_OK(dlrt_loader_next(l, &b));
            for (int j = 0; j < BS; j++) {
                rank_y[r][b.epoch][b.index * BS + j] = b.y[j];
            }
            DL_CHECK_OK(dlrt_loader_release(l, &b));
        }
        dlrt_loader_destroy(l);
    }
    o.shard_index = DLRT_LOADER_ALL_SHARDS;
    o.batch_size = W * BS;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, yp, &o, &l));
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    DL_CHECK_EQ_I64(info.batches_per_epoch, 2);
    DL_CHECK_EQ_I64(info.epoch_samples, 10); // W x ceil(10 / W)
    for (int k = 0; k < 4; k++) {
        dlrt_loader_batch b;
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK_EQ_I64(b.n_valid, W * BS);
        for (int j = 0; j < W * BS; j++) {
            int64_t idx = -1;
            DL_CHECK_EQ_I64(b.y[j], rank_y[j / BS][b.epoch][b.index * BS + j % BS]);
            DL_CHECK_OK(dlrt_loader_sample_index(l, b.epoch, b.index * W * BS + j, &idx));
            DL_CHECK_EQ_I64(idx, b.y[j]);
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    int64_t tail = -1;
    DL_CHECK_OK(dlrt_loader_sample_index(l, 0, 9, &tail)); // shard 1's 5th position, dropped
    DL_CHECK(tail >= 0 && tail < N);
    dlrt_loader_destroy(l);
    o.batch_size = 3; // not W chunks
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(xp, yp, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "a multiple of shard_count (2)") != NULL);
}

// u8_to_unit: uint8 pixels become x / 255 (then scale); other types only get scale.
DL_TEST(loader_u8_to_unit) {
    unsigned char xu[2][3] = {{0, 51, 255}, {1, 2, 3}};
    float xf[2][3] = {{0.5f, 51.0f, 255.0f}, {1, 2, 3}};
    int64_t d2[2] = {2, 3};
    const char *xp = tmp_path("unit_u8.npy"), *xp2 = tmp_path("unit_f32.npy");
    write_npy(xp, "|u1", d2, 2, xu, sizeof xu);
    write_npy(xp2, "<f4", d2, 2, xf, sizeof xf);
    dlrt_loader_options o = opts_default();
    o.batch_size = 2;
    o.shuffle = 0;
    o.u8_to_unit = 1;
    o.scale = 2.0f;
    dlrt_loader *l = NULL;
    dlrt_loader_batch b;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    for (int k = 0; k < 6; k++) {
        DL_CHECK(b.x[k] == (float)xu[k / 3][k % 3] * (2.0f / 255.0f));
    }
    DL_CHECK(b.x[2] == 2.0f);
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
    DL_CHECK_OK(dlrt_loader_create_npy(xp2, NULL, &o, &l));
    DL_CHECK_OK(dlrt_loader_next(l, &b));
    for (int k = 0; k < 6; k++) {
        DL_CHECK(b.x[k] == xf[k / 3][k % 3] * 2.0f);
    }
    DL_CHECK_OK(dlrt_loader_release(l, &b));
    dlrt_loader_destroy(l);
}

// A NaN or Inf in a file is refused at creation, naming the file, the sample and the element
// (only the samples used count: a limit before it lets the file through); a callback's
// non-finite sample fails the loader as it is made.
static int cb_nan_at_7(void *user, int64_t index, float *x, int64_t *y) {
    (void)user;
    x[0] = (float)index;
    x[1] = index == 7 ? NAN : 1.0f;
    *y = 0;
    return 0;
}

DL_TEST(loader_refuses_non_finite_data) {
    float xf[6][2];
    for (int i = 0; i < 6; i++) {
        xf[i][0] = (float)i;
        xf[i][1] = 1.0f;
    }
    xf[4][1] = -INFINITY;
    int64_t d2[2] = {6, 2};
    const char *xp = tmp_path("inf_x.npy");
    write_npy(xp, "<f4", d2, 2, xf, sizeof xf);
    dlrt_loader_options o = opts_default();
    o.batch_size = 2;
    dlrt_loader *l = NULL;
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(xp, NULL, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(l == NULL);
    DL_CHECK(strstr(dlrt_last_error(), "inf_x.npy: sample 4 holds a non-finite value (-inf at "
                                       "element 1 of 2); the data must be finite") != NULL);
    o.limit = 4;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    dlrt_loader_destroy(l);
    // A finite float64 that overflows float32 is as bad.
    double big[2] = {1.0, 1e300};
    int64_t d1[2] = {2, 1};
    const char *bp = tmp_path("big_x.npy");
    write_npy(bp, "<f8", d1, 2, big, sizeof big);
    o = opts_default();
    o.batch_size = 1;
    DL_CHECK_EQ_I64(dlrt_loader_create_npy(bp, NULL, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "sample 1 holds a non-finite value (inf") != NULL);
    int64_t dims[1] = {2};
    o = opts_default();
    o.batch_size = 4;
    o.shuffle = 0;
    DL_CHECK_OK(dlrt_loader_create_callback(12, dims, 1, cb_nan_at_7, NULL, &o, &l));
    dlrt_loader_batch b;
    dlrt_status st = dlrt_loader_next(l, &b);
    if (st == DLRT_OK) {
        DL_CHECK_OK(dlrt_loader_release(l, &b));
        st = dlrt_loader_next(l, &b);
    }
    DL_CHECK_EQ_I64(st, DLRT_ERR_IO);
    DL_CHECK(strstr(dlrt_last_error(), "gave sample 7 a non-finite value (at element 1 of 2)") !=
             NULL);
    dlrt_loader_destroy(l);
    o.norm = DLRT_LOADER_NORM_COMPUTE; // the creation pass sees it first
    DL_CHECK_EQ_I64(dlrt_loader_create_callback(12, dims, 1, cb_nan_at_7, NULL, &o, &l),
                    DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "the sample callback: sample 7 holds a non-finite") != NULL);
}

// The computed statistics do not cancel: data 1e4 + small noise (std 0.01) has a variance far
// below the rounding error of sum(x^2)/n - mean^2 in float, which the sample-wise merge keeps.
DL_TEST(loader_normalisation_is_accurate_far_from_zero) {
    enum { N = 64, K = 16 };
    static float x[N][K];
    double sum = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < K; k++) {
            x[i][k] = 10000.0f + 0.01f * (float)(((i * 7 + k * 3) % 5) - 2);
            sum += x[i][k];
        }
    }
    double mean = sum / (N * K), sq = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < K; k++) {
            sq += ((double)x[i][k] - mean) * ((double)x[i][k] - mean);
        }
    }
    double sd = sqrt(sq / (N * K));
    int64_t d2[2] = {N, K};
    const char *xp = tmp_path("far_x.npy");
    write_npy(xp, "<f4", d2, 2, x, sizeof x);
    dlrt_loader_options o = opts_default();
    o.batch_size = N;
    o.norm = DLRT_LOADER_NORM_COMPUTE;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_npy(xp, NULL, &o, &l));
    dlrt_loader_info info;
    dlrt_loader_info_get(l, &info);
    // The std is stored as a float: its rounding (2^-24 relative) bounds the error.
    DL_CHECK_NEAR(info.std[0], sd, 0, 1e-6);
    DL_CHECK_NEAR(info.mean[0], mean, 0, 1e-7);
    dlrt_loader_destroy(l);
}

DL_TEST(loader_callback_failure_is_reported) {
    cb_data d = {2, 13};
    int64_t dims[1] = {2};
    dlrt_loader_options o = opts_default();
    o.batch_size = 5;
    o.shuffle = 0;
    o.producers = 2;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(40, dims, 1, cb_sample, &d, &o, &l));
    dlrt_loader_batch b;
    dlrt_status st = DLRT_OK;
    for (int k = 0; k < 8 && st == DLRT_OK; k++) {
        st = dlrt_loader_next(l, &b);
        if (st == DLRT_OK) {
            DL_CHECK_OK(dlrt_loader_release(l, &b));
        }
    }
    DL_CHECK(st == DLRT_ERR_IO);
    DL_CHECK(strstr(dlrt_last_error(), "returned -5 for sample 13") != NULL);
    DL_CHECK(dlrt_loader_next(l, &b) == DLRT_ERR_IO); // sticky
    DL_CHECK(b.x == NULL);
    dlrt_loader_destroy(l);
    // Computing the normalisation calls the callback at creation.
    o.norm = DLRT_LOADER_NORM_COMPUTE;
    DL_CHECK(dlrt_loader_create_callback(40, dims, 1, cb_sample, &d, &o, &l) == DLRT_ERR_IO);
    DL_CHECK(l == NULL);
    DL_CHECK(strstr(dlrt_last_error(), "sample 13 while computing") != NULL);
}

// ---------------------------------------------------------------------------------------------
// Errors and misuse

static bool err_has(dlrt_status got, dlrt_status want, const char *text) {
    if (got != want || !strstr(dlrt_last_error(), text)) {
        fprintf(stderr, "  status %d (want %d), message: %s (want '%s')\n", (int)got, (int)want,
                dlrt_last_error(), text);
        return false;
    }
    return true;
}

DL_TEST(loader_errors) {
    dlrt_loader *l = (dlrt_loader *)1;
    dlrt_loader_options o = opts_default();
    DL_CHECK(err_has(dlrt_loader_create_idx("/nonexistent/imgs", NULL, &o, &l), DLRT_ERR_IO,
                     "/nonexistent/imgs: cannot read the images"));
    DL_CHECK(l == NULL);
    DL_CHECK(err_has(dlrt_loader_create_npy("/nonexistent/x.npy", NULL, &o, &l), DLRT_ERR_IO,
                     "/nonexistent/x.npy: cannot read the samples: No such file"));
    // Counts differ.
    float xf[4] = {1, 2, 3, 4};
    int64_t y3[3] = {0, 1, 2}, d4[1] = {4}, d3[1] = {3};
    const char *xp = tmp_path("e_x.npy"), *yp = tmp_path("e_y.npy");
    write_npy(xp, "<f4", d4, 1, xf, sizeof xf);
    write_npy(yp, "<i8", d3, 1, y3, sizeof y3);
    o.batch_size = 2;
    DL_CHECK(err_has(dlrt_loader_create_npy(xp, yp, &o, &l), DLRT_ERR_INVALID_ARG,
                     "e_y.npy: 3 labels for the 4 samples of"));
    // Float labels.
    const char *yf = tmp_path("e_yf.npy");
    write_npy(yf, "<f4", d4, 1, xf, sizeof xf);
    DL_CHECK(err_has(dlrt_loader_create_npy(xp, yf, &o, &l), DLRT_ERR_INVALID_ARG,
                     "must be a rank-1 integer array"));
    // Not an .npy file / truncated data / unsupported dtype.
    FILE *f = fopen(tmp_path("e_bad.npy"), "wb");
    fputs("hello, world", f);
    fclose(f);
    DL_CHECK(err_has(dlrt_loader_create_npy(tmp_path("e_bad.npy"), NULL, &o, &l), DLRT_ERR_CORRUPT,
                     "e_bad.npy: not a .npy file (bad magic)"));
    write_npy(tmp_path("e_short.npy"), "<f4", d4, 1, xf, 12);
    DL_CHECK(err_has(dlrt_loader_create_npy(tmp_path("e_short.npy"), NULL, &o, &l),
                     DLRT_ERR_CORRUPT, "truncated data: expected 16 bytes, got 12"));
    write_npy(tmp_path("e_c8.npy"), "<c8", d4, 1, xf, 16);
    DL_CHECK(err_has(dlrt_loader_create_npy(tmp_path("e_c8.npy"), NULL, &o, &l),
                     DLRT_ERR_INVALID_ARG, "dtype '<c8'"));
    // An IDX reader error keeps the reader's reason.
    DL_CHECK(err_has(dlrt_loader_create_idx(xp, NULL, &o, &l), DLRT_ERR_CORRUPT,
                     "cannot read the images"));
    // Bad options.
    cb_data d = {1, -1};
    int64_t dims[1] = {1};
    struct {
        const char *field, *msg;
    } cases[] = {
        {"batch", "batch_size must be >= 1 (got 0)"},
        {"producers", "producers must be in 1..256 (got 0)"},
        {"slots", "slots must be in 1..1024 (got 0)"},
        {"std", "finite std > 0 (got mean 0, std 0)"},
        {"crop", "random crop and flip need [H, W] or [C, H, W] samples (the samples have rank 1)"},
        {"drop", "3 samples make no full batch of 4"},
        {"labels", "labels must be DLRT_INT64 or DLRT_INT32"},
        {"nnorm", "3 normalisation channels need [3, H, W] samples"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o = opts_default();
        const char *fl = cases[i].field;
        if (!strcmp(fl, "batch")) {
            o.batch_size = 0;
        } else if (!strcmp(fl, "producers")) {
            o.producers = 0;
        } else if (!strcmp(fl, "slots")) {
            o.slots = 0;
        } else if (!strcmp(fl, "std")) {
            o.norm = DLRT_LOADER_NORM_GIVEN;
            o.n_norm = 1;
            o.std[0] = 0.0f;
        } else if (!strcmp(fl, "crop")) {
            o.crop_pad = 2;
        } else if (!strcmp(fl, "drop")) {
            o.batch_size = 4;
        } else if (!strcmp(fl, "labels")) {
            o.labels = DLRT_FLOAT32;
        } else if (!strcmp(fl, "nnorm")) {
            o.norm = DLRT_LOADER_NORM_GIVEN;
            o.n_norm = 3;
        }
        l = (dlrt_loader *)1;
        if (!err_has(dlrt_loader_create_callback(3, dims, 1, cb_sample, &d, &o, &l),
                     DLRT_ERR_INVALID_ARG, cases[i].msg) ||
            l != NULL) {
            DL_FAIL_("option case %s", fl);
        }
    }
    o = opts_default();
    DL_CHECK(dlrt_loader_create_callback(3, dims, 1, NULL, &d, &o, &l) == DLRT_ERR_INVALID_ARG);
    DL_CHECK(dlrt_loader_create_callback(0, dims, 1, cb_sample, &d, &o, &l) ==
             DLRT_ERR_INVALID_ARG);
    DL_CHECK(dlrt_loader_create_callback(3, dims, 0, cb_sample, &d, &o, &l) ==
             DLRT_ERR_INVALID_ARG);
    DL_CHECK(dlrt_loader_next(NULL, NULL) == DLRT_ERR_INVALID_ARG);
    dlrt_loader_destroy(NULL);
}

DL_TEST(loader_release_and_next_misuse) {
    cb_data d = {2, -1};
    int64_t dims[1] = {2};
    dlrt_loader_options o = opts_default();
    o.batch_size = 2;
    o.slots = 3;
    o.producers = 2;
    dlrt_loader *l = NULL, *l2 = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(20, dims, 1, cb_sample, &d, &o, &l));
    DL_CHECK_OK(dlrt_loader_create_callback(20, dims, 1, cb_sample, &d, &o, &l2));
    dlrt_loader_batch b[4], copy;
    for (int k = 0; k < 3; k++) {
        DL_CHECK_OK(dlrt_loader_next(l, &b[k]));
        DL_CHECK_EQ_I64(b[k].seq, k);
    }
    // All K slots held: next is an error, not a deadlock.
    DL_CHECK(err_has(dlrt_loader_next(l, &b[3]), DLRT_ERR_INVALID_ARG,
                     "batch 3 needs slot 0, still held by batch 0"));
    // Releasing out of order is fine, but batch 3 still needs batch 0's slot.
    copy = b[1];
    DL_CHECK_OK(dlrt_loader_release(l, &b[1]));
    DL_CHECK(b[1].x == NULL);
    DL_CHECK(dlrt_loader_next(l, &b[3]) == DLRT_ERR_INVALID_ARG);
    // Double release, and release of a copy of a released batch.
    DL_CHECK(err_has(dlrt_loader_release(l, &b[1]), DLRT_ERR_INVALID_ARG,
                     "batch 1 is not held by this loader"));
    DL_CHECK(dlrt_loader_release(l, &copy) == DLRT_ERR_INVALID_ARG);
    // A batch of another loader.
    DL_CHECK(dlrt_loader_release(l2, &b[0]) == DLRT_ERR_INVALID_ARG);
    DL_CHECK(dlrt_loader_release(l, NULL) == DLRT_ERR_INVALID_ARG);
    DL_CHECK_OK(dlrt_loader_release(l, &b[0]));
    DL_CHECK_OK(dlrt_loader_next(l, &b[3]));
    DL_CHECK_EQ_I64(b[3].seq, 3);
    DL_CHECK_OK(dlrt_loader_next(l, &b[0])); // seq 4 uses batch 1's slot, released above
    DL_CHECK_EQ_I64(b[0].seq, 4);
    // Destroy with batches still held is fine.
    dlrt_loader_destroy(l);
    dlrt_loader_destroy(l2);
}

DL_TEST(loader_stress_small_ring) {
    // Many producers, a one-slot ring and one-sample batches: every batch in order, every epoch a
    // permutation (races would reorder or lose batches).
    enum { N = 300 };
    cb_data d = {1, -1};
    int64_t dims[1] = {1};
    dlrt_loader_options o = opts_default();
    o.batch_size = 1;
    o.producers = 8;
    o.slots = 1;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_callback(N, dims, 1, cb_sample, &d, &o, &l));
    static int64_t e[N];
    for (int ep = 0; ep < 3; ep++) {
        bool ok = epoch_labels(l, N, e, ep) && is_perm(e, N);
        if (!ok) {
            dlrt_loader_destroy(l);
            DL_FAIL_("epoch %d", ep);
        }
    }
    dlrt_loader_destroy(l);
}

// Named arrays: several arrays of different dtypes shuffled together (row i of each is
// sample i), converted to their dtypes, normalised per channel or globally (computed or given),
// padding rows zero; errors name the file and the input.
DL_TEST(loader_named_arrays) {
    enum { S = 10 };
    double xd[S][2][3];  // float64 [S, 2, 3] -> float32, per channel (2 channels)
    unsigned char mu[S]; // uint8 [S] mask -> float32, global normalisation given
    int32_t yi[S];       // int32 [S] labels -> int64
    for (int i = 0; i < S; i++) {
        for (int c = 0; c < 2; c++) {
            for (int k = 0; k < 3; k++) {
                xd[i][c][k] = c * 100.0 + i + k * 0.5;
            }
        }
        mu[i] = (unsigned char)(i % 2);
        yi[i] = i;
    }
    int64_t dx[3] = {S, 2, 3}, d1[1] = {S};
    const char *xp = tmp_path("arr_x.npy"), *mp = tmp_path("arr_m.npy"),
               *yp = tmp_path("arr_y.npy");
    write_npy(xp, "<f8", dx, 3, xd, sizeof xd);
    write_npy(mp, "|u1", d1, 1, mu, sizeof mu);
    write_npy(yp, "<i4", d1, 1, yi, sizeof yi);
    dlrt_loader_array a[3];
    for (int k = 0; k < 3; k++) {
        dlrt_loader_array_init(&a[k]);
    }
    float gm = 0.5f, gs = 2.0f;
    a[0].name = "x";
    a[0].path = xp;
    a[0].sample_rank = 2;
    a[0].sample_dims[0] = 2;
    a[0].sample_dims[1] = 3;
    a[0].norm = DLRT_LOADER_NORM_COMPUTE;
    a[0].per_channel = 1;
    a[1].name = "m";
    a[1].path = mp;
    a[1].norm = DLRT_LOADER_NORM_GIVEN;
    a[1].n_norm = 1;
    a[1].mean = &gm;
    a[1].std = &gs;
    a[2].name = "y";
    a[2].path = yp;
    a[2].dtype = DLRT_INT64;
    a[2].n_classes = S;
    dlrt_loader_options o = opts_default();
    o.batch_size = 4;
    o.last = DLRT_LOADER_PAD_LAST;
    o.epochs = 1;
    dlrt_loader *l = NULL;
    DL_CHECK_OK(dlrt_loader_create_arrays(a, 3, &o, &l));
    DL_CHECK_EQ_I64((int64_t)dlrt_loader_num_arrays(l), 3);
    dlrt_loader_array_info ai;
    DL_CHECK_OK(dlrt_loader_array_info_get(l, 0, &ai));
    DL_CHECK_EQ_I64(ai.n_channels, 2);
    // channel c: values c*100 + i + k/2 over i < 10, k < 3: mean c*100 + 5, var 8.25 + 1/6
    double sd = sqrt(8.25 + 1.0 / 6.0);
    DL_CHECK(fabs(ai.mean[0] - 5.0) < 1e-5 && fabs(ai.mean[1] - 105.0) < 1e-4);
    DL_CHECK(fabs(ai.std[0] - sd) < 1e-5 && fabs(ai.std[1] - sd) < 1e-5);
    DL_CHECK_EQ_I64((int64_t)ai.batch_bytes, 4 * 6 * 4);
    int64_t seen = 0;
    for (int bi = 0; bi < 3; bi++) {
        dlrt_loader_batch b;
        DL_CHECK_OK(dlrt_loader_next(l, &b));
        DL_CHECK(b.x != NULL && b.y == NULL && b.y_i32 == NULL);
        const void *px, *pm, *py;
        size_t nb = 0;
        DL_CHECK_OK(dlrt_loader_batch_array(l, &b, 0, &px, &nb));
        DL_CHECK_EQ_I64((int64_t)nb, 4 * 6 * 4);
        DL_CHECK_OK(dlrt_loader_batch_array(l, &b, 1, &pm, NULL));
        DL_CHECK_OK(dlrt_loader_batch_array(l, &b, 2, &py, NULL));
        const float *fx = px, *fm = pm;
        const int64_t *iy = py;
        for (int j = 0; j < 4; j++) {
            if (j >= b.n_valid) { // padding: zero everywhere
                DL_CHECK(fx[j * 6] == 0.0f && fm[j] == 0.0f && iy[j] == 0);
                continue;
            }
            int64_t i = iy[j]; // the label is the sample index: every array's row j is sample i
            int64_t want = -1;
            DL_CHECK_OK(dlrt_loader_sample_index(l, 0, bi * 4 + j, &want));
            DL_CHECK_EQ_I64(i, want);
            seen |= (int64_t)1 << i;
            DL_CHECK(fm[j] == ((float)(i % 2) - 0.5f) / 2.0f);
            for (int c = 0; c < 2; c++) {
                for (int k = 0; k < 3; k++) {
                    float v = ((float)xd[i][c][k] - ai.mean[c]) / ai.std[c];
                    DL_CHECK(fx[j * 6 + c * 3 + k] == v);
                }
            }
        }
        DL_CHECK_OK(dlrt_loader_release(l, &b));
    }
    DL_CHECK_EQ_I64(seen, (1 << S) - 1);
    dlrt_loader_destroy(l);

    // Errors: each names the file and the input.
    int64_t d9[2] = {9, 1};
    float f9[9] = {0};
    const char *p9 = tmp_path("arr_9.npy");
    write_npy(p9, "<f4", d9, 2, f9, sizeof f9);
    dlrt_loader_array bad = a[1];
    bad.path = p9;
    dlrt_loader_array two[2] = {a[2], bad};
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(two, 2, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(l == NULL && strstr(dlrt_last_error(), "(input 'm') holds 9 samples") != NULL);
    two[1] = a[0];
    two[1].sample_dims[1] = 4;
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(two, 2, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "(input 'x'): samples of [2, 3] (6 values), expected [2, 4] "
                                       "(8 values) per sample") != NULL);
    two[1] = a[0];
    two[1].dtype = DLRT_INT32; // float64 values for an integer input
    two[1].norm = DLRT_LOADER_NORM_NONE;
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(two, 2, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "float64 values for an int32 input") != NULL);
    two[1] = a[2];
    two[1].name = "y"; // twice
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(two, 2, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "input 'y' is given twice") != NULL);
    two[1] = a[2];
    two[1].name = "z";
    two[1].n_classes = 5; // labels 5..9 are outside
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(two, 2, &o, &l), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "(input 'z'): value 5 of sample 5 is outside [0, 5)") !=
             NULL);
    o.u8_to_unit = 1; // the per-array options are the arrays'
    DL_CHECK_EQ_I64(dlrt_loader_create_arrays(a, 3, &o, &l), DLRT_ERR_INVALID_ARG);
}

static void cleanup(void) {
    if (tmpdir[0]) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", tmpdir);
        }
    }
}

__attribute__((constructor)) static void reg_cleanup(void) {
    atexit(cleanup);
}

DL_TEST_MAIN()
