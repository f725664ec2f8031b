// tests/harness/dl_test.h — a minimal test harness (libuv's TEST_IMPL style).
//
//   DL_TEST(parses_scalar) { DL_CHECK_EQ_I64(1 + 1, 2); }
//   DL_TEST_MAIN()   // once per executable
//
// Tests register themselves through constructors; main runs all (or those whose name contains
// one of its arguments) and ends with "N passed, N failed". A failed check prints file:line and
// both values, marks the test failed and returns from it.
#ifndef DL_TEST_H
#define DL_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*dl_test_fn)(bool *dl_test_failed_);

typedef struct dl_test_case {
    const char *name;
    dl_test_fn fn;
} dl_test_case;

#define DL_TEST_MAX 4096
extern dl_test_case dl_test_cases_[DL_TEST_MAX];
extern int dl_test_n_cases_;

#define DL_TEST(name)                                                                              \
    static void dl_test_##name(bool *dl_test_failed_);                                             \
    __attribute__((constructor)) static void dl_test_reg_##name(void) {                            \
        if (dl_test_n_cases_ < DL_TEST_MAX) {                                                      \
            dl_test_cases_[dl_test_n_cases_++] = (dl_test_case){#name, dl_test_##name};            \
        }                                                                                          \
    }                                                                                              \
    static void dl_test_##name(bool *dl_test_failed_)

#define DL_FAIL_(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);                              \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        *dl_test_failed_ = true;                                                                   \
        return;                                                                                    \
    } while (0)

#define DL_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            DL_FAIL_("%s", #cond);                                                                 \
        }                                                                                          \
    } while (0)

#define DL_CHECK_EQ_I64(a, b)                                                                      \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            DL_FAIL_("%s == %s (%lld vs %lld)", #a, #b, a_, b_);                                   \
        }                                                                                          \
    } while (0)

#define DL_CHECK_STR_EQ(a, b)                                                                      \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            DL_FAIL_("%s == %s\n--- got:\n%s\n--- expected:\n%s", #a, #b, a_ ? a_ : "(null)",      \
                     b_ ? b_ : "(null)");                                                          \
        }                                                                                          \
    } while (0)

// |got - want| <= atol + rtol * |want|; NaN equals NaN.
#define DL_CHECK_NEAR(got, want, atol, rtol)                                                       \
    do {                                                                                           \
        double g_ = (double)(got), w_ = (double)(want);                                            \
        bool ok_ =                                                                                 \
            (isnan(g_) && isnan(w_)) || (g_ == w_) || fabs(g_ - w_) <= (atol) + (rtol) * fabs(w_); \
        if (!ok_) {                                                                                \
            DL_FAIL_("%s ~= %s (%.9g vs %.9g)", #got, #want, g_, w_);                              \
        }                                                                                          \
    } while (0)

// Checks a dl_status-returning expression is DL_OK (0).
#define DL_CHECK_OK(expr)                                                                          \
    do {                                                                                           \
        int st_ = (int)(expr);                                                                     \
        if (st_ != 0) {                                                                            \
            DL_FAIL_("%s returned status %d", #expr, st_);                                         \
        }                                                                                          \
    } while (0)

// LLVM's optimisation level for the artifacts a test compiles: DLCC_TEST_OPT (0 to 3; the
// sanitizer build sets 1, tests/codegen/cg_check.h), else 3, dlcc's default; -1 when it is set to
// anything else.
static inline int dl_test_opt_level(void) {
    const char *s = getenv("DLCC_TEST_OPT");
    if (!s || !s[0]) {
        return 3;
    }
    return s[0] >= '0' && s[0] <= '3' && s[1] == '\0' ? s[0] - '0' : -1;
}

// Whether test `name` runs: no arguments, or one of them is a substring of it.
static inline bool dl_test_selected_(const char *name, int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        if (strstr(name, argv[a])) {
            return true;
        }
    }
    return argc <= 1;
}

#define DL_TEST_MAIN()                                                                             \
    dl_test_case dl_test_cases_[DL_TEST_MAX];                                                      \
    int dl_test_n_cases_;                                                                          \
    int main(int argc, char **argv) {                                                              \
        int passed = 0, failed = 0;                                                                \
        for (int i = 0; i < dl_test_n_cases_; i++) {                                               \
            if (!dl_test_selected_(dl_test_cases_[i].name, argc, argv)) {                          \
                continue;                                                                          \
            }                                                                                      \
            bool f = false;                                                                        \
            dl_test_cases_[i].fn(&f);                                                              \
            printf("%s %s\n", f ? "FAIL" : "ok  ", dl_test_cases_[i].name);                        \
            if (f) {                                                                               \
                failed++;                                                                          \
            } else {                                                                               \
                passed++;                                                                          \
            }                                                                                      \
        }                                                                                          \
        printf("%d passed, %d failed\n", passed, failed);                                          \
        return failed ? 1 : (passed ? 0 : 1);                                                      \
    }

#endif
