// tests/base/test_base.c — unit tests for base/: arena, growable buffers, diagnostics rendering,
// number formatting, atomic file writes, half-precision conversion and the counter-based RNG.
// The .npy/safetensors tests live beside it in test_tensor_io.c (same executable).
#include "dl_base.h"
#include "dl_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Arena

DL_TEST(arena_alloc_zeroed_aligned) {
    dl_arena a;
    dl_arena_init(&a);
    for (size_t n = 1; n < 300; n += 7) {
        unsigned char *p = dl_arena_alloc(&a, n);
        DL_CHECK(p != NULL);
        DL_CHECK_EQ_I64((uintptr_t)p % 16, 0);
        for (size_t i = 0; i < n; i++) {
            DL_CHECK_EQ_I64(p[i], 0);
        }
        memset(p, 0xab, n);
    }
    dl_arena_fini(&a);
}

DL_TEST(arena_small_chunks_and_oversized_blocks) {
    dl_arena a;
    dl_arena_init(&a);
    a.chunk_size = 64; // force growth paths
    char *first = dl_arena_strdup(&a, "hello");
    void *big = dl_arena_alloc(&a, 1000); // larger than a chunk: a chunk of its own
    DL_CHECK(big != NULL);
    memset(big, 1, 1000);
    char *second = dl_arena_strndup(&a, "world!!", 5);
    int *ints = DL_ARENA_NEWN(&a, int, 100);
    DL_CHECK(ints != NULL);
    ints[99] = 7;
    DL_CHECK_STR_EQ(first, "hello");
    DL_CHECK_STR_EQ(second, "world");
    int v = 42;
    int *dup = dl_arena_memdup(&a, &v, sizeof v);
    DL_CHECK_EQ_I64(*dup, 42);
    dl_arena_fini(&a);
    DL_CHECK(a.head == NULL);
}

// ---------------------------------------------------------------------------------------------
// Growable buffers

DL_TEST(vec_push_grows) {
    DL_VEC(int) v = {0};
    for (int i = 0; i < 1000; i++) {
        DL_CHECK(DL_VEC_PUSH(&v, i * 3));
    }
    DL_CHECK_EQ_I64(v.len, 1000);
    DL_CHECK(v.cap >= 1000);
    DL_CHECK_EQ_I64(v.data[999], 2997);
    free(v.data);
}

DL_TEST(strbuf_append_printf_take) {
    dl_strbuf b = {0};
    dl_strbuf_puts(&b, "abc");
    dl_strbuf_append(&b, "defgh", 2);
    dl_strbuf_printf(&b, "-%d-%s", 42, "x");
    DL_CHECK_EQ_I64(b.len, 10);
    char *s = dl_strbuf_take(&b);
    DL_CHECK_STR_EQ(s, "abcde-42-x");
    DL_CHECK(b.data == NULL && b.len == 0);
    free(s);
    // Taking an empty buffer gives "" rather than NULL.
    char *e = dl_strbuf_take(&b);
    DL_CHECK_STR_EQ(e, "");
    free(e);
    // Long text goes through the growth path.
    for (int i = 0; i < 500; i++) {
        dl_strbuf_printf(&b, "%04d", i);
    }
    DL_CHECK_EQ_I64(b.len, 2000);
    DL_CHECK(memcmp(b.data + 1996, "0499", 4) == 0);
    dl_strbuf_fini(&b);
}

// ---------------------------------------------------------------------------------------------
// Diagnostics

DL_TEST(diags_render_caret) {
    dl_diags *d;
    DL_CHECK_OK(dl_diags_create(&d));
    const char *src = "model m\ny = MatMul (x, w)\n";
    uint32_t f;
    DL_CHECK_OK(dl_diags_add_file(d, "mlp.dlg", src, strlen(src), &f));
    DL_CHECK_EQ_I64(f, 1);
    DL_CHECK_STR_EQ(dl_diags_file_name(d, f), "mlp.dlg");
    DL_CHECK_STR_EQ(dl_diags_file_name(d, 0), "");
    dl_diag(d, DL_SEV_ERROR, (dl_src_loc){f, 2, 5, 6}, "MatMul: inner dimensions differ (%d vs %d)",
            768, 512);
    dl_diag(d, DL_SEV_NOTE, DL_NO_LOC, "no location");
    dl_diag(d, DL_SEV_WARNING, (dl_src_loc){f, 0, 0, 0}, "whole file");
    DL_CHECK_EQ_I64(dl_diags_count(d), 3);
    DL_CHECK_EQ_I64(dl_diags_error_count(d), 1);
    DL_CHECK_STR_EQ(dl_diags_get(d, 0)->msg, "MatMul: inner dimensions differ (768 vs 512)");
    DL_CHECK(dl_diags_get(d, 3) == NULL);
    char *out;
    DL_CHECK_OK(dl_diags_render(d, &out));
    DL_CHECK_STR_EQ(out, "mlp.dlg:2:5: error: MatMul: inner dimensions differ (768 vs 512)\n"
                         "    2 | y = MatMul (x, w)\n"
                         "      |     ^~~~~~\n"
                         "note: no location\n"
                         "mlp.dlg: warning: whole file\n");
    free(out);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    DL_CHECK_EQ_I64(dl_diags_error_count(d), 0);
    DL_CHECK(!dl_diags_oom(d));
    dl_diags_destroy(d);
    dl_diags_destroy(NULL);
}

DL_TEST(diags_render_tabs_crlf_and_wide_gutter) {
    dl_diags *d;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_strbuf src = {0};
    for (int i = 1; i < 12; i++) {
        dl_strbuf_printf(&src, "# line %d\r\n", i);
    }
    dl_strbuf_puts(&src, "\tx = Bad (y)\r\n");
    uint32_t f;
    DL_CHECK_OK(dl_diags_add_file(d, "t.dlg", src.data, src.len, &f));
    dl_diag(d, DL_SEV_ERROR, (dl_src_loc){f, 12, 6, 3}, "unknown op 'Bad'");
    // A location past the end of the file renders without a source line.
    dl_diag(d, DL_SEV_ERROR, (dl_src_loc){f, 99, 1, 1}, "past the end");
    char *out;
    DL_CHECK_OK(dl_diags_render(d, &out));
    DL_CHECK_STR_EQ(out, "t.dlg:12:6: error: unknown op 'Bad'\n"
                         "    12 |  x = Bad (y)\n"
                         "       |      ^~~\n"
                         "t.dlg:99:1: error: past the end\n");
    free(out);
    dl_strbuf_fini(&src);
    dl_diags_destroy(d);
}

// ---------------------------------------------------------------------------------------------
// Number formatting

static void fmt(double v, char buf[40]) {
    dl_format_double(v, buf);
}

DL_TEST(format_double_round_trips_and_reads_as_float) {
    char b[40];
    fmt(1.0, b);
    DL_CHECK_STR_EQ(b, "1.0");
    fmt(-3.0, b);
    DL_CHECK_STR_EQ(b, "-3.0");
    fmt(0.5, b);
    DL_CHECK_STR_EQ(b, "0.5");
    fmt(0.1, b);
    DL_CHECK_STR_EQ(b, "0.1");
    fmt(1e-3, b);
    DL_CHECK_STR_EQ(b, "0.001");
    fmt(1e300, b);
    DL_CHECK_STR_EQ(b, "1e300");
    fmt(1e-5, b);
    DL_CHECK_STR_EQ(b, "1e-5");
    fmt(-2.5e-8, b);
    DL_CHECK_STR_EQ(b, "-2.5e-8");
    fmt(NAN, b);
    DL_CHECK_STR_EQ(b, "nan");
    fmt(INFINITY, b);
    DL_CHECK_STR_EQ(b, "inf");
    fmt(-INFINITY, b);
    DL_CHECK_STR_EQ(b, "-inf");
    fmt(0.0, b);
    DL_CHECK_STR_EQ(b, "0.0");
    // Values that need 17 digits still round-trip.
    const double vals[] = {1.0 / 3.0,
                           0.1 + 0.2,
                           2.0 / 3.0 * 1e-20,
                           123456789012345678.0,
                           5e-324,
                           1.7976931348623157e308,
                           (double)(float)0.1};
    for (size_t i = 0; i < DL_ARRAY_LEN(vals); i++) {
        fmt(vals[i], b);
        DL_CHECK(strtod(b, NULL) == vals[i]);
        DL_CHECK(strpbrk(b, ".e") != NULL);
    }
}

// ---------------------------------------------------------------------------------------------
// Files

DL_TEST(write_file_atomic_and_read_back) {
    char dir[] = "/tmp/dl_test_base_XXXXXX";
    DL_CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    DL_CHECK_OK(dl_write_file_atomic(path, "old", 3));
    DL_CHECK_OK(dl_write_file_atomic(path, "hello\0x", 7));
    char *data;
    size_t len;
    DL_CHECK_OK(dl_read_file(path, &data, &len));
    DL_CHECK_EQ_I64(len, 7);
    DL_CHECK(memcmp(data, "hello\0x", 8) == 0); // NUL-terminated after the data
    free(data);
    // Writing into a missing directory fails and leaves nothing behind.
    char bad[160];
    snprintf(bad, sizeof bad, "%s/nodir/f.txt", dir);
    DL_CHECK(dl_write_file_atomic(bad, "x", 1) == DL_ERR_IO);
    DL_CHECK(dl_read_file(bad, &data, &len) == DL_ERR_IO);
    DL_CHECK(data == NULL);
    unlink(path);
    DL_CHECK_EQ_I64(rmdir(dir), 0); // no temporary file was left in the directory
}

// ---------------------------------------------------------------------------------------------
// Half precision

DL_TEST(f16_known_values_and_rounding) {
    DL_CHECK_EQ_I64(dl_f32_to_f16(1.0f), 0x3c00);
    DL_CHECK_EQ_I64(dl_f32_to_f16(-2.0f), 0xc000);
    DL_CHECK_EQ_I64(dl_f32_to_f16(0.0f), 0x0000);
    DL_CHECK_EQ_I64(dl_f32_to_f16(-0.0f), 0x8000);
    DL_CHECK_EQ_I64(dl_f32_to_f16(65504.0f), 0x7bff);
    DL_CHECK_EQ_I64(dl_f32_to_f16(65520.0f), 0x7c00); // rounds up to inf
    DL_CHECK_EQ_I64(dl_f32_to_f16(65519.0f), 0x7bff);
    DL_CHECK_EQ_I64(dl_f32_to_f16(INFINITY), 0x7c00);
    DL_CHECK_EQ_I64(dl_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);        // smallest subnormal
    DL_CHECK_EQ_I64(dl_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);        // tie -> even (0)
    DL_CHECK_EQ_I64(dl_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);        // tie -> even (2)
    DL_CHECK_EQ_I64(dl_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00); // tie -> even
    DL_CHECK_EQ_I64(dl_f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3c02);
    DL_CHECK(isnan(dl_f16_to_f32(dl_f32_to_f16(NAN))));
    DL_CHECK_NEAR(dl_f16_to_f32(0x3555), 0.333251953125, 0, 0);
    DL_CHECK_NEAR(dl_f16_to_f32(0x0001), 5.9604644775390625e-8, 0, 0);
}

DL_TEST(f16_all_values_round_trip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dl_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            DL_CHECK((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0);
            DL_CHECK(isnan(dl_f16_to_f32(dl_f32_to_f16(f))));
            continue;
        }
        DL_CHECK_EQ_I64(dl_f32_to_f16(f), h);
    }
}

DL_TEST(bf16_known_values_and_rounding) {
    DL_CHECK_EQ_I64(dl_f32_to_bf16(1.0f), 0x3f80);
    DL_CHECK_EQ_I64(dl_f32_to_bf16(-1.0f), 0xbf80);
    DL_CHECK_EQ_I64(dl_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80); // tie -> even
    DL_CHECK_EQ_I64(dl_f32_to_bf16(1.0f + ldexpf(3.0f, -8)), 0x3f82); // tie -> even (up)
    DL_CHECK_EQ_I64(dl_f32_to_bf16(INFINITY), 0x7f80);
    DL_CHECK(isnan(dl_bf16_to_f32(dl_f32_to_bf16(NAN))));
    DL_CHECK_NEAR(dl_bf16_to_f32(0x4049), 3.140625, 0, 0);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dl_bf16_to_f32((uint16_t)h);
        if (!isnan(f)) {
            DL_CHECK_EQ_I64(dl_f32_to_bf16(f), h);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RNG

DL_TEST(rng_is_a_pure_function_of_seed_and_counter) {
    DL_CHECK(dl_rng_bits(1, 0) == dl_rng_bits(1, 0));
    DL_CHECK(dl_rng_bits(1, 0) != dl_rng_bits(1, 1));
    DL_CHECK(dl_rng_bits(1, 0) != dl_rng_bits(2, 0));
    DL_CHECK(dl_rng_uniform(7, 123) == dl_rng_uniform(7, 123));
    DL_CHECK(dl_rng_normal(7, 5) == dl_rng_normal(7, 5));
}

DL_TEST(rng_uniform_and_normal_statistics) {
    const int n = 200000;
    double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0;
    int buckets[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = dl_rng_uniform(42, (uint64_t)i);
        DL_CHECK(u >= 0.0 && u < 1.0);
        sum += u;
        sum2 += u * u;
        buckets[(int)(u * 10)]++;
        double z = dl_rng_normal(42, (uint64_t)i);
        DL_CHECK(isfinite(z));
        nsum += z;
        nsum2 += z * z;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    DL_CHECK_NEAR(mean, 0.5, 0.005, 0);
    DL_CHECK_NEAR(var, 1.0 / 12.0, 0.002, 0);
    for (int b = 0; b < 10; b++) {
        DL_CHECK_NEAR(buckets[b], n / 10, n / 100, 0);
    }
    double nmean = nsum / n, nvar = nsum2 / n - nmean * nmean;
    DL_CHECK_NEAR(nmean, 0.0, 0.01, 0);
    DL_CHECK_NEAR(nvar, 1.0, 0.02, 0);
}

// ---------------------------------------------------------------------------------------------
// Host tensors

DL_TEST(tensor_alloc_get_set_and_shape_format) {
    dl_tensor t;
    int64_t dims[] = {2, 3};
    DL_CHECK_OK(dl_tensor_alloc(&t, DL_DT_FLOAT16, 2, dims));
    DL_CHECK_EQ_I64(dl_tensor_numel(&t), 6);
    DL_CHECK_EQ_I64(dl_tensor_nbytes(&t), 12);
    dl_tensor_set(&t, 5, 0.1);
    DL_CHECK_NEAR(dl_tensor_get(&t, 5), 0.0999755859375, 0, 0); // rounded to float16
    char buf[64];
    dl_shape_format(t.dims, t.rank, buf, sizeof buf);
    DL_CHECK_STR_EQ(buf, "[2, 3]");
    dl_shape_format(t.dims, 0, buf, sizeof buf);
    DL_CHECK_STR_EQ(buf, "[]");
    dl_tensor_free(&t);
    DL_CHECK(t.data == NULL);
    int64_t neg[] = {-1};
    DL_CHECK(dl_tensor_alloc(&t, DL_DT_FLOAT, 1, neg) == DL_ERR_INVALID_ARG);
    int64_t huge[] = {INT64_MAX / 2, 4};
    DL_CHECK(dl_tensor_alloc(&t, DL_DT_FLOAT, 2, huge) == DL_ERR_INVALID_ARG);
}

DL_TEST(tensor_get_i64_exact_and_saturating) {
    dl_tensor t;
    int64_t dims[] = {3};
    DL_CHECK_OK(dl_tensor_alloc(&t, DL_DT_INT64, 1, dims));
    ((int64_t *)t.data)[0] = (INT64_C(1) << 60) + 1; // not a double
    ((int64_t *)t.data)[1] = INT64_MIN;
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 0), (INT64_C(1) << 60) + 1);
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 1), INT64_MIN);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_tensor_alloc(&t, DL_DT_FLOAT, 1, dims));
    ((float *)t.data)[0] = -2.75f;
    ((float *)t.data)[1] = 1e30f;
    ((float *)t.data)[2] = NAN;
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 0), -2);
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 1), INT64_MAX);
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 2), 0);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_tensor_alloc(&t, DL_DT_BOOL, 1, dims));
    ((uint8_t *)t.data)[1] = 7;
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 0), 0);
    DL_CHECK_EQ_I64(dl_tensor_get_i64(&t, 1), 1);
    dl_tensor_free(&t);
}

DL_TEST_MAIN()
