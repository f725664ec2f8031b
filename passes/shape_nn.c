// passes/shape_nn.c — shape rules for the neural-network ops: Conv, ConvTranspose, MaxPool,
// AveragePool, GlobalAveragePool, BatchNormalization, LayerNormalization, Softmax/LogSoftmax,
// Dropout and the losses.
//
// Convolutions are 2-D over NCHW tensors (the graph format's scope); pools take any number of
// spatial dims after N and C, as ONNX's do. Per spatial dim i
// with input size in, kernel k, stride s, dilation d and pads (b, e), the effective kernel is
// ek = (k - 1) * d + 1 and
//   NOTSET/VALID: out = floor((in + b + e - ek) / s) + 1  (ceil with ceil_mode; VALID: b = e = 0)
//   SAME_*:       out = ceil(in / s)
// With ceil_mode a last window that would start inside the end padding is dropped (PyTorch and
// ONNX >= 1.15 do the same), so every window overlaps the input.
#include "shape_internal.h"

#include <math.h>
#include <string.h>

#define N_SP 2 // spatial dims of the supported convolutions

bool dl_pass__sh_nonneg_float_attr(dl_pass__sh *c, const char *name) {
    double v = dl_ir_node_attr_float(c->n, name);
    if (!(v >= 0) || v == INFINITY) {
        char buf[40];
        dl_format_double(v, buf);
        const dl_ir_attr *a = dl_ir_node_attr(c->n, name);
        return dl_pass__sh_fail_at(c, a ? a->loc : DL_NO_LOC, "%s must be finite and >= 0, got %s",
                                   name, buf);
    }
    return true;
}

// Reads an INTS attribute that must have `n` entries, or fills `def` when absent.
bool dl_pass__sh_ints_n(dl_pass__sh *c, const char *name, size_t n, int64_t def, int64_t *out) {
    size_t got;
    const int64_t *v = dl_pass__sh_attr_ints(c, name, &got, NULL);
    if (!v) {
        for (size_t i = 0; i < n; i++) {
            out[i] = def;
        }
        return true;
    }
    if (got != n) {
        return dl_pass__sh_fail(c, "%s must have %zu entries, got %zu", name, n, got);
    }
    memcpy(out, v, sizeof(int64_t) * n);
    return true;
}

static bool need_rank(dl_pass__sh *c, const dl_ir_type *t, int32_t rank, const char *what,
                      const char *layout) {
    if (t->rank != rank) {
        return dl_pass__sh_fail(c, "%s must have rank %d %s, got %s", what, (int)rank, layout,
                                dl_pass__sh_shape(c, t));
    }
    return true;
}

// ek = (k - 1) * d + 1, false when it overflows int64.
static bool dilated_kernel(int64_t k, int64_t d, int64_t *ek) {
    return !__builtin_mul_overflow(k - 1, d, ek) && !__builtin_add_overflow(*ek, 1, ek);
}

// Location of attribute `name` of the node (DL_NO_LOC when absent: the node's is used).
static dl_src_loc attr_loc(const dl_pass__sh *c, const char *name) {
    const dl_ir_attr *a = dl_ir_node_attr(c->n, name);
    return a ? a->loc : DL_NO_LOC;
}

bool dl_pass__sh_geometry_ok(dl_pass__sh *c, const int64_t *k, const int64_t *s, const int64_t *d,
                             const int64_t *p, size_t n_sp) {
    for (size_t i = 0; i < n_sp; i++) {
        if (k[i] < 1) {
            return dl_pass__sh_fail_at(c, attr_loc(c, "kernel_shape"),
                                       "kernel %s must be >= 1 in every spatial dim",
                                       dl_pass__sh_ints(c, k, n_sp));
        }
        if (s[i] < 1) {
            return dl_pass__sh_fail_at(c, attr_loc(c, "strides"), "strides %s must be >= 1",
                                       dl_pass__sh_ints(c, s, n_sp));
        }
        if (d[i] < 1) {
            return dl_pass__sh_fail_at(c, attr_loc(c, "dilations"), "dilations %s must be >= 1",
                                       dl_pass__sh_ints(c, d, n_sp));
        }
        if (p[i] < 0 || p[i + n_sp] < 0) {
            return dl_pass__sh_fail_at(c, attr_loc(c, "pads"), "pads %s must be >= 0",
                                       dl_pass__sh_ints(c, p, 2 * n_sp));
        }
    }
    return true;
}

// Output spatial sizes of a convolution or pool over X ([N, C, n_sp spatial dims]) with
// kernel k (also the gradient ops' check of their dy, shape_grad_nn.c).
bool dl_pass__sh_spatial_out(dl_pass__sh *c, const dl_ir_type *x, const int64_t *k, bool ceil_mode,
                             int64_t *out) {
    size_t n_sp = (size_t)x->rank - 2;
    int64_t s[DL_MAX_RANK], d[DL_MAX_RANK], p[2 * DL_MAX_RANK];
    if (!dl_pass__sh_ints_n(c, "strides", n_sp, 1, s) ||
        !dl_pass__sh_ints_n(c, "dilations", n_sp, 1, d) ||
        !dl_pass__sh_ints_n(c, "pads", 2 * n_sp, 0, p)) {
        return false;
    }
    if (!dl_pass__sh_geometry_ok(c, k, s, d, p, n_sp)) {
        return false;
    }
    const char *ap = dl_ir_node_attr_string(c->n, "auto_pad");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "VALID") == 0) {
        memset(p, 0, sizeof p);
    }
    int64_t ek[DL_MAX_RANK], padded[DL_MAX_RANK];
    bool fits = true;
    for (size_t i = 0; i < n_sp; i++) {
        int64_t in = x->dims[2 + i].value;
        // The attributes are whatever int64 the model wrote: the arithmetic on them is checked
        // (the dims themselves are bounded by DL_IR_MAX_TENSOR_BYTES).
        if (!dilated_kernel(k[i], d[i], &ek[i]) || __builtin_add_overflow(in, p[i], &padded[i]) ||
            __builtin_add_overflow(padded[i], p[i + n_sp], &padded[i])) {
            return dl_pass__sh_fail(
                c, "kernel %s with dilations %s and pads %s overflows int64 for the input %s",
                dl_pass__sh_ints(c, k, n_sp), dl_pass__sh_ints(c, d, n_sp),
                dl_pass__sh_ints(c, p, 2 * n_sp), dl_pass__sh_shape(c, x));
        }
        if (same) {
            out[i] = in / s[i] + (in % s[i] != 0); // ceil(in / s) without overflow
            continue;
        }
        if (padded[i] < ek[i]) {
            fits = false;
            continue;
        }
        int64_t span = padded[i] - ek[i];
        out[i] = span / s[i] + (ceil_mode && span % s[i] != 0) + 1;
        int64_t start; // of the last window, dropped when it starts inside the end padding
        if (ceil_mode && out[i] > 1 &&
            (__builtin_mul_overflow(out[i] - 1, s[i], &start) || start >= in + p[i])) {
            out[i]--;
        }
    }
    if (!fits) {
        return dl_pass__sh_fail(c, "kernel %s (dilated %s) is larger than the padded input %s",
                                dl_pass__sh_ints(c, k, n_sp), dl_pass__sh_ints(c, ek, n_sp),
                                dl_pass__sh_ints(c, padded, n_sp));
    }
    return true;
}

// Conv (X: [N, C, H, W], W: [M, C/group, kH, kW], B?: [M]) -> [N, M, oH, oW]
bool dl_pass__sh_conv(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *w = sh_in(c, 1), *b = sh_in(c, 2);
    if (!dl_pass__sh_need_float(c, x, "X") || !dl_pass__sh_same_dtype(c, x, w) ||
        (b && !dl_pass__sh_same_dtype(c, x, b)) || !need_rank(c, x, 4, "X", "(N, C, H, W)") ||
        !need_rank(c, w, 4, "W", "(M, C/group, kH, kW)")) {
        return false;
    }
    int64_t group = dl_ir_node_attr_int(c->n, "group");
    int64_t ch = x->dims[1].value, m = w->dims[0].value;
    if (ch % group != 0 || m % group != 0) {
        return dl_pass__sh_fail(c, "group %lld does not divide the channels: X %s, W %s",
                                (long long)group, dl_pass__sh_shape(c, x), dl_pass__sh_shape(c, w));
    }
    int64_t want_ch; // W's channels per group times group, checked: group is any int64 >= 1
    if (__builtin_mul_overflow(w->dims[1].value, group, &want_ch)) {
        return dl_pass__sh_fail(c, "group %lld times W's %lld channels overflows int64: X %s, W %s",
                                (long long)group, (long long)w->dims[1].value,
                                dl_pass__sh_shape(c, x), dl_pass__sh_shape(c, w));
    }
    if (want_ch != ch) {
        return dl_pass__sh_fail(c, "W expects %lld input channels, X has %lld: X %s, W %s",
                                (long long)want_ch, (long long)ch, dl_pass__sh_shape(c, x),
                                dl_pass__sh_shape(c, w));
    }
    int64_t k[N_SP] = {w->dims[2].value, w->dims[3].value}, ks[N_SP];
    if (!dl_pass__sh_ints_n(c, "kernel_shape", N_SP, 0, ks)) {
        return false;
    }
    if (dl_ir_node_attr(c->n, "kernel_shape") && (ks[0] != k[0] || ks[1] != k[1])) {
        return dl_pass__sh_fail(c, "kernel_shape %s does not match W %s",
                                dl_pass__sh_ints(c, ks, N_SP), dl_pass__sh_shape(c, w));
    }
    if (b && (b->rank != 1 || b->dims[0].value != m)) {
        return dl_pass__sh_fail(c, "B must have shape [%lld], got %s", (long long)m,
                                dl_pass__sh_shape(c, b));
    }
    int64_t o[N_SP];
    if (!dl_pass__sh_spatial_out(c, x, k, false, o)) {
        return false;
    }
    dl_ir_type *y = sh_out(c, 0);
    *y = (dl_ir_type){.dtype = x->dtype, .rank = 4};
    y->dims[0] = x->dims[0];
    y->dims[1] = w->dims[0];
    y->dims[2] = sh_dim(o[0], -1);
    y->dims[3] = sh_dim(o[1], -1);
    return true;
}

// ConvTranspose (X: [N, C, H, W], W: [C, M/group, kH, kW], B?: [M]) -> [N, M, oH, oW] with
//   oH = s * (H - 1) + output_padding + ek - pad_begin - pad_end  (NOTSET / VALID)
//   oH = H * s  (SAME_*), or output_shape when given.
bool dl_pass__sh_conv_transpose(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *w = sh_in(c, 1), *b = sh_in(c, 2);
    if (!dl_pass__sh_need_float(c, x, "X") || !dl_pass__sh_same_dtype(c, x, w) ||
        (b && !dl_pass__sh_same_dtype(c, x, b)) || !need_rank(c, x, 4, "X", "(N, C, H, W)") ||
        !need_rank(c, w, 4, "W", "(C, M/group, kH, kW)")) {
        return false;
    }
    int64_t group = dl_ir_node_attr_int(c->n, "group");
    int64_t ch = x->dims[1].value;
    if (ch % group != 0) {
        return dl_pass__sh_fail(c, "group %lld does not divide the channels: X %s, W %s",
                                (long long)group, dl_pass__sh_shape(c, x), dl_pass__sh_shape(c, w));
    }
    if (w->dims[0].value != ch) {
        return dl_pass__sh_fail(c, "W expects %lld input channels, X has %lld: X %s, W %s",
                                (long long)w->dims[0].value, (long long)ch, dl_pass__sh_shape(c, x),
                                dl_pass__sh_shape(c, w));
    }
    int64_t m;
    if (__builtin_mul_overflow(w->dims[1].value, group, &m)) {
        return dl_pass__sh_fail(c, "group %lld times W's %lld channels overflows int64: X %s, W %s",
                                (long long)group, (long long)w->dims[1].value,
                                dl_pass__sh_shape(c, x), dl_pass__sh_shape(c, w));
    }
    int64_t k[N_SP] = {w->dims[2].value, w->dims[3].value}, ks[N_SP];
    int64_t s[N_SP], d[N_SP], p[2 * N_SP], op[N_SP], os[N_SP];
    if (!dl_pass__sh_ints_n(c, "kernel_shape", N_SP, 0, ks) ||
        !dl_pass__sh_ints_n(c, "strides", N_SP, 1, s) ||
        !dl_pass__sh_ints_n(c, "dilations", N_SP, 1, d) ||
        !dl_pass__sh_ints_n(c, "pads", 2 * N_SP, 0, p) ||
        !dl_pass__sh_ints_n(c, "output_padding", N_SP, 0, op) ||
        !dl_pass__sh_ints_n(c, "output_shape", N_SP, 0, os)) {
        return false;
    }
    if (dl_ir_node_attr(c->n, "kernel_shape") && (ks[0] != k[0] || ks[1] != k[1])) {
        return dl_pass__sh_fail(c, "kernel_shape %s does not match W %s",
                                dl_pass__sh_ints(c, ks, N_SP), dl_pass__sh_shape(c, w));
    }
    if (b && (b->rank != 1 || b->dims[0].value != m)) {
        return dl_pass__sh_fail(c, "B must have shape [%lld], got %s", (long long)m,
                                dl_pass__sh_shape(c, b));
    }
    const char *ap = dl_ir_node_attr_string(c->n, "auto_pad");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "VALID") == 0) {
        memset(p, 0, sizeof p);
    }
    if (!dl_pass__sh_geometry_ok(c, k, s, d, p, N_SP)) {
        return false;
    }
    // output_padding adds positions past the last full window: ONNX (and PyTorch) require it to
    // be smaller than the stride or the dilation, else those positions would be a window the
    // input never reaches.
    for (int i = 0; i < N_SP; i++) {
        if (op[i] < 0 || (op[i] >= s[i] && op[i] >= d[i])) {
            return dl_pass__sh_fail_at(
                c, attr_loc(c, "output_padding"),
                "output_padding %s must be >= 0 and smaller than strides %s or dilations %s",
                dl_pass__sh_ints(c, op, N_SP), dl_pass__sh_ints(c, s, N_SP),
                dl_pass__sh_ints(c, d, N_SP));
        }
    }
    bool has_os = dl_ir_node_attr(c->n, "output_shape") != NULL;
    int64_t o[N_SP];
    for (int i = 0; i < N_SP; i++) {
        int64_t in = x->dims[2 + i].value, ek, full; // full: size before removing any padding
        // Every step is checked: strides, dilations and output_padding are any int64 >= 1.
        bool ovf =
            !dilated_kernel(k[i], d[i], &ek) || __builtin_mul_overflow(s[i], in - 1, &full) ||
            __builtin_add_overflow(full, op[i], &full) || __builtin_add_overflow(full, ek, &full) ||
            (same && __builtin_mul_overflow(in, s[i], &o[i]));
        if (ovf) {
            return dl_pass__sh_fail(c,
                                    "strides %s, dilations %s and output_padding %s overflow "
                                    "int64 for the input %s and kernel %s",
                                    dl_pass__sh_ints(c, s, N_SP), dl_pass__sh_ints(c, d, N_SP),
                                    dl_pass__sh_ints(c, op, N_SP), dl_pass__sh_shape(c, x),
                                    dl_pass__sh_ints(c, k, N_SP));
        }
        if (has_os) {
            // An output_shape beyond `full` means negative total padding: as in onnxruntime,
            // padding is clamped at 0 and the extra positions get only the bias.
            o[i] = os[i];
        } else if (!same) {
            // full may be negative for an empty input: a checked overflow leaves no output too.
            if (__builtin_sub_overflow(full, p[i], &o[i]) ||
                __builtin_sub_overflow(o[i], p[i + N_SP], &o[i]) || o[i] < 1) {
                return dl_pass__sh_fail(c, "pads %s leave no output for input %s",
                                        dl_pass__sh_ints(c, p, 2 * N_SP), dl_pass__sh_shape(c, x));
            }
        }
    }
    dl_ir_type *y = sh_out(c, 0);
    *y = (dl_ir_type){.dtype = x->dtype, .rank = 4};
    y->dims[0] = x->dims[0];
    y->dims[1] = sh_dim(m, group == 1 ? w->dims[1].sym : -1);
    y->dims[2] = sh_dim(o[0], -1);
    y->dims[3] = sh_dim(o[1], -1);
    return true;
}

bool dl_pass__sh_pool_pads_ok(dl_pass__sh *c, const int64_t *k, size_t n_sp) {
    int64_t p[2 * DL_MAX_RANK];
    if (strcmp(dl_ir_node_attr_string(c->n, "auto_pad"), "NOTSET") != 0 ||
        !dl_pass__sh_ints_n(c, "pads", 2 * n_sp, 0, p)) {
        return true; // SAME_* / VALID compute their own pads; a bad count is reported later
    }
    for (size_t i = 0; i < 2 * n_sp; i++) {
        if (p[i] >= k[i % n_sp]) {
            return dl_pass__sh_fail_at(
                c, attr_loc(c, "pads"), "pads %s must be smaller than the kernel %s",
                dl_pass__sh_ints(c, p, 2 * n_sp), dl_pass__sh_ints(c, k, n_sp));
        }
    }
    return true;
}

// MaxPool / AveragePool (X: [N, C, d1, ...]) -> [N, C, o1, ...]; MaxPool's Indices are int64.
bool dl_pass__sh_pool(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_float(c, x, "X")) {
        return false;
    }
    if (x->rank < 3) {
        return dl_pass__sh_fail(c, "X must have rank >= 3 (N, C, spatial...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    size_t n_sp = (size_t)x->rank - 2;
    int64_t k[DL_MAX_RANK], o[DL_MAX_RANK];
    if (!dl_ir_node_attr(c->n, "kernel_shape")) {
        return dl_pass__sh_fail(c, "kernel_shape is required");
    }
    if (!dl_pass__sh_ints_n(c, "kernel_shape", n_sp, 1, k) ||
        !dl_pass__sh_spatial_out(c, x, k, dl_ir_node_attr_int(c->n, "ceil_mode") != 0, o) ||
        !dl_pass__sh_pool_pads_ok(c, k, n_sp)) {
        return false;
    }
    dl_ir_type *y = sh_out(c, 0);
    *y = *x;
    for (size_t i = 0; i < n_sp; i++) {
        y->dims[2 + i] = sh_dim(o[i], -1);
    }
    dl_ir_type *ind = sh_out(c, 1);
    if (ind) {
        *ind = *y;
        ind->dtype = DL_DT_INT64;
    }
    return true;
}

// GlobalAveragePool (X: [N, C, d1, ...]) -> [N, C, 1, ...]
bool dl_pass__sh_global_pool(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_float(c, x, "X")) {
        return false;
    }
    if (x->rank < 3) {
        return dl_pass__sh_fail(c, "X must have rank >= 3 (N, C, spatial...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    dl_ir_type *y = sh_out(c, 0);
    *y = *x;
    for (int32_t i = 2; i < x->rank; i++) {
        y->dims[i] = sh_dim(1, -1);
    }
    return true;
}

// BatchNormalization (X: [N, C, ...], scale, B, mean, var: [C]) -> Y like X,
// running_mean and running_var: [C] of mean's dtype.
bool dl_pass__sh_batch_norm(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_float(c, x, "X")) {
        return false;
    }
    if (x->rank < 2) {
        return dl_pass__sh_fail(c, "X must have rank >= 2 (N, C, ...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    if (!dl_pass__sh_nonneg_float_attr(c, "epsilon")) {
        return false;
    }
    static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; i++) {
        const dl_ir_type *t = sh_in(c, i);
        if (!t) {
            return dl_pass__sh_fail(c, "%s is required", names[i]);
        }
        if (!dl_pass__sh_need_float(c, t, names[i])) {
            return false;
        }
        if (t->rank != 1 || t->dims[0].value != x->dims[1].value) {
            return dl_pass__sh_fail(c, "%s must have shape [%lld] (the channels of X %s), got %s",
                                    names[i], (long long)x->dims[1].value, dl_pass__sh_shape(c, x),
                                    dl_pass__sh_shape(c, t));
        }
    }
    if (!dl_pass__sh_same_dtype(c, sh_in(c, 3), sh_in(c, 4))) {
        return false;
    }
    *sh_out(c, 0) = *x;
    for (size_t i = 1; i < 3; i++) {
        dl_ir_type *t = sh_out(c, i);
        if (t) {
            *t = (dl_ir_type){.dtype = sh_in(c, 3)->dtype, .rank = 1};
            t->dims[0] = x->dims[1];
        }
    }
    return true;
}

// LayerNormalization (X, Scale, B?) over dims [axis, r): Scale and B broadcast one way to
// X.shape[axis:]. Mean and InvStdDev: X's shape with dims from axis on set to 1, float.
bool dl_pass__sh_layer_norm(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    int32_t axis;
    if (!dl_pass__sh_need_float(c, x, "X") ||
        !dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis) ||
        !dl_pass__sh_nonneg_float_attr(c, "epsilon")) {
        return false;
    }
    static const char *const names[] = {"X", "Scale", "B"};
    int32_t nr = x->rank - axis; // rank of the normalised shape
    for (size_t i = 1; i < 3; i++) {
        const dl_ir_type *t = sh_in(c, i);
        if (!t) {
            continue;
        }
        if (!dl_pass__sh_same_dtype(c, x, t)) {
            return false;
        }
        bool ok = t->rank <= nr;
        for (int32_t j = 0; ok && j < t->rank; j++) {
            int64_t got = t->dims[j].value, want = x->dims[x->rank - t->rank + j].value;
            ok = got == want || got == 1;
        }
        if (!ok) {
            dl_ir_type norm = {.dtype = x->dtype, .rank = nr};
            memcpy(norm.dims, x->dims + axis, sizeof(dl_ir_dim) * (size_t)nr);
            return dl_pass__sh_fail(c, "%s %s is not broadcastable to the normalised shape %s",
                                    names[i], dl_pass__sh_shape(c, t), dl_pass__sh_shape(c, &norm));
        }
    }
    *sh_out(c, 0) = *x;
    for (size_t i = 1; i < 3; i++) {
        dl_ir_type *t = sh_out(c, i);
        if (t) {
            *t = *x;
            t->dtype = DL_DT_FLOAT;
            for (int32_t j = axis; j < x->rank; j++) {
                t->dims[j] = sh_dim(1, -1);
            }
        }
    }
    return true;
}

bool dl_pass__sh_softmax(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    int32_t axis;
    if (!dl_pass__sh_need_float(c, x, "input") ||
        !dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis)) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}

// Dropout (data, ratio?: float scalar, training_mode?: bool scalar, counter?: int64 scalar)
//   -> output, mask?: bool
// counter is the train step's RNG counter (the autodiff pass feeds m->step_counter).
bool dl_pass__sh_dropout(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *ratio = sh_in(c, 1), *tm = sh_in(c, 2);
    const dl_ir_type *cnt = sh_in(c, 3);
    if (!dl_pass__sh_need_float(c, x, "data")) {
        return false;
    }
    if (ratio && (!dl_pass__sh_need_float(c, ratio, "ratio"))) {
        return false;
    }
    if (ratio && ratio->rank != 0) {
        return dl_pass__sh_fail(c, "ratio must be a scalar, got %s", dl_pass__sh_shape(c, ratio));
    }
    // ONNX: ratio in [0, 1) (1 would scale the kept elements by 1 / (1 - ratio) = inf). As an
    // attribute, or as a constant input whose value is known here.
    const dl_ir_attr *ra = dl_ir_node_attr(c->n, "ratio");
    const dl_ir_value *rv = sh_n_in(c) > 1 ? c->n->inputs[1] : NULL;
    double r = 0;
    bool known = false;
    if (ra) {
        r = dl_ir_node_attr_float(c->n, "ratio");
        known = true;
    } else if (rv && rv->kind == DL_IR_VAL_CONST && rv->lit && rv->lit->n >= 1 && rv->lit->f) {
        r = rv->lit->f[0];
        known = true;
    }
    if (known && !(r >= 0 && r < 1)) {
        char buf[40];
        dl_format_double(r, buf);
        return dl_pass__sh_fail_at(c, ra ? ra->loc : DL_NO_LOC, "ratio must be in [0, 1), got %s",
                                   buf);
    }
    if (tm && (tm->dtype != DL_DT_BOOL || tm->rank != 0)) {
        return dl_pass__sh_fail(c, "training_mode must be a bool scalar, got %s%s",
                                dl_dtype_name(tm->dtype), dl_pass__sh_shape(c, tm));
    }
    if (cnt && (cnt->dtype != DL_DT_INT64 || cnt->rank != 0)) {
        return dl_pass__sh_fail(c, "counter must be an int64 scalar, got %s%s",
                                dl_dtype_name(cnt->dtype), dl_pass__sh_shape(c, cnt));
    }
    *sh_out(c, 0) = *x;
    dl_ir_type *mask = sh_out(c, 1);
    if (mask) {
        *mask = *x;
        mask->dtype = DL_DT_BOOL;
    }
    return true;
}

// Output type of a loss with `reduction`: `per_elem` for "none", else a scalar of dtype dt.
static void loss_out(dl_pass__sh *c, const dl_ir_type *per_elem, dl_dtype dt) {
    const char *red = dl_ir_node_attr_string(c->n, "reduction");
    dl_ir_type *o = sh_out(c, 0);
    if (strcmp(red, "none") == 0) {
        *o = *per_elem;
    } else {
        *o = (dl_ir_type){.rank = 0};
    }
    o->dtype = dt;
}

// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss
//   (scores: [N, C, d1...], labels: [N, d1...] int, weights?: [C]) -> [N, d1...] or scalar;
//   SCE's log_prob output has the scores' shape.
bool dl_pass__sh_loss(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *lab = sh_in(c, 1), *w = sh_in(c, 2);
    if (!dl_pass__sh_need_float(c, x, "scores") || !dl_pass__sh_need_int_index(c, lab, "labels")) {
        return false;
    }
    if (x->rank < 2) {
        return dl_pass__sh_fail(c, "scores must have rank >= 2 (N, C, ...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    // The labels' shape: scores' shape without C.
    dl_ir_type want = {.dtype = lab->dtype, .rank = x->rank - 1};
    want.dims[0] = x->dims[0];
    for (int32_t i = 2; i < x->rank; i++) {
        want.dims[i - 1] = x->dims[i];
    }
    bool ok = lab->rank == want.rank;
    for (int32_t i = 0; ok && i < want.rank; i++) {
        ok = lab->dims[i].value == want.dims[i].value;
    }
    if (!ok) {
        return dl_pass__sh_fail(c, "labels must have shape %s for scores %s, got %s",
                                dl_pass__sh_shape(c, &want), dl_pass__sh_shape(c, x),
                                dl_pass__sh_shape(c, lab));
    }
    if (w) {
        if (!dl_pass__sh_same_dtype(c, x, w)) {
            return false;
        }
        if (w->rank != 1 || w->dims[0].value != x->dims[1].value) {
            return dl_pass__sh_fail(c, "weights must have shape [%lld] (the classes of %s), got %s",
                                    (long long)x->dims[1].value, dl_pass__sh_shape(c, x),
                                    dl_pass__sh_shape(c, w));
        }
    }
    for (int32_t i = 0; i < want.rank; i++) {
        if (want.dims[i].sym < 0) {
            want.dims[i].sym = lab->dims[i].sym;
        }
    }
    loss_out(c, &want, x->dtype);
    dl_ir_type *lp = sh_out(c, 1);
    if (lp) {
        *lp = *x;
    }
    return true;
}

// MeanSquaredError (a, b of one float type and shape) -> that shape ("none") or a scalar.
bool dl_pass__sh_mse(dl_pass__sh *c) {
    const dl_ir_type *a = sh_in(c, 0), *b = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, a, "input") || !dl_pass__sh_same_dtype(c, a, b)) {
        return false;
    }
    bool ok = a->rank == b->rank;
    for (int32_t i = 0; ok && i < a->rank; i++) {
        ok = a->dims[i].value == b->dims[i].value;
    }
    if (!ok) {
        return dl_pass__sh_fail(c, "inputs must have the same shape: %s and %s",
                                dl_pass__sh_shape(c, a), dl_pass__sh_shape(c, b));
    }
    dl_ir_type per = *a;
    for (int32_t i = 0; i < a->rank; i++) {
        if (per.dims[i].sym < 0) {
            per.dims[i].sym = b->dims[i].sym;
        }
    }
    loss_out(c, &per, a->dtype);
    return true;
}
