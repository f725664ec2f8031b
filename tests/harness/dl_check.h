// tests/harness/dl_check.h — a soft check for tests that are one main() walking through cases
// (the NVPTX and CUDA-device tests): CHECK(cond, fmt, ...) prints file:line, the condition and
// the message when cond is false, counts the failure in dl_check_failures and goes on; main
// returns dl_check_failures ? 1 : 0. (Tests made of DL_TEST cases use dl_test.h.)
#ifndef DL_CHECK_H
#define DL_CHECK_H

#include <stdio.h>

static int dl_check_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            dl_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

#endif
