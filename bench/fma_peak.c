// bench/fma_peak.c — the machine's measured float32 FMA peak, the 100 % of bench/compare.sh.
//
// usage: fma_peak THREADS...      prints `isa ISA threads T gflops G` per thread count
//
// The widest vector ISA the CPU has (AVX-512F, else AVX2 + FMA, else none: exit 1) runs a loop
// of independent fused multiply-adds per iteration (AVX-512: 16 accumulators, AVX2: 12, so that
// they and the two operands fit the ISA's 32 or 16 vector registers without a spill; both more
// than latency x FMA units on current x86 cores, so the loop is bound by FMA throughput alone) on T
// threads at once, each for ~0.3 s after a warm-up; the sum over the threads of 2 x lanes x FMAs
// per second is the peak. Best of 3 runs per thread count. Compiled with -O2 (no -march): the
// kernels carry their own target attributes and are only called when the CPU has them.
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ITERS 100000000L

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink;

// One kernel per ISA: NCH accumulator chains of FMAs with distinct starting values, every
// accumulator passed through an empty asm each iteration (the chains past the eighth through
// the second asm, whose operands are the macro's last arguments), so the compiler can neither
// merge the chains nor shorten the loop. Returns the flop done.
#define DEFINE_RUN(NAME, TARGET, VEC, SET1, FMA, ADD, C, NCH, ...)                                 \
    __attribute__((target(TARGET))) static double NAME(long iters) {                               \
        VEC x = SET1(0.999999f), y = SET1(1e-7f), a[NCH];                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < NCH; i++) {                                   \
            a[i] = SET1(1.0f + 0.01f * (float)i);                                                  \
        }                                                                                          \
        for (long i = 0; i < iters; i++) {                                                         \
            _Pragma("GCC unroll 16") for (int j = 0; j < NCH; j++) {                               \
                a[j] = FMA(a[j], x, y);                                                            \
            }                                                                                      \
            __asm__ volatile(""                                                                    \
                             : "+" C(a[0]), "+" C(a[1]), "+" C(a[2]), "+" C(a[3]), "+" C(a[4]),    \
                               "+" C(a[5]), "+" C(a[6]), "+" C(a[7]));                             \
            __asm__ volatile("" : __VA_ARGS__);                                                    \
        }                                                                                          \
        VEC s = a[0];                                                                              \
        _Pragma("GCC unroll 16") for (int i = 1; i < NCH; i++) {                                   \
            s = ADD(s, a[i]);                                                                      \
        }                                                                                          \
        float v[sizeof(VEC) / sizeof(float)];                                                      \
        memcpy(v, &s, sizeof v);                                                                   \
        sink = v[0];                                                                               \
        return (double)iters * NCH * 2 * (double)(sizeof(VEC) / sizeof(float));                    \
    }

DEFINE_RUN(run512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, "v", 16,
           "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11]), "+v"(a[12]), "+v"(a[13]), "+v"(a[14]),
           "+v"(a[15]))
DEFINE_RUN(run256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, "x", 12,
           "+x"(a[8]), "+x"(a[9]), "+x"(a[10]), "+x"(a[11]))

static int use512;

typedef struct job {
    long iters;
    double flop, seconds;
    pthread_barrier_t *start;
} job;

static void *worker(void *arg) {
    job *j = arg;
    pthread_barrier_wait(j->start);
    double t0 = wall();
    j->flop = use512 ? run512(j->iters) : run256(j->iters);
    j->seconds = wall() - t0;
    return NULL;
}

// GFLOP/s of T threads running the loop at once (the sum of their rates).
static double measure(int threads, long iters) {
    pthread_t th[64];
    job jobs[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job){iters, 0, 0, &start};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    double g = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        g += jobs[i].flop / jobs[i].seconds * 1e-9;
    }
    pthread_barrier_destroy(&start);
    return g;
}

int main(int argc, char **argv) {
    __builtin_cpu_init();
    use512 = __builtin_cpu_supports("avx512f");
    if (!use512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        fprintf(stderr, "fma_peak: this CPU has neither AVX-512F nor AVX2 + FMA\n");
        return 1;
    }
    const char *isa = use512 ? "avx512" : "avx2";
    (void)measure(1, ITERS / 20); // warm-up (clocks up)
    for (int a = 1; a < argc; a++) {
        int t = atoi(argv[a]);
        if (t < 1 || t > 64) {
            fprintf(stderr, "fma_peak: threads 1..64\n");
            return 2;
        }
        double best = 0;
        for (int r = 0; r < 3; r++) {
            double g = measure(t, use512 ? ITERS / 2 : ITERS);
            best = g > best ? g : best;
        }
        printf("isa %s threads %d gflops %.1f\n", isa, t, best);
    }
    return 0;
}
