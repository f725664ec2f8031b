// tests/runtime/test_trainloop.c — the runtime's training loop helpers (runtime/rt_trainloop.c)
// through libdlrt's public API only: the learning-rate schedules at known points, the
// non-finite guard's streaks (consecutive, interleaved, recovered, loss-scale backoff, never),
// the run plan and its refusals, and dlrt_train_run / dlrt_evaluate_accuracy argument errors.
// The loop itself runs end to end in tests/train_cli (dlcc train, samples/train_fmnist.c) and
// tests/python (Session.train).
#include "dl_test.h"
#include "dlrt.h"

static dlrt_step_info info_of(double loss, int skipped, double scale) {
    dlrt_step_info i = {loss, skipped, 1.0, scale, 0};
    return i;
}

DL_TEST(lr_schedules) {
    DL_CHECK(dlrt_lr_schedule_at(DLRT_LR_CONSTANT, 0.1, 7, 10, 0) == 0.1);
    DL_CHECK(dlrt_lr_schedule_at(DLRT_LR_STEP, 1.0, 4, 10, 0) == 1.0);
    DL_CHECK(fabs(dlrt_lr_schedule_at(DLRT_LR_STEP, 1.0, 5, 10, 0) - 0.1) < 1e-15);
    DL_CHECK(fabs(dlrt_lr_schedule_at(DLRT_LR_STEP, 1.0, 8, 10, 0) - 0.01) < 1e-15);
    DL_CHECK(dlrt_lr_schedule_at(DLRT_LR_COSINE, 2.0, 0, 10, 0) == 2.0);
    DL_CHECK(fabs(dlrt_lr_schedule_at(DLRT_LR_COSINE, 2.0, 5, 10, 0) - 1.0) < 1e-12);
    // warm-up: (t + 1) / W, then cosine over the remaining steps
    DL_CHECK(fabs(dlrt_lr_schedule_at(DLRT_LR_WARMUP_COSINE, 1.0, 0, 12, 2) - 0.5) < 1e-15);
    DL_CHECK(dlrt_lr_schedule_at(DLRT_LR_WARMUP_COSINE, 1.0, 1, 12, 2) == 1.0);
    DL_CHECK(dlrt_lr_schedule_at(DLRT_LR_WARMUP_COSINE, 1.0, 2, 12, 2) == 1.0);
    DL_CHECK(fabs(dlrt_lr_schedule_at(DLRT_LR_WARMUP_COSINE, 1.0, 7, 12, 2) - 0.5) < 1e-12);
    // one-cycle: torch.optim.lr_scheduler.OneCycleLR(max_lr=1, total_steps=100)'s values
    static const struct {
        int64_t t;
        double lr;
    } oc[] = {{0, 0.040000000000000036},
              {14, 0.49401332387899954},
              {29, 1.0},
              {30, 0.9994965352845243},
              {64, 0.500002},
              {99, 4e-06}};
    for (size_t i = 0; i < sizeof oc / sizeof oc[0]; i++) {
        double got = dlrt_lr_schedule_at(DLRT_LR_ONE_CYCLE, 1.0, oc[i].t, 100, 0);
        DL_CHECK(fabs(got - oc[i].lr) <= 1e-12 * fabs(oc[i].lr));
    }
    dlrt_lr_schedule k = DLRT_LR_CONSTANT;
    DL_CHECK_EQ_I64(dlrt_lr_schedule_parse("one-cycle", &k), DLRT_OK);
    DL_CHECK_EQ_I64(k, DLRT_LR_ONE_CYCLE);
    DL_CHECK_EQ_I64(dlrt_lr_schedule_parse("warmup-cosine", &k), DLRT_OK);
    DL_CHECK_EQ_I64(k, DLRT_LR_WARMUP_COSINE);
    DL_CHECK(strcmp(dlrt_lr_schedule_name(DLRT_LR_STEP), "step") == 0);
    DL_CHECK(dlrt_lr_schedule_name((dlrt_lr_schedule)9) == NULL);
    DL_CHECK_EQ_I64(dlrt_lr_schedule_parse("linear", &k), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "'linear'") != NULL);
}

DL_TEST(guard_consecutive_and_first) {
    dlrt_nonfinite_guard g;
    dlrt_nonfinite_guard_init(&g, 3, 1.0);
    dlrt_step_info ok = info_of(0.5, 0, 1), nan = info_of(NAN, 1, 1);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &ok, 1), 0);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &nan, 2), 1);
    DL_CHECK(g.first && !g.stop);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &nan, 3), 1);
    DL_CHECK(!g.first && !g.stop);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &nan, 4), 1);
    DL_CHECK(g.stop);
    DL_CHECK_EQ_I64(g.run, 3);
    DL_CHECK_EQ_I64(g.run_start, 2);
    DL_CHECK_EQ_I64(g.total, 3);
}

DL_TEST(guard_interleaved_streak_and_recovery) {
    dlrt_nonfinite_guard g;
    dlrt_nonfinite_guard_init(&g, 2, 1.0);
    dlrt_step_info ok = info_of(1e30, 0, 1), bad = info_of(INFINITY, 0, 1);
    // bad, ok, bad: fewer than 2 finite steps in a row between them -> one streak of 2
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &bad, 1), 1);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &ok, 2), 0); // a huge finite loss is finite
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &bad, 3), 1);
    DL_CHECK(g.stop);
    // two finite steps in a row end a streak
    dlrt_nonfinite_guard_init(&g, 2, 1.0);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &bad, 1), 1);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &ok, 2), 0);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &ok, 3), 0);
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &bad, 4), 1);
    DL_CHECK(!g.stop && !g.first);
    DL_CHECK_EQ_I64(g.run_start, 4);
    // max 0: never stops
    dlrt_nonfinite_guard_init(&g, 0, 1.0);
    for (int i = 1; i <= 50; i++) {
        DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &bad, i), 1);
        DL_CHECK(!g.stop);
    }
}

DL_TEST(guard_loss_scale_backoff_is_not_divergence) {
    dlrt_nonfinite_guard g;
    dlrt_nonfinite_guard_init(&g, 1, 65536.0);
    dlrt_step_info backoff = info_of(0.7, 1, 32768.0); // finite loss, skipped, scale went down
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &backoff, 1), 0);
    DL_CHECK(g.scale == 32768.0);
    dlrt_step_info at_one = info_of(0.7, 1, 1.0); // from 32768 down to 1: still backing off
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &at_one, 2), 0);
    dlrt_step_info stuck = info_of(0.7, 1, 1.0); // scale 1 and still skipped: non-finite
    DL_CHECK_EQ_I64(dlrt_nonfinite_guard_step(&g, &stuck, 3), 1);
    DL_CHECK(g.stop);
}

DL_TEST(plan_counts_and_refusals) {
    dlrt_train_options o;
    dlrt_train_options_init(&o);
    DL_CHECK_EQ_I64(o.epochs, 1);
    DL_CHECK_EQ_I64(o.max_skipped, 10);
    DL_CHECK(isnan(o.lr));
    int64_t total = 0, warmup = 0;
    o.epochs = 3;
    DL_CHECK_EQ_I64(dlrt_train_plan(&o, 40, &total, &warmup), DLRT_OK);
    DL_CHECK_EQ_I64(total, 120);
    DL_CHECK_EQ_I64(warmup, 0);
    o.schedule = DLRT_LR_WARMUP_COSINE;
    DL_CHECK_EQ_I64(dlrt_train_plan(&o, 40, &total, &warmup), DLRT_OK);
    DL_CHECK_EQ_I64(warmup, 6); // 5% of 120
    o.warmup = 120;
    DL_CHECK_EQ_I64(dlrt_train_plan(&o, 40, &total, &warmup), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(warmup, 120); // said, for the caller's message
    DL_CHECK_EQ_I64(total, 120);
    DL_CHECK_EQ_I64(dlrt_train_plan(&o, 0, &total, &warmup), DLRT_ERR_INVALID_ARG);
    o.epochs = 0;
    DL_CHECK_EQ_I64(dlrt_train_plan(&o, 40, &total, &warmup), DLRT_ERR_INVALID_ARG);
}

DL_TEST(run_and_evaluate_refuse_null) {
    dlrt_train_options o;
    dlrt_train_options_init(&o);
    dlrt_train_result r;
    DL_CHECK_EQ_I64(dlrt_train_run(NULL, NULL, &o, &r), DLRT_ERR_INVALID_ARG);
    int64_t c = 0, t = 0;
    DL_CHECK_EQ_I64(dlrt_evaluate_accuracy(NULL, NULL, "x", "y", "p", &c, &t),
                    DLRT_ERR_INVALID_ARG);
}

DL_TEST_MAIN()
