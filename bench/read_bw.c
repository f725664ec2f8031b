// bench/read_bw.c — the machine's streaming read bandwidth: the ceiling of a batch-1 Linear
// layer, which reads every weight once per call (docs/performance.md, the matrix-vector kernels).
//
// usage: read_bw MIB THREADS...   prints `read MIB MiB threads T gbps G` per thread count
//
// Each of T threads sums the 64-bit words of its own MIB MiB buffer (written once first, so
// every page is mapped), pass after pass for ~1 s after one untimed pass; the best pass's bytes
// per second, summed over the threads, is the figure. The four integer sums cost far less than
// the memory they read (two or three 8-byte loads a cycle even unvectorised: 50+ GB/s at 3 GHz),
// so the loop is bound by the loads alone; built with -O2, no -march. Buffers larger than the
// last-level cache measure DRAM; smaller ones the cache that holds them (a 12 MiB buffer, the
// batch-1 MLP's weights, sits in a server's L3).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    size_t words;
    uint64_t *buf;
    pthread_barrier_t *start;
    double best_s; // the fastest pass
    uint64_t sum;  // kept so the loads are not dead
} job;

static uint64_t pass(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

static void *run(void *arg) {
    job *j = arg;
    for (size_t i = 0; i < j->words; i++) {
        j->buf[i] = i;
    }
    pthread_barrier_wait(j->start);
    j->sum = pass(j->buf, j->words);
    j->best_s = 1e30;
    double until = wall() + 1.0;
    for (int r = 0; r < 1000 && wall() < until; r++) {
        double t0 = wall();
        j->sum += pass(j->buf, j->words);
        double t = wall() - t0;
        j->best_s = t < j->best_s ? t : j->best_s;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: read_bw MIB THREADS...\n");
        return 2;
    }
    long mib = atol(argv[1]);
    if (mib < 1 || mib > 4096) {
        fprintf(stderr, "read_bw: MIB must be 1..4096, got '%s'\n", argv[1]);
        return 2;
    }
    size_t words = (size_t)mib << 17; // MiB / 8 bytes
    for (int a = 2; a < argc; a++) {
        int t = atoi(argv[a]);
        if (t < 1 || t > 256) {
            fprintf(stderr, "read_bw: THREADS must be 1..256, got '%s'\n", argv[a]);
            return 2;
        }
        job *jobs = calloc((size_t)t, sizeof *jobs);
        pthread_t *th = calloc((size_t)t, sizeof *th);
        pthread_barrier_t start;
        if (!jobs || !th || pthread_barrier_init(&start, NULL, (unsigned)t) != 0) {
            fprintf(stderr, "read_bw: out of memory\n");
            return 1;
        }
        int ok = 1;
        for (int i = 0; i < t && ok; i++) {
            jobs[i] = (job){words, aligned_alloc(64, words * 8), &start, 0, 0};
            ok = jobs[i].buf != NULL && pthread_create(&th[i], NULL, run, &jobs[i]) == 0;
        }
        if (!ok) {
            fprintf(stderr, "read_bw: cannot allocate %ld MiB x %d threads\n", mib, t);
            return 1;
        }
        double gbps = 0;
        uint64_t sum = 0;
        for (int i = 0; i < t; i++) {
            pthread_join(th[i], NULL);
            gbps += (double)words * 8 / jobs[i].best_s * 1e-9;
            sum += jobs[i].sum;
            free(jobs[i].buf);
        }
        printf("read %ld MiB threads %d gbps %.1f (check %llu)\n", mib, t, gbps,
               (unsigned long long)(sum & 0xff));
        pthread_barrier_destroy(&start);
        free(jobs);
        free(th);
    }
    return 0;
}
