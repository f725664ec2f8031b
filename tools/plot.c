// tools/plot.c — `dlcc plot LOG -o CURVE.svg`: the loss curve of a `dlcc train --log` file (JSON
// Lines or CSV), its test evaluations and the learning rate on a second axis, as one SVG file
// that needs nothing to view (no script, no font file, no external reference).
//
// Reading: one record per line (a flat JSON object, or a CSV row under the log's header); the
// fields used are kind, step, loss, lr, eval_loss and eval_accuracy, others are ignored. A step
// number at or below the previous one (a resumed run that logged again from its checkpoint)
// replaces the points from that step on. Errors name the file and line; nothing is written.
// Drawing: a fixed 880 x 520 canvas; x is the step, the left axis the loss (and eval losses as
// dots), the right axis the learning rate; ticks at 1, 2 or 5 times a power of ten. Longer logs
// than MAX_POINTS are averaged over equal runs of records, so the file stays small.
#include "plot.h"

#include "cli.h"
#include "dl_base.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_POINTS = 4000 };

typedef struct plot_pt {
    double step, loss, lr;
} plot_pt;

typedef struct plot_eval {
    double step, loss, acc; // loss / acc NaN when absent
} plot_eval;

typedef DL_VEC(plot_pt) pt_vec;
typedef DL_VEC(plot_eval) eval_vec;

// One record's fields (NaN: absent or null).
typedef struct plot_rec {
    bool is_eval, has_kind;
    double step, loss, lr, eval_loss, eval_acc;
} plot_rec;

static void rec_set(plot_rec *r, const char *key, double v) {
    if (!strcmp(key, "step")) {
        r->step = v;
    } else if (!strcmp(key, "loss")) {
        r->loss = v;
    } else if (!strcmp(key, "lr")) {
        r->lr = v;
    } else if (!strcmp(key, "eval_loss")) {
        r->eval_loss = v;
    } else if (!strcmp(key, "eval_accuracy")) {
        r->eval_acc = v;
    }
}

static bool rec_kind(plot_rec *r, const char *kind, char *err, size_t err_size) {
    r->has_kind = true;
    r->is_eval = !strcmp(kind, "eval");
    if (!r->is_eval && strcmp(kind, "step") != 0) {
        snprintf(err, err_size, "unknown record kind '%s' (step or eval)", kind);
        return false;
    }
    return true;
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r') {
        p++;
    }
    return p;
}

// string -> '"' chars '"' (escapes kept as their second character: names are plain ASCII).
static const char *json_string(const char *p, char *buf, size_t size) {
    size_t n = 0;
    if (*p++ != '"') {
        return NULL;
    }
    while (*p && *p != '"') {
        if (*p == '\\' && p[1]) {
            p++;
        }
        if (n + 1 < size) {
            buf[n++] = *p;
        }
        p++;
    }
    buf[n] = 0;
    return *p == '"' ? p + 1 : NULL;
}

// object -> '{' (string ':' value (',' string ':' value)*)? '}', value -> string | number |
// null | true | false (no nesting: the log's records are flat).
static bool parse_json_line(const char *p, plot_rec *r, char *err, size_t err_size) {
    char key[64], sval[64];
    p = skip_ws(p);
    if (*p++ != '{') {
        snprintf(err, err_size, "expected a JSON object ('{')");
        return false;
    }
    p = skip_ws(p);
    if (*p == '}') {
        p++;
    } else {
        for (;;) {
            p = skip_ws(p);
            if (!(p = json_string(p, key, sizeof key))) {
                snprintf(err, err_size, "expected a quoted key");
                return false;
            }
            p = skip_ws(p);
            if (*p++ != ':') {
                snprintf(err, err_size, "expected ':' after \"%s\"", key);
                return false;
            }
            p = skip_ws(p);
            if (*p == '"') {
                if (!(p = json_string(p, sval, sizeof sval))) {
                    snprintf(err, err_size, "unterminated string for \"%s\"", key);
                    return false;
                }
                if (!strcmp(key, "kind") && !rec_kind(r, sval, err, err_size)) {
                    return false;
                }
            } else if (!strncmp(p, "null", 4) || !strncmp(p, "true", 4)) {
                p += 4;
            } else if (!strncmp(p, "false", 5)) {
                p += 5;
            } else {
                char *end = NULL;
                double v = strtod(p, &end);
                if (end == p || !isfinite(v)) {
                    snprintf(err, err_size, "bad value for \"%s\"", key);
                    return false;
                }
                rec_set(r, key, v);
                p = end;
            }
            p = skip_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p++ != '}') {
                snprintf(err, err_size, "expected ',' or '}' after \"%s\"", key);
                return false;
            }
            break;
        }
    }
    p = skip_ws(p);
    if (*p && *p != '\n') {
        snprintf(err, err_size, "text after the object");
        return false;
    }
    return true;
}

// Splits a CSV line (no quoting: the log writes none) into at most `max` cells in place.
static int csv_cells(char *line, char **cells, int max) {
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *c = line; n < max;) {
        cells[n++] = c;
        char *comma = strchr(c, ',');
        if (!comma) {
            break;
        }
        *comma = 0;
        c = comma + 1;
    }
    return n;
}

static bool parse_csv_line(char *line, char **names, int n_names, plot_rec *r, char *err,
                           size_t err_size) {
    char *cells[64];
    int n = csv_cells(line, cells, 64);
    if (n != n_names) {
        snprintf(err, err_size, "%d cells, the header has %d", n, n_names);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], "kind")) {
            if (!rec_kind(r, cells[i], err, err_size)) {
                return false;
            }
        } else if (*cells[i]) {
            char *end = NULL;
            double v = strtod(cells[i], &end);
            if (*end || !isfinite(v)) {
                if (!strcmp(cells[i], "nan") || !strcmp(cells[i], "inf") ||
                    !strcmp(cells[i], "-inf")) {
                    continue; // a non-finite value: no point
                }
                snprintf(err, err_size, "bad value '%s' in column %s", cells[i], names[i]);
                return false;
            }
            rec_set(r, names[i], v);
        }
    }
    return true;
}

// Reads the log into the points. Returns an exit code (messages printed).
static int read_log(const char *path, pt_vec *pts, eval_vec *evals) {
    size_t n = strlen(path);
    bool csv = n > 4 && !strcmp(path + n - 4, ".csv");
    if (!csv && !(n > 6 && !strcmp(path + n - 6, ".jsonl"))) {
        return cli_usage_error("plot", "%s: the format comes from the suffix: .jsonl or .csv",
                               path);
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        return cli_cmd_error("plot", EXIT_INPUT, "cannot read %s: %s", path, strerror(errno));
    }
    char line[4096], header[4096], err[256];
    char *names[64];
    int n_names = 0, rc = EXIT_OK;
    long lineno = 0;
    double last_step = -INFINITY;
    while (rc == EXIT_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = cli_cmd_error("plot", EXIT_INPUT, "%s:%ld: line longer than %zu bytes", path,
                               lineno, sizeof line - 1);
            break;
        }
        if (csv && lineno == 1) {
            strcpy(header, line);
            n_names = csv_cells(header, names, 64);
            bool has_step = false;
            for (int i = 0; i < n_names; i++) {
                has_step |= !strcmp(names[i], "step");
            }
            if (!has_step) {
                rc = cli_cmd_error("plot", EXIT_INPUT,
                                   "%s:1: not the header of a dlcc train log (no 'step' column)",
                                   path);
            }
            continue;
        }
        if (!skip_ws(line)[0] || skip_ws(line)[0] == '\n') {
            continue; // a blank line
        }
        plot_rec r = {false, false, NAN, NAN, NAN, NAN, NAN};
        bool ok = csv ? parse_csv_line(line, names, n_names, &r, err, sizeof err)
                      : parse_json_line(line, &r, err, sizeof err);
        if (ok && (!r.has_kind || isnan(r.step))) {
            snprintf(err, sizeof err, "a record without %s", r.has_kind ? "a step" : "a kind");
            ok = false;
        }
        if (!ok) {
            rc = cli_cmd_error("plot", EXIT_INPUT, "%s:%ld: malformed record: %s", path, lineno,
                               err);
            break;
        }
        if (r.is_eval) {
            plot_eval e = {r.step, r.eval_loss, r.eval_acc};
            if (!DL_VEC_PUSH(evals, e)) {
                rc = EXIT_INTERNAL;
            }
            continue;
        }
        if (r.step <= last_step) { // a resumed run logged these steps again: its records win
            while (pts->len && pts->data[pts->len - 1].step >= r.step) {
                pts->len--;
            }
        }
        last_step = r.step;
        plot_pt p = {r.step, r.loss, r.lr};
        if (!DL_VEC_PUSH(pts, p)) {
            rc = EXIT_INTERNAL;
        }
    }
    if (rc == EXIT_OK && ferror(f)) {
        rc = cli_cmd_error("plot", EXIT_INPUT, "cannot read %s: %s", path, strerror(errno));
    }
    fclose(f);
    if (rc == EXIT_OK && pts->len == 0) {
        rc = cli_cmd_error("plot", EXIT_INPUT,
                           "%s: no step records (%s): nothing to plot (write one with dlcc train "
                           "--log %s)",
                           path, lineno == 0 ? "an empty file" : "only a header or evaluations",
                           path);
    }
    return rc;
}

// Averages runs of k points into one (a long log), in place.
static void thin(pt_vec *pts) {
    if (pts->len <= MAX_POINTS) {
        return;
    }
    size_t k = (pts->len + MAX_POINTS - 1) / MAX_POINTS, out = 0;
    for (size_t i = 0; i < pts->len; i += k) {
        plot_pt s = {0, 0, 0};
        size_t m = 0, ml = 0;
        for (size_t j = i; j < i + k && j < pts->len; j++, m++) {
            s.step += pts->data[j].step;
            s.lr += pts->data[j].lr;
            if (isfinite(pts->data[j].loss)) {
                s.loss += pts->data[j].loss;
                ml++;
            }
        }
        pts->data[out].step = s.step / (double)m;
        pts->data[out].lr = s.lr / (double)m;
        pts->data[out].loss = ml ? s.loss / (double)ml : NAN;
        out++;
    }
    pts->len = out;
}

// An axis: [lo, hi] widened to ticks at multiples of `step` (1, 2 or 5 times a power of ten).
typedef struct axis {
    double lo, hi, step;
} axis;

static axis nice_axis(double lo, double hi, int want) {
    axis a;
    if (!(hi > lo)) {
        double pad = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
    a.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    return a;
}

static void xml_text(dl_strbuf *b, const char *s) {
    for (; *s; s++) {
        const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : NULL;
        if (*s == '"') {
            e = "&quot;";
        }
        if (e) {
            dl_strbuf_puts(b, e);
        } else {
            dl_strbuf_append(b, s, 1);
        }
    }
}

// The canvas: plot area [X0, X1] x [Y0, Y1] (SVG y grows downwards).
enum { W = 880, H = 520, X0 = 80, X1 = 800, Y0 = 50, Y1 = 460 };

static double map(double v, const axis *a, double p0, double p1) {
    return p0 + (v - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

// Tick marks and labels of one axis: side 'x' (bottom), 'l' (left) or 'r' (right).
static void ticks(dl_strbuf *b, const axis *a, char side) {
    for (double t = a->lo; t <= a->hi + a->step * 1e-9; t += a->step) {
        double v = fabs(t) < a->step * 1e-9 ? 0 : t;
        char lab[32];
        snprintf(lab, sizeof lab, "%g", v);
        if (side == 'x') {
            double x = map(v, a, X0, X1);
            dl_strbuf_printf(b,
                             "<line class=\"grid\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>"
                             "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                             x, Y0, x, Y1, x, Y1 + 18, lab);
        } else {
            double y = map(v, a, Y1, Y0);
            if (side == 'l') {
                dl_strbuf_printf(
                    b,
                    "<line class=\"grid\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>"
                    "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n",
                    X0, y, X1, y, X0 - 6, y + 4, lab);
            } else {
                dl_strbuf_printf(
                    b,
                    "<line class=\"tick\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>"
                    "<text x=\"%d\" y=\"%.2f\" text-anchor=\"start\">%s</text>\n",
                    X1, y, X1 + 5, y, X1 + 8, y + 4, lab);
            }
        }
    }
}

// The SVG of the points (caller frees); NULL when out of memory.
static char *render(const char *title, const pt_vec *pts, const eval_vec *evals) {
    double s_lo = INFINITY, s_hi = -INFINITY, l_lo = INFINITY, l_hi = -INFINITY, r_lo = INFINITY,
           r_hi = -INFINITY;
    bool has_lr = false;
    for (size_t i = 0; i < pts->len; i++) {
        const plot_pt *p = &pts->data[i];
        s_lo = fmin(s_lo, p->step);
        s_hi = fmax(s_hi, p->step);
        if (isfinite(p->loss)) {
            l_lo = fmin(l_lo, p->loss);
            l_hi = fmax(l_hi, p->loss);
        }
        if (isfinite(p->lr)) {
            r_lo = fmin(r_lo, p->lr);
            r_hi = fmax(r_hi, p->lr);
            has_lr = true;
        }
    }
    for (size_t i = 0; i < evals->len; i++) {
        if (isfinite(evals->data[i].loss)) {
            l_lo = fmin(l_lo, evals->data[i].loss);
            l_hi = fmax(l_hi, evals->data[i].loss);
        }
    }
    if (!isfinite(l_lo)) { // every loss non-finite
        l_lo = 0;
        l_hi = 1;
    }
    axis ax = nice_axis(s_lo, s_hi, 8), al = nice_axis(fmin(l_lo, 0), l_hi, 6),
         ar = nice_axis(has_lr ? fmin(r_lo, 0) : 0, has_lr ? r_hi : 1, 6);
    dl_strbuf b = {0};
    dl_strbuf_printf(&b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n<title>",
                     W, H, W, H);
    xml_text(&b, title);
    dl_strbuf_puts(&b, "</title>\n<style>.grid{stroke:#e4e4e4}.tick,.axis{stroke:#333}"
                       ".loss{fill:none;stroke:#1f77b4;stroke-width:1.5}"
                       ".lr{fill:none;stroke:#ff7f0e;stroke-width:1.5;stroke-dasharray:6 3}"
                       ".eval{fill:#d62728}</style>\n");
    dl_strbuf_printf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    dl_strbuf_printf(&b, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", W / 2);
    xml_text(&b, title);
    dl_strbuf_puts(&b, "</text>\n");
    ticks(&b, &ax, 'x');
    ticks(&b, &al, 'l');
    if (has_lr) {
        ticks(&b, &ar, 'r');
    }
    dl_strbuf_printf(&b,
                     "<rect class=\"axis\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                     "fill=\"none\"/>\n",
                     X0, Y0, X1 - X0, Y1 - Y0);
    dl_strbuf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n",
                     (X0 + X1) / 2, Y1 + 40);
    dl_strbuf_printf(&b,
                     "<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\" "
                     "fill=\"#1f77b4\">loss</text>\n",
                     (Y0 + Y1) / 2);
    if (has_lr) {
        dl_strbuf_printf(&b,
                         "<text transform=\"translate(%d %d) rotate(90)\" text-anchor=\"middle\" "
                         "fill=\"#ff7f0e\">learning rate</text>\n",
                         W - 18, (Y0 + Y1) / 2);
    }
    dl_strbuf_puts(&b, "<polyline class=\"loss\" points=\"");
    for (size_t i = 0, n = 0; i < pts->len; i++) {
        if (isfinite(pts->data[i].loss)) {
            dl_strbuf_printf(&b, "%s%.2f,%.2f", n++ ? " " : "", map(pts->data[i].step, &ax, X0, X1),
                             map(pts->data[i].loss, &al, Y1, Y0));
        }
    }
    dl_strbuf_puts(&b, "\"/>\n");
    if (has_lr) {
        dl_strbuf_puts(&b, "<polyline class=\"lr\" points=\"");
        for (size_t i = 0, n = 0; i < pts->len; i++) {
            if (isfinite(pts->data[i].lr)) {
                dl_strbuf_printf(&b, "%s%.2f,%.2f", n++ ? " " : "",
                                 map(pts->data[i].step, &ax, X0, X1),
                                 map(pts->data[i].lr, &ar, Y1, Y0));
            }
        }
        dl_strbuf_puts(&b, "\"/>\n");
    }
    for (size_t i = 0; i < evals->len; i++) {
        const plot_eval *e = &evals->data[i];
        if (!isfinite(e->loss)) {
            continue;
        }
        double x = map(e->step, &ax, X0, X1), y = map(e->loss, &al, Y1, Y0);
        dl_strbuf_printf(&b, "<circle class=\"eval\" cx=\"%.2f\" cy=\"%.2f\" r=\"4\"/>\n", x, y);
        if (isfinite(e->acc)) {
            dl_strbuf_printf(&b,
                             "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#d62728\">"
                             "accuracy %.4g</text>\n",
                             x - 6, y - 8, e->acc);
        }
    }
    // The legend, top right inside the plot area.
    int lx = X1 - 150, ly = Y0 + 16;
    dl_strbuf_printf(&b,
                     "<line class=\"loss\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
                     "<text x=\"%d\" y=\"%d\">training loss</text>\n",
                     lx, ly, lx + 24, ly, lx + 30, ly + 4);
    if (has_lr) {
        dl_strbuf_printf(&b,
                         "<line class=\"lr\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
                         "<text x=\"%d\" y=\"%d\">learning rate</text>\n",
                         lx, ly + 18, lx + 24, ly + 18, lx + 30, ly + 22);
    }
    if (evals->len) {
        dl_strbuf_printf(&b,
                         "<circle class=\"eval\" cx=\"%d\" cy=\"%d\" r=\"4\"/>"
                         "<text x=\"%d\" y=\"%d\">test loss</text>\n",
                         lx + 12, ly + 36, lx + 30, ly + 40);
    }
    dl_strbuf_puts(&b, "</svg>\n");
    return dl_strbuf_take(&b);
}

int dlcc_plot_main(int argc, char **argv) {
    cli_args a = {"plot", argc, argv, 0, false};
    const char *in = NULL, *out = NULL, *title = NULL;
    while (a.i < argc) {
        int r;
        if (!a.no_more_flags && strcmp(argv[a.i], "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (in) {
                return cli_usage_error("plot", "one log at a time ('%s' and '%s')", in, argv[a.i]);
            }
            in = argv[a.i++];
        } else if ((r = cli_take_flag(&a, "-o", "--output", true, &out)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--title", true, &title)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
        } else {
            return cli_usage_error("plot", "unknown flag '%s'", argv[a.i]);
        }
    }
    if (!in) {
        return cli_usage_error("plot", "no log file (written by dlcc train --log FILE)");
    }
    if (out && !*out) {
        return cli_usage_error("plot", "-o expects a file name");
    }
    pt_vec pts = {0};
    eval_vec evals = {0};
    int rc = read_log(in, &pts, &evals);
    char *svg = NULL;
    if (rc == EXIT_OK) {
        thin(&pts);
        const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
        char t[512];
        snprintf(t, sizeof t, "%s", title ? title : base);
        svg = render(t, &pts, &evals);
        if (!svg) {
            rc = cli_cmd_error("plot", EXIT_INTERNAL, "out of memory");
        }
    }
    if (rc == EXIT_OK && out) {
        if (dl_write_file_atomic(out, svg, strlen(svg)) != DL_OK) {
            rc = cli_cmd_error("plot", EXIT_INPUT, "cannot write %s: %s", out, strerror(errno));
        }
    } else if (rc == EXIT_OK) {
        fputs(svg, stdout);
    }
    free(svg);
    free(pts.data);
    free(evals.data);
    return rc;
}
