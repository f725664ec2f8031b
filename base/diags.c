// base/diags.c — the diagnostics sink and its renderer.
//
// A sink owns copies of the source files it was given (name + text) and a list of entries.
// Rendering follows chibicc/clang: "file:line:col: severity: message", then the source line
// with a gutter and a caret under the token (`^` followed by `~` for the rest of its length).
#include "dl_base.h"

#include <stdlib.h>
#include <string.h>

typedef struct diag_file {
    char *name;
    char *text;
    size_t len;
} diag_file;

struct dl_diags {
    DL_VEC(diag_file) files;
    DL_VEC(dl_diag_entry) entries;
    size_t n_errors;
    bool oom;
};

dl_status dl_diags_create(dl_diags **out) {
    *out = dl_mem_calloc(1, sizeof(dl_diags));
    return *out ? DL_OK : DL_ERR_NOMEM;
}

void dl_diags_clear(dl_diags *d) {
    for (size_t i = 0; i < d->entries.len; i++) {
        free(d->entries.data[i].msg);
    }
    d->entries.len = 0;
    d->n_errors = 0;
}

void dl_diags_destroy(dl_diags *d) {
    if (!d) {
        return;
    }
    dl_diags_clear(d);
    free(d->entries.data);
    for (size_t i = 0; i < d->files.len; i++) {
        free(d->files.data[i].name);
        free(d->files.data[i].text);
    }
    free(d->files.data);
    free(d);
}

dl_status dl_diags_add_file(dl_diags *d, const char *name, const char *text, size_t len,
                            uint32_t *out_id) {
    diag_file f = {dl_mem_strdup(name), dl_mem_alloc(len + 1), len};
    if (!f.name || !f.text || !DL_VEC_PUSH(&d->files, f)) {
        free(f.name);
        free(f.text);
        return DL_ERR_NOMEM;
    }
    memcpy(f.text, text, len);
    f.text[len] = 0;
    *out_id = (uint32_t)d->files.len;
    return DL_OK;
}

const char *dl_diags_file_name(const dl_diags *d, uint32_t file) {
    if (file == 0 || file > d->files.len) {
        return "";
    }
    return d->files.data[file - 1].name;
}

void dl_vdiag(dl_diags *d, dl_severity sev, dl_src_loc loc, const char *fmt, va_list ap) {
    dl_strbuf b = {0};
    dl_strbuf_vprintf(&b, fmt, ap);
    char *msg = dl_strbuf_take(&b);
    dl_diag_entry e = {sev, loc, msg};
    if (!msg || !DL_VEC_PUSH(&d->entries, e)) {
        free(msg);
        d->oom = true;
        if (sev == DL_SEV_ERROR) {
            d->n_errors++; // the error still counts even if its text was lost
        }
        return;
    }
    if (sev == DL_SEV_ERROR) {
        d->n_errors++;
    }
}

void dl_diag(dl_diags *d, dl_severity sev, dl_src_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(d, sev, loc, fmt, ap);
    va_end(ap);
}

size_t dl_diags_count(const dl_diags *d) {
    return d->entries.len;
}

size_t dl_diags_error_count(const dl_diags *d) {
    return d->n_errors;
}

const dl_diag_entry *dl_diags_get(const dl_diags *d, size_t i) {
    return i < d->entries.len ? &d->entries.data[i] : NULL;
}

bool dl_diags_oom(const dl_diags *d) {
    return d->oom;
}

static const char *sev_name(dl_severity s) {
    switch (s) {
    case DL_SEV_ERROR:
        return "error";
    case DL_SEV_WARNING:
        return "warning";
    case DL_SEV_NOTE:
        return "note";
    }
    return "error";
}

// Finds line `line` (1-based) of `f`; returns its start and length (without newline).
static bool find_line(const diag_file *f, uint32_t line, const char **start, size_t *n) {
    const char *p = f->text, *end = f->text + f->len;
    for (uint32_t l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            return false;
        }
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len > 0 && p[len - 1] == '\r') {
        len--;
    }
    *start = p;
    *n = len;
    return true;
}

dl_status dl_diags_render(const dl_diags *d, char **out) {
    dl_strbuf b = {0};
    for (size_t i = 0; i < d->entries.len; i++) {
        const dl_diag_entry *e = &d->entries.data[i];
        const diag_file *f = NULL;
        if (e->loc.file >= 1 && e->loc.file <= d->files.len) {
            f = &d->files.data[e->loc.file - 1];
        }
        if (f && e->loc.line > 0) {
            dl_strbuf_printf(&b, "%s:%u:%u: %s: %s\n", f->name, e->loc.line, e->loc.col,
                             sev_name(e->sev), e->msg);
            const char *ls;
            size_t ln;
            if (find_line(f, e->loc.line, &ls, &ln)) {
                char gutter[16];
                int gw = snprintf(gutter, sizeof gutter, "%u", e->loc.line);
                dl_strbuf_printf(&b, "%*s%s | ", 4, "", gutter);
                // Tabs become single spaces so the caret column lines up.
                for (size_t k = 0; k < ln; k++) {
                    char c = ls[k] == '\t' ? ' ' : ls[k];
                    dl_strbuf_append(&b, &c, 1);
                }
                dl_strbuf_printf(&b, "\n%*s | ", 4 + gw, "");
                uint32_t col = e->loc.col ? e->loc.col : 1;
                for (uint32_t k = 1; k < col; k++) {
                    dl_strbuf_append(&b, " ", 1);
                }
                dl_strbuf_append(&b, "^", 1);
                for (uint32_t k = 1; k < e->loc.len; k++) {
                    dl_strbuf_append(&b, "~", 1);
                }
                dl_strbuf_append(&b, "\n", 1);
            }
        } else if (f) {
            dl_strbuf_printf(&b, "%s: %s: %s\n", f->name, sev_name(e->sev), e->msg);
        } else {
            dl_strbuf_printf(&b, "%s: %s\n", sev_name(e->sev), e->msg);
        }
    }
    char *s = dl_strbuf_take(&b);
    if (!s) {
        return DL_ERR_NOMEM;
    }
    *out = s;
    return DL_OK;
}
