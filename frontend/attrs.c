// frontend/attrs.c — attribute validation against the op table's dl_ir_attr_spec rows (also used
// for the train block's optimizer and loss-scale settings), plus the frontend's diagnostics
// helpers: the error counter with its 20-error cap and "did you mean" suggestions.
//
// Validation converts in place where the format allows a looser spelling (an int literal for a
// float attribute, ints for a float list, `[]` for any list) so later stages see exactly the
// spec's kind. Messages follow STYLE.md: lower case, name the owner (op) and the values.
#include "fe_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Diagnostics

void dl_fe__error(fe_ctx *cx, dl_src_loc loc, const char *fmt, ...) {
    if (cx->stop) {
        return;
    }
    if (cx->n_errors >= FE_MAX_ERRORS) {
        dl_diag(cx->d, DL_SEV_NOTE, loc, "too many errors, stopping");
        cx->stop = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(cx->d, DL_SEV_ERROR, loc, fmt, ap);
    va_end(ap);
    cx->n_errors++;
}

void dl_fe__note(fe_ctx *cx, dl_src_loc loc, const char *fmt, ...) {
    if (cx->stop) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(cx->d, DL_SEV_NOTE, loc, fmt, ap);
    va_end(ap);
}

size_t dl_fe__edit_distance(const char *a, const char *b, size_t cap) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) {
        return cap + 1;
    }
    if ((la > lb ? la - lb : lb - la) > cap) {
        return cap + 1;
    }
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0], best = i;
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v) {
                v = up + 1;
            }
            if (row[j - 1] + 1 < v) {
                v = row[j - 1] + 1;
            }
            row[j] = v;
            diag = up;
            if (v < best) {
                best = v;
            }
        }
        if (best > cap) {
            return cap + 1;
        }
    }
    return row[lb];
}

static bool eq_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) {
            return false;
        }
    }
    return *a == *b;
}

const char *dl_fe__suggest(const char *word, const char *const *names, size_t n_names) {
    for (size_t i = 0; i < n_names; i++) {
        if (eq_nocase(word, names[i])) {
            return names[i];
        }
    }
    const char *best = NULL;
    size_t best_d = 3;
    size_t wl = strlen(word);
    for (size_t i = 0; i < n_names; i++) {
        size_t dist = dl_fe__edit_distance(word, names[i], 2);
        // A distance of 2 on a 3-letter word is a different word, not a typo.
        if (dist < best_d && dist * 2 < wl) {
            best_d = dist;
            best = names[i];
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// Attribute validation

const char *dl_fe__kind_phrase(dl_ir_attr_kind k) {
    switch (k) {
    case DL_IR_ATTR_INT:
        return "an int";
    case DL_IR_ATTR_FLOAT:
        return "a float";
    case DL_IR_ATTR_STRING:
        return "a string";
    case DL_IR_ATTR_INTS:
        return "a list of ints";
    case DL_IR_ATTR_FLOATS:
        return "a list of floats";
    case DL_IR_ATTR_STRINGS:
        return "a list of strings";
    }
    return "a value";
}

static bool is_list(dl_ir_attr_kind k) {
    return k == DL_IR_ATTR_INTS || k == DL_IR_ATTR_FLOATS || k == DL_IR_ATTR_STRINGS;
}

// Brings `at` to the spec's kind where the format allows it; reports and returns false if not.
static bool coerce_kind(fe_ctx *cx, const char *owner, const dl_ir_attr_spec *sp, fe_attr *at) {
    dl_ir_attr *a = &at->a;
    if (at->empty_list) {
        if (!is_list(sp->kind)) {
            dl_fe__error(cx, at->vloc, "%s: attribute '%s' expects %s, got an empty list", owner,
                         a->name, dl_fe__kind_phrase(sp->kind));
            return false;
        }
        a->kind = sp->kind;
        return true;
    }
    if (a->kind == sp->kind) {
        return true;
    }
    if (a->kind == DL_IR_ATTR_INT && sp->kind == DL_IR_ATTR_FLOAT) {
        a->kind = DL_IR_ATTR_FLOAT;
        a->f = (double)a->i;
        a->i = 0;
        a->i_sym = -1;
        return true;
    }
    if (a->kind == DL_IR_ATTR_INTS && sp->kind == DL_IR_ATTR_FLOATS) {
        // The payload was built for both readings: floats[] already holds the values.
        if (a->floats) {
            a->kind = DL_IR_ATTR_FLOATS;
            a->ints = NULL;
            a->int_syms = NULL;
            return true;
        }
    }
    dl_fe__error(cx, at->vloc, "%s: attribute '%s' expects %s, got %s", owner, a->name,
                 dl_fe__kind_phrase(sp->kind), dl_fe__kind_phrase(a->kind));
    return false;
}

// choices "a|b|c" -> "\"a\", \"b\", \"c\""
static void format_choices(const char *choices, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = 0;
    const char *p = choices;
    while (*p && o + 4 < size) {
        const char *e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int w = snprintf(buf + o, size - o, "%s\"%.*s\"", o ? ", " : "", (int)n, p);
        if (w < 0 || (size_t)w >= size - o) {
            break;
        }
        o += (size_t)w;
        p += n;
        if (*p == '|') {
            p++;
        }
    }
}

static bool in_choices(const char *choices, const char *s) {
    size_t sl = strlen(s);
    const char *p = choices;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == sl && memcmp(p, s, n) == 0) {
            return true;
        }
        p += n;
        if (*p == '|') {
            p++;
        }
    }
    return false;
}

static bool check_range(fe_ctx *cx, const char *owner, const dl_ir_attr_spec *sp, fe_attr *at) {
    const dl_ir_attr *a = &at->a;
    bool ok = true;
    if (sp->has_min && a->kind == DL_IR_ATTR_INT && a->i < sp->min_i) {
        dl_fe__error(cx, at->vloc, "%s: attribute '%s' must be >= %lld, got %lld", owner, a->name,
                     (long long)sp->min_i, (long long)a->i);
        ok = false;
    }
    if (sp->has_min && a->kind == DL_IR_ATTR_INTS) {
        for (size_t i = 0; i < a->n; i++) {
            if (a->ints[i] < sp->min_i) {
                dl_fe__error(cx, at->elocs ? at->elocs[i] : at->vloc,
                             "%s: attribute '%s' values must be >= %lld, got %lld", owner, a->name,
                             (long long)sp->min_i, (long long)a->ints[i]);
                ok = false;
                break;
            }
        }
    }
    if (sp->choices && a->kind == DL_IR_ATTR_STRING && !in_choices(sp->choices, a->s)) {
        char ch[256];
        format_choices(sp->choices, ch, sizeof(ch));
        dl_fe__error(cx, at->vloc, "%s: attribute '%s' must be one of %s, got \"%s\"", owner,
                     a->name, ch, a->s);
        ok = false;
    }
    if (sp->choices && a->kind == DL_IR_ATTR_STRINGS) {
        for (size_t i = 0; i < a->n; i++) {
            if (!in_choices(sp->choices, a->strs[i])) {
                char ch[256];
                format_choices(sp->choices, ch, sizeof(ch));
                dl_fe__error(cx, at->elocs ? at->elocs[i] : at->vloc,
                             "%s: attribute '%s' values must be one of %s, got \"%s\"", owner,
                             a->name, ch, a->strs[i]);
                ok = false;
                break;
            }
        }
    }
    return ok;
}

bool dl_fe__check_attrs(fe_ctx *cx, const char *owner, const dl_ir_attr_spec *specs, size_t n_specs,
                        fe_attr *attrs, size_t n_attrs, dl_src_loc owner_loc) {
    bool ok = true;
    for (size_t i = 0; i < n_attrs; i++) {
        fe_attr *at = &attrs[i];
        const dl_ir_attr_spec *sp = NULL;
        for (size_t k = 0; k < n_specs; k++) {
            if (strcmp(specs[k].name, at->a.name) == 0) {
                sp = &specs[k];
                break;
            }
        }
        if (!sp) {
            if (n_specs == 0) {
                dl_fe__error(cx, at->a.loc, "%s: unknown attribute '%s' (%s has no attributes)",
                             owner, at->a.name, owner);
            } else {
                char valid[512];
                size_t o = 0;
                valid[0] = 0;
                for (size_t k = 0; k < n_specs && o + 2 < sizeof(valid); k++) {
                    int w = snprintf(valid + o, sizeof(valid) - o, "%s%s", k ? ", " : "",
                                     specs[k].name);
                    if (w < 0 || (size_t)w >= sizeof(valid) - o) {
                        break;
                    }
                    o += (size_t)w;
                }
                dl_fe__error(cx, at->a.loc, "%s: unknown attribute '%s' (valid: %s)", owner,
                             at->a.name, valid);
            }
            ok = false;
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(attrs[j].a.name, at->a.name) == 0) {
                dl_fe__error(cx, at->a.loc, "%s: duplicate attribute '%s'", owner, at->a.name);
                dl_fe__note(cx, attrs[j].a.loc, "previous definition of '%s' is here", at->a.name);
                dup = true;
                break;
            }
        }
        if (dup) {
            ok = false;
            continue;
        }
        if (!coerce_kind(cx, owner, sp, at) || !check_range(cx, owner, sp, at)) {
            ok = false;
        }
    }
    for (size_t k = 0; k < n_specs; k++) {
        if (!specs[k].required) {
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < n_attrs && !found; i++) {
            found = strcmp(attrs[i].a.name, specs[k].name) == 0;
        }
        if (!found) {
            dl_fe__error(cx, owner_loc, "%s: missing required attribute '%s'", owner,
                         specs[k].name);
            ok = false;
        }
    }
    return ok;
}
