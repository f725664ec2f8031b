// tests/optim/test_optim.c — the reference optimizer math (ir/dl_optim_ref.h) against numbers
// derived independently of it: /usr/bin/python3 transcriptions of PyTorch's documented
// algorithms (torch.optim.SGD / Adam / AdamW / RMSprop algorithm boxes, clip_grad_norm_,
// GradScaler.update), pasted below with the numbers they print, so a reviewer can rerun them.
#include "dl_optim_ref.h"
#include "dl_test.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define RTOL 1e-12

// ---------------------------------------------------------------------------------------------
// Three steps from P0 with the gradients G, per optimizer and option combination. Expected
// parameters and slots (in dl_optim_ref_slots order) come from this script
// (/usr/bin/python3 oracle.py prints the table below):
//
// import math
// P0 = [1.0, -2.0, 0.5]
// G = [[0.1, -0.2, 0.3], [-0.4, 0.5, 0.05], [0.25, 0.0, -0.15]]
// def sgd(lr, momentum=0.0, dampening=0.0, nesterov=False, wd=0.0):
//     p = list(P0); buf = None
//     for g in G:
//         g = [gi + wd * pi for gi, pi in zip(g, p)]
//         if momentum != 0:
//             buf = list(g) if buf is None else [momentum * b + (1 - dampening) * gi for b, gi in
//             zip(buf, g)] g = [gi + momentum * b for gi, b in zip(g, buf)] if nesterov else buf
//         p = [pi - lr * gi for pi, gi in zip(p, g)]
//     return p, ([buf] if momentum != 0 else [])
// def adam(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, amsgrad=False, decoupled=False):
//     p = list(P0); m = [0.0] * 3; v = [0.0] * 3; vmax = [0.0] * 3
//     for t, g in enumerate(G, 1):
//         if decoupled: p = [pi * (1 - lr * wd) for pi in p]
//         else: g = [gi + wd * pi for gi, pi in zip(g, p)]
//         m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
//         v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
//         vmax = [max(a, b) for a, b in zip(vmax, v)]
//         vv = vmax if amsgrad else v
//         bc1 = 1 - b1 ** t; bc2 = 1 - b2 ** t
//         p = [pi - (lr / bc1) * mi / (math.sqrt(vi) / math.sqrt(bc2) + eps) for pi, mi, vi in
//         zip(p, m, vv)]
//     return p, [m, v] + ([vmax] if amsgrad else [])
// def rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, momentum=0.0, wd=0.0, centered=False):
//     p = list(P0); sq = [0.0] * 3; ga = [0.0] * 3; buf = [0.0] * 3
//     for g in G:
//         g = [gi + wd * pi for gi, pi in zip(g, p)]
//         sq = [alpha * s + (1 - alpha) * gi * gi for s, gi in zip(sq, g)]
//         if centered:
//             ga = [alpha * a + (1 - alpha) * gi for a, gi in zip(ga, g)]
//             avg = [math.sqrt(s - a * a) + eps for s, a in zip(sq, ga)]
//         else:
//             avg = [math.sqrt(s) + eps for s in sq]
//         if momentum > 0:
//             buf = [momentum * b + gi / a for b, gi, a in zip(buf, g, avg)]
//             p = [pi - lr * b for pi, b in zip(p, buf)]
//         else:
//             p = [pi - lr * gi / a for pi, gi, a in zip(p, g, avg)]
//     return p, [sq] + ([buf] if momentum > 0 else []) + ([ga] if centered else [])
// cases = [
//     ("sgd_plain", sgd(0.1)),
//     ("sgd_momentum", sgd(0.1, momentum=0.9)),
//     ("sgd_dampening", sgd(0.1, momentum=0.9, dampening=0.3)),
//     ("sgd_nesterov", sgd(0.1, momentum=0.9, nesterov=True)),
//     ("sgd_weight_decay", sgd(0.1, momentum=0.9, wd=0.05)),
//     ("adam_default", adam()),
//     ("adam_lr", adam(lr=0.1, b1=0.8, b2=0.95, eps=1e-3)),
//     ("adam_amsgrad", adam(lr=0.1, amsgrad=True)),
//     ("adam_weight_decay", adam(lr=0.1, wd=0.1)),
//     ("adamw_default", adam(wd=1e-2, decoupled=True)),
//     ("adamw_lr", adam(lr=0.1, wd=0.1, decoupled=True, amsgrad=True)),
//     ("rmsprop_default", rmsprop()),
//     ("rmsprop_centered", rmsprop(lr=0.05, alpha=0.9, centered=True)),
//     ("rmsprop_momentum", rmsprop(lr=0.05, momentum=0.8)),
//     ("rmsprop_weight_decay", rmsprop(lr=0.05, wd=0.1)),
//     ("rmsprop_all", rmsprop(lr=0.05, alpha=0.9, eps=1e-4, momentum=0.8, wd=0.1, centered=True)),
// ]
// f = lambda xs: "{" + ", ".join(repr(x) for x in xs) + "}"
// for name, (p, slots) in cases:
//     print("    {\"%s\", %s, %d, {%s}}," % (name, f(p), len(slots), ", ".join(f(x) for x in
//     slots)))

typedef struct optim_case {
    const char *name;
    double param[3];
    size_t n_slots;
    double slots[3][3];
} optim_case;

static const optim_case cases[] = {
    {"sgd_plain", {1.0050000000000001, -2.03, 0.48}, 0, {{0}}},
    {"sgd_momentum",
     {1.0238999999999998, -2.0408, 0.42419999999999997},
     1,
     {{-0.029000000000000026, 0.288, 0.13800000000000004}}},
    {"sgd_dampening",
     {1.0086, -2.0122999999999998, 0.42255},
     1,
     {{0.004000000000000031, 0.15299999999999997, 0.16950000000000004}}},
    {"sgd_nesterov",
     {1.02651, -2.06672, 0.41178},
     1,
     {{-0.029000000000000026, 0.288, 0.13800000000000004}}},
    {"sgd_weight_decay",
     {0.995959625, -1.98506925, 0.4108291875},
     1,
     {{0.10615375000000005, 0.019192499999999904, 0.20083312500000008}}},
    {"adam_default",
     {0.999597938746638, -1.9997840489717593, 0.4979565076416412},
     2,
     {{-0.0029, 0.02879999999999999, 0.0138},
      {0.00023232001000000023, 0.00028967004000000023, 0.0001148175900000001}}},
    {"adam_lr",
     {0.9619605532451855, -1.9853988604549946, 0.30751164228592526},
     2,
     {{-0.0012000000000000066, 0.05439999999999998, 0.016399999999999998},
      {0.011176250000000009, 0.013680000000000012, 0.005305000000000004}}},
    {"adam_amsgrad",
     {0.9597938746637988, -1.9783878012179419, 0.2956507641641172},
     3,
     {{-0.0029, 0.02879999999999999, 0.0138},
      {0.00023232001000000023, 0.00028967004000000023, 0.0001148175900000001},
      {0.00023232001000000023, 0.00028996000000000024, 0.0001148175900000001}}},
    {"adam_weight_decay",
     {0.8975889709272562, -1.8649277661693324, 0.2751786294249454},
     2,
     {{0.022562259394749547, -0.023426454953429588, 0.024615665963598356},
      {0.0002533141812652603, 0.00029150512947040625, 0.00014435216882075294}}},
    {"adamw_default",
     {0.9995679534515004, -1.999724065149504, 0.4979415356248132},
     2,
     {{-0.0029, 0.02879999999999999, 0.0138},
      {0.00023232001000000023, 0.00028967004000000023, 0.0001148175900000001}}},
    {"adamw_lr",
     {0.9315233709899475, -1.9205335858662695, 0.2835735914096111},
     3,
     {{-0.0029, 0.02879999999999999, 0.0138},
      {0.00023232001000000023, 0.00028967004000000023, 0.0001148175900000001},
      {0.00023232001000000023, 0.00028996000000000024, 0.0001148175900000001}}},
    {"rmsprop_default",
     {0.9449935383214919, -1.9929118010156806, 0.4280655839656072},
     1,
     {{0.0023070100000000026, 0.0028670400000000026, 0.001131840000000001}}},
    {"rmsprop_centered",
     {0.9064041046858328, -1.9838811381973203, 0.3807732098864581},
     2,
     {{0.02146, 0.025739999999999996, 0.009764999999999998},
      {-0.0029, 0.02879999999999999, 0.0138}}},
    {"rmsprop_momentum",
     {0.39313950228174666, -1.6162063691410458, -0.6457536783834987},
     2,
     {{0.0023070100000000026, 0.0028670400000000026, 0.001131840000000001},
      {3.8415052212222474, 1.032943281254849, 3.263033612381606}}},
    {"rmsprop_weight_decay",
     {0.609209076871992, -1.6662520273319121, 0.13366963378419222},
     1,
     {{0.002784476695746674, 0.003115868994055364, 0.0014721953360740045}}},
    {"rmsprop_all",
     {0.7295666721895376, -1.7187488888528124, 0.08083361545516454},
     3,
     {{0.023398644251772904, 0.025229705718492878, 0.012346217077448587},
      {2.1476353267698003, -1.6555465524864634, 1.5618498336308706},
      {0.021071980225546495, -0.021916511123972023, 0.022440688283545958}}},
};

static const double P0[3] = {1.0, -2.0, 0.5};
static const double G[3][3] = {{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.05}, {0.25, 0.0, -0.15}};

static const optim_case *find_case(const char *name) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(cases[i].name, name) == 0) {
            return &cases[i];
        }
    }
    return NULL;
}

// Runs three steps through dl_optim_ref_state and compares param and slots with the case.
static bool run_case(const char *name, dl_ir_optim kind, const dl_optim_ref_hparams *hp) {
    const optim_case *c = find_case(name);
    if (!c) {
        fprintf(stderr, "no case %s\n", name);
        return false;
    }
    dl_optim_ref_state st;
    if (dl_optim_ref_state_init(&st, kind, hp, 3) != DL_OK) {
        return false;
    }
    bool ok = st.n_slots == c->n_slots;
    double p[3];
    memcpy(p, P0, sizeof p);
    for (int s = 0; s < 3 && ok; s++) {
        ok = dl_optim_ref_state_step(&st, p, G[s]) == DL_OK;
    }
    ok = ok && st.step == 3;
    for (int i = 0; i < 3 && ok; i++) {
        if (!(fabs(p[i] - c->param[i]) <= RTOL * fabs(c->param[i]))) {
            fprintf(stderr, "%s: param[%d] = %.17g, want %.17g\n", name, i, p[i], c->param[i]);
            ok = false;
        }
        for (size_t k = 0; k < c->n_slots && ok; k++) {
            double got = st.slots[k][i], want = c->slots[k][i];
            if (!(fabs(got - want) <= RTOL * fabs(want))) {
                fprintf(stderr, "%s: %s[%d] = %.17g, want %.17g\n", name, st.slot_names[k], i, got,
                        want);
                ok = false;
            }
        }
    }
    dl_optim_ref_state_fini(&st);
    return ok;
}

static dl_optim_ref_hparams defaults(dl_ir_optim kind) {
    dl_optim_ref_hparams hp;
    dl_optim_ref_hparams_defaults(kind, &hp);
    return hp;
}

DL_TEST(optim_sgd) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_SGD);
    hp.lr = 0.1;
    DL_CHECK(run_case("sgd_plain", DL_IR_OPTIM_SGD, &hp));
    hp.momentum = 0.9;
    DL_CHECK(run_case("sgd_momentum", DL_IR_OPTIM_SGD, &hp));
    hp.dampening = 0.3;
    DL_CHECK(run_case("sgd_dampening", DL_IR_OPTIM_SGD, &hp));
    hp.dampening = 0.0;
    hp.nesterov = true;
    DL_CHECK(run_case("sgd_nesterov", DL_IR_OPTIM_SGD, &hp));
    hp.nesterov = false;
    hp.weight_decay = 0.05;
    DL_CHECK(run_case("sgd_weight_decay", DL_IR_OPTIM_SGD, &hp));
}

DL_TEST(optim_adam) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_ADAM);
    DL_CHECK(run_case("adam_default", DL_IR_OPTIM_ADAM, &hp));
    hp.lr = 0.1;
    hp.beta1 = 0.8;
    hp.beta2 = 0.95;
    hp.eps = 1e-3;
    DL_CHECK(run_case("adam_lr", DL_IR_OPTIM_ADAM, &hp));
    hp = defaults(DL_IR_OPTIM_ADAM);
    hp.lr = 0.1;
    hp.amsgrad = true;
    DL_CHECK(run_case("adam_amsgrad", DL_IR_OPTIM_ADAM, &hp));
    hp.amsgrad = false;
    hp.weight_decay = 0.1;
    DL_CHECK(run_case("adam_weight_decay", DL_IR_OPTIM_ADAM, &hp));
}

DL_TEST(optim_adamw) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_ADAMW);
    DL_CHECK(hp.weight_decay == 1e-2);
    DL_CHECK(run_case("adamw_default", DL_IR_OPTIM_ADAMW, &hp));
    hp.lr = 0.1;
    hp.weight_decay = 0.1;
    hp.amsgrad = true;
    DL_CHECK(run_case("adamw_lr", DL_IR_OPTIM_ADAMW, &hp));
}

DL_TEST(optim_rmsprop) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_RMSPROP);
    DL_CHECK(run_case("rmsprop_default", DL_IR_OPTIM_RMSPROP, &hp));
    hp.lr = 0.05;
    hp.alpha = 0.9;
    hp.centered = true;
    DL_CHECK(run_case("rmsprop_centered", DL_IR_OPTIM_RMSPROP, &hp));
    hp = defaults(DL_IR_OPTIM_RMSPROP);
    hp.lr = 0.05;
    hp.momentum = 0.8;
    DL_CHECK(run_case("rmsprop_momentum", DL_IR_OPTIM_RMSPROP, &hp));
    hp.momentum = 0.0;
    hp.weight_decay = 0.1;
    DL_CHECK(run_case("rmsprop_weight_decay", DL_IR_OPTIM_RMSPROP, &hp));
    hp.alpha = 0.9;
    hp.eps = 1e-4;
    hp.momentum = 0.8;
    hp.centered = true;
    DL_CHECK(run_case("rmsprop_all", DL_IR_OPTIM_RMSPROP, &hp));
}

// The raw step function with caller-owned slots gives the same numbers as the state wrapper,
// and rejects bad arguments.
DL_TEST(optim_step_raw) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_ADAM);
    hp.lr = 0.1;
    hp.amsgrad = true;
    double p[3], m[3] = {0}, v[3] = {0}, vmax[3] = {0};
    double *slots[3] = {m, v, vmax};
    memcpy(p, P0, sizeof p);
    for (int64_t t = 1; t <= 3; t++) {
        DL_CHECK(dl_optim_ref_step(DL_IR_OPTIM_ADAM, &hp, t, p, G[t - 1], slots, 3) == DL_OK);
    }
    const optim_case *c = find_case("adam_amsgrad");
    DL_CHECK(c != NULL);
    for (int i = 0; i < 3; i++) {
        DL_CHECK_NEAR(p[i], c->param[i], 0, RTOL);
        DL_CHECK_NEAR(vmax[i], c->slots[2][i], 0, RTOL);
    }
    DL_CHECK(dl_optim_ref_step(DL_IR_OPTIM_ADAM, &hp, 0, p, G[0], slots, 3) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_optim_ref_step(DL_IR_OPTIM_ADAM, &hp, 1, p, G[0], NULL, 3) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_optim_ref_step(DL_IR_OPTIM_ADAM, &hp, 1, p, G[0], slots, -1) == DL_ERR_INVALID_ARG);
    // SGD without momentum keeps no state: slots may be NULL.
    dl_optim_ref_hparams sgd = defaults(DL_IR_OPTIM_SGD);
    DL_CHECK(dl_optim_ref_step(DL_IR_OPTIM_SGD, &sgd, 1, p, G[0], NULL, 3) == DL_OK);
}

DL_TEST(optim_defaults_and_slots) {
    dl_optim_ref_hparams hp = defaults(DL_IR_OPTIM_SGD);
    DL_CHECK(hp.lr == 1e-3 && hp.momentum == 0.0 && hp.dampening == 0.0 && !hp.nesterov &&
             hp.weight_decay == 0.0);
    hp = defaults(DL_IR_OPTIM_ADAM);
    DL_CHECK(hp.lr == 1e-3 && hp.beta1 == 0.9 && hp.beta2 == 0.999 && hp.eps == 1e-8 &&
             hp.weight_decay == 0.0 && !hp.amsgrad);
    hp = defaults(DL_IR_OPTIM_RMSPROP);
    DL_CHECK(hp.lr == 1e-2 && hp.alpha == 0.99 && hp.eps == 1e-8 && hp.momentum == 0.0 &&
             !hp.centered && hp.weight_decay == 0.0);

    const char *names[DL_OPTIM_REF_MAX_SLOTS];
    size_t n = 99;
    hp = defaults(DL_IR_OPTIM_SGD);
    dl_optim_ref_slots(DL_IR_OPTIM_SGD, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 0);
    hp.momentum = 0.9;
    dl_optim_ref_slots(DL_IR_OPTIM_SGD, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 1);
    DL_CHECK_STR_EQ(names[0], "momentum_buffer");
    hp = defaults(DL_IR_OPTIM_ADAMW);
    dl_optim_ref_slots(DL_IR_OPTIM_ADAMW, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 2);
    DL_CHECK_STR_EQ(names[0], "exp_avg");
    DL_CHECK_STR_EQ(names[1], "exp_avg_sq");
    hp.amsgrad = true;
    dl_optim_ref_slots(DL_IR_OPTIM_ADAM, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 3);
    DL_CHECK_STR_EQ(names[2], "max_exp_avg_sq");
    hp = defaults(DL_IR_OPTIM_RMSPROP);
    dl_optim_ref_slots(DL_IR_OPTIM_RMSPROP, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 1);
    DL_CHECK_STR_EQ(names[0], "square_avg");
    hp.centered = true;
    dl_optim_ref_slots(DL_IR_OPTIM_RMSPROP, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 2);
    DL_CHECK_STR_EQ(names[1], "grad_avg");
    hp.momentum = 0.5;
    dl_optim_ref_slots(DL_IR_OPTIM_RMSPROP, &hp, names, &n);
    DL_CHECK_EQ_I64(n, 3);
    DL_CHECK_STR_EQ(names[0], "square_avg");
    DL_CHECK_STR_EQ(names[1], "momentum_buffer");
    DL_CHECK_STR_EQ(names[2], "grad_avg");
}

DL_TEST(optim_hparams_from_train) {
    dl_ir_attr attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "lr";
    attrs[0].kind = DL_IR_ATTR_FLOAT;
    attrs[0].f = 0.25;
    attrs[1].name = "nesterov";
    attrs[1].kind = DL_IR_ATTR_INT;
    attrs[1].i = 1;
    attrs[2].name = "momentum";
    attrs[2].kind = DL_IR_ATTR_FLOAT;
    attrs[2].f = 0.9;
    dl_ir_train t;
    memset(&t, 0, sizeof t);
    t.optimizer = DL_IR_OPTIM_SGD;
    t.opt_attrs = attrs;
    t.n_opt_attrs = 3;
    dl_optim_ref_hparams hp;
    dl_optim_ref_hparams_from_train(&t, &hp);
    DL_CHECK(hp.lr == 0.25 && hp.nesterov && hp.momentum == 0.9 && hp.dampening == 0.0);
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_SGD, &hp) == DL_OK);
    hp.dampening = 0.1; // PyTorch: "Nesterov momentum requires a momentum and zero dampening"
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_SGD, &hp) == DL_ERR_INVALID_ARG);
    hp = defaults(DL_IR_OPTIM_ADAM);
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_ADAM, &hp) == DL_OK);
    hp.beta2 = 1.0;
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_ADAM, &hp) == DL_ERR_INVALID_ARG);
    hp = defaults(DL_IR_OPTIM_RMSPROP);
    hp.lr = -1.0;
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_RMSPROP, &hp) == DL_ERR_INVALID_ARG);
    hp.lr = INFINITY; // every value must be finite
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_RMSPROP, &hp) == DL_ERR_INVALID_ARG);
    hp = defaults(DL_IR_OPTIM_SGD);
    hp.dampening = NAN;
    DL_CHECK(dl_optim_ref_hparams_check(DL_IR_OPTIM_SGD, &hp) == DL_ERR_INVALID_ARG);
}

// ---------------------------------------------------------------------------------------------
// Global-norm clipping on two parameters. Expected values:
//
// import math
// a = [0.3, -1.2, 2.5]; b = [0.7, -0.05]
// total = math.sqrt(sum(x * x for x in a + b))
// for max_norm in (1.0, 2.0):
//     coef = min(max_norm / (total + 1e-6), 1.0)
//     print(repr(total), [repr(x * coef) for x in a], [repr(x * coef) for x in b])
//
// prints
// 2.876195403653931 ['0.104304420803419', '-0.417217683213676', '0.8692035066951584']
// ['0.24337698187464432', '-0.017384070133903168'] 2.876195403653931 ['0.208608841606838',
// '-0.834435366427352', '1.738407013390317'] ['0.48675396374928864', '-0.034768140267806336']

DL_TEST(optim_clip_global_norm) {
    const double a0[3] = {0.3, -1.2, 2.5}, b0[2] = {0.7, -0.05};
    double a[3], b[2];
    double *grads[2] = {a, b};
    const int64_t ns[2] = {3, 2};
    const double want_a[2][3] = {{0.104304420803419, -0.417217683213676, 0.8692035066951584},
                                 {0.208608841606838, -0.834435366427352, 1.738407013390317}};
    const double want_b[2][2] = {{0.24337698187464432, -0.017384070133903168},
                                 {0.48675396374928864, -0.034768140267806336}};
    const double max_norms[2] = {1.0, 2.0};
    for (int k = 0; k < 2; k++) {
        memcpy(a, a0, sizeof a);
        memcpy(b, b0, sizeof b);
        double total = -1.0;
        dl_optim_ref_clip_global_norm(grads, ns, 2, max_norms[k], &total);
        DL_CHECK_NEAR(total, 2.876195403653931, 0, RTOL);
        for (int i = 0; i < 3; i++) {
            DL_CHECK_NEAR(a[i], want_a[k][i], 0, RTOL);
        }
        for (int i = 0; i < 2; i++) {
            DL_CHECK_NEAR(b[i], want_b[k][i], 0, RTOL);
        }
    }
    // Under the limit: untouched (multiplied by exactly 1).
    memcpy(a, a0, sizeof a);
    memcpy(b, b0, sizeof b);
    double total = -1.0;
    dl_optim_ref_clip_global_norm(grads, ns, 2, 5.0, &total);
    DL_CHECK_NEAR(total, 2.876195403653931, 0, RTOL);
    DL_CHECK(memcmp(a, a0, sizeof a) == 0 && memcmp(b, b0, sizeof b) == 0);
    dl_optim_ref_clip_global_norm(grads, ns, 0, 1.0, &total);
    DL_CHECK(total == 0.0);
}

// ---------------------------------------------------------------------------------------------
// Dynamic loss scaling: GradScaler(init_scale=8, growth_factor=2, backoff_factor=0.5,
// growth_interval=3) fed found_inf = F F T F F F F F F goes (scale, tracker)
// (8,1) (8,2) (4,0) (4,1) (4,2) (8,0) (8,1) (8,2) (16,0).

DL_TEST(optim_loss_scale) {
    dl_optim_ref_loss_scale ls;
    dl_optim_ref_loss_scale_init_defaults(&ls);
    DL_CHECK(ls.scale == 65536.0 && ls.growth == 2.0 && ls.backoff == 0.5 && ls.interval == 2000 &&
             ls.growth_tracker == 0);
    ls.scale = 8.0;
    ls.interval = 3;
    const bool inf[9] = {false, false, true, false, false, false, false, false, false};
    const double want_scale[9] = {8, 8, 4, 4, 4, 8, 8, 8, 16};
    const int64_t want_tracker[9] = {1, 2, 0, 1, 2, 0, 1, 2, 0};
    for (int i = 0; i < 9; i++) {
        dl_optim_ref_loss_scale_update(&ls, inf[i]);
        DL_CHECK(ls.scale == want_scale[i]);
        DL_CHECK_EQ_I64(ls.growth_tracker, want_tracker[i]);
    }
    // Growth that would overflow float32 is not taken; the tracker still resets.
    ls.scale = ldexp(1.0, 127);
    ls.interval = 1;
    dl_optim_ref_loss_scale_update(&ls, false);
    DL_CHECK(ls.scale == ldexp(1.0, 127));
    DL_CHECK_EQ_I64(ls.growth_tracker, 0);
    // Interval 1: grows every good step.
    ls.scale = 2.0;
    dl_optim_ref_loss_scale_update(&ls, false);
    DL_CHECK(ls.scale == 4.0);
}

DL_TEST(optim_loss_scale_from_train) {
    dl_ir_attr attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "init";
    attrs[0].kind = DL_IR_ATTR_FLOAT;
    attrs[0].f = 1024.0;
    attrs[1].name = "interval";
    attrs[1].kind = DL_IR_ATTR_INT;
    attrs[1].i = 10;
    dl_ir_train t;
    memset(&t, 0, sizeof t);
    t.loss_scale = DL_IR_LS_DYNAMIC;
    t.ls_attrs = attrs;
    t.n_ls_attrs = 2;
    dl_optim_ref_loss_scale ls;
    dl_optim_ref_loss_scale_init_from_train(&ls, &t);
    DL_CHECK(ls.scale == 1024.0 && ls.growth == 2.0 && ls.backoff == 0.5 && ls.interval == 10);
    t.loss_scale = DL_IR_LS_STATIC;
    t.loss_scale_value = 128.0;
    dl_optim_ref_loss_scale_init_from_train(&ls, &t);
    DL_CHECK(ls.scale == 128.0);
    dl_optim_ref_loss_scale_update(&ls, true);
    DL_CHECK(ls.scale == 128.0);
    t.loss_scale = DL_IR_LS_NONE;
    dl_optim_ref_loss_scale_init_from_train(&ls, &t);
    DL_CHECK(ls.scale == 1.0);
}

DL_TEST(optim_unscale) {
    double a[2] = {4.0, -2.0}, b[1] = {1.0};
    double *grads[2] = {a, b};
    const int64_t ns[2] = {2, 1};
    DL_CHECK(!dl_optim_ref_unscale(grads, ns, 2, 4.0));
    DL_CHECK(a[0] == 1.0 && a[1] == -0.5 && b[0] == 0.25);
    // inv_scale is PyTorch's float32 reciprocal: (float)(1/3), not 1/3.
    b[0] = 3.0;
    DL_CHECK(!dl_optim_ref_unscale(grads, ns, 2, 3.0));
    DL_CHECK(b[0] == 3.0 * (double)(float)(1.0 / 3.0));
    b[0] = INFINITY;
    DL_CHECK(dl_optim_ref_unscale(grads, ns, 2, 1.0));
    b[0] = NAN;
    DL_CHECK(dl_optim_ref_unscale(grads, ns, 2, 1.0));
}

DL_TEST_MAIN()
