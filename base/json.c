// base/json.c — the JSON string escaper and streaming writer of base/dl_json.h.
//
// The writer keeps, per open object or array, whether the next element is its first (commas go
// before every later one) and whether a key was just written (its value takes no comma). The
// escaper validates UTF-8 itself (overlong forms, surrogates and values above U+10FFFF are
// invalid) so that a hostile name never makes the document unparseable.
#include "dl_json.h"

#include <inttypes.h>
#include <string.h>

// Length of the valid UTF-8 sequence at s (1..4, at most `avail` bytes), or 0 if invalid.
static size_t utf8_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80) {
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        n = 2;
        min = 0x80;
        c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        min = 0x800;
        c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n > avail) {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (s[k] & 0x3Fu);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return 0;
    }
    return n;
}

void dl_json_put_string_n(dl_strbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    dl_strbuf_append(b, "\"", 1);
    while (p < end) {
        unsigned char c = *p;
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            break;
        }
        if (esc) {
            dl_strbuf_puts(b, esc);
            p++;
            continue;
        }
        if (c < 0x20 || c == 0x7F) {
            dl_strbuf_printf(b, "\\u%04x", c);
            p++;
            continue;
        }
        size_t k = utf8_len(p, (size_t)(end - p));
        if (k == 0) {
            dl_strbuf_puts(b, "\\ufffd");
            p++;
            continue;
        }
        dl_strbuf_append(b, (const char *)p, k);
        p += k;
    }
    dl_strbuf_append(b, "\"", 1);
}

void dl_json_put_string(dl_strbuf *b, const char *s) {
    s = s ? s : "";
    dl_json_put_string_n(b, s, strlen(s));
}

static void sep(dl_json *j) {
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0) {
        if (!j->first[j->depth]) {
            dl_strbuf_append(&j->b, ",", 1);
        }
        j->first[j->depth] = false;
    }
}

static void open_(dl_json *j, const char *bracket) {
    sep(j);
    dl_strbuf_puts(&j->b, bracket);
    DL_ASSERT(j->depth + 1 < (int)DL_ARRAY_LEN(j->first));
    j->first[++j->depth] = true;
}

static void close_(dl_json *j, const char *bracket) {
    DL_ASSERT(j->depth > 0);
    j->depth--;
    dl_strbuf_puts(&j->b, bracket);
}

void dl_json_obj(dl_json *j) {
    open_(j, "{");
}

void dl_json_obj_end(dl_json *j) {
    close_(j, "}");
}

void dl_json_arr(dl_json *j) {
    open_(j, "[");
}

void dl_json_arr_end(dl_json *j) {
    close_(j, "]");
}

void dl_json_key(dl_json *j, const char *k) {
    sep(j);
    dl_json_put_string(&j->b, k);
    dl_strbuf_append(&j->b, ":", 1);
    j->after_key = true;
}

void dl_json_str(dl_json *j, const char *s) {
    sep(j);
    if (s) {
        dl_json_put_string(&j->b, s);
    } else {
        dl_strbuf_puts(&j->b, "null");
    }
}

void dl_json_i64(dl_json *j, int64_t v) {
    sep(j);
    dl_strbuf_printf(&j->b, "%" PRId64, v);
}

void dl_json_u64(dl_json *j, uint64_t v) {
    sep(j);
    dl_strbuf_printf(&j->b, "%" PRIu64, v);
}

void dl_json_f64(dl_json *j, double v) {
    sep(j);
    if (v != v || v > 1e308 || v < -1e308) {
        dl_strbuf_puts(&j->b, "null");
    } else {
        dl_strbuf_printf(&j->b, "%.6g", v);
    }
}

void dl_json_bool(dl_json *j, bool v) {
    sep(j);
    dl_strbuf_puts(&j->b, v ? "true" : "false");
}

void dl_json_null(dl_json *j) {
    sep(j);
    dl_strbuf_puts(&j->b, "null");
}

void dl_json_kstr(dl_json *j, const char *k, const char *v) {
    dl_json_key(j, k);
    dl_json_str(j, v);
}

void dl_json_ki64(dl_json *j, const char *k, int64_t v) {
    dl_json_key(j, k);
    dl_json_i64(j, v);
}

void dl_json_ku64(dl_json *j, const char *k, uint64_t v) {
    dl_json_key(j, k);
    dl_json_u64(j, v);
}

void dl_json_kf64(dl_json *j, const char *k, double v) {
    dl_json_key(j, k);
    dl_json_f64(j, v);
}

void dl_json_kbool(dl_json *j, const char *k, bool v) {
    dl_json_key(j, k);
    dl_json_bool(j, v);
}
