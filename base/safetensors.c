// base/safetensors.c — safetensors writer (many tensors + string metadata, atomic, deterministic
// bytes) and validating reader (lists every tensor and the metadata, reads any tensor).
//
// Writer: a dl_st_writer holds copied names/metadata and BORROWED tensor views. The header is
// generated into a dl_strbuf, then the file is streamed (header, then each tensor's bytes in add
// order) into a mkstemp file beside the target, fsync'd and renamed, so a crash or error never
// leaves a partial checkpoint under the final name.
//
// Reader: the header is untrusted. It is parsed by a strict, fixed-schema JSON reader (the
// format allows only: top object -> "__metadata__": {string: string} | name: {dtype, shape,
// data_offsets}), so there is no generic recursion to bound. Invariants established by
// dl_st_open and relied on by dl_st_read: every entry has a supported dtype, rank <= DL_MAX_RANK,
// end - begin == numel * dtype size, and the entries tile [0, data_size) exactly. Names and
// metadata keys are unique (checked by sorting an index, which dl_st_find / dl_st_metadata then
// binary-search).
#include "dl_json.h"
#include "dl_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

_Static_assert(sizeof(off_t) >= 8, "safetensors offsets need a 64-bit off_t");

#define ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)

static void set_err(char *err, size_t err_size, const char *fmt, ...) DL_PRINTF(3, 4);
static void set_err(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || err_size == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

// A printable, bounded copy of an untrusted name for error messages (keeps them one line).
static const char *printable(const char *s, char buf[72]) {
    size_t n = 0;
    for (; *s && n < 64; s++) {
        unsigned char ch = (unsigned char)*s;
        buf[n++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (*s) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

static const struct {
    const char *name;
    dl_dtype dt;
} st_dtypes[] = {{"F32", DL_DT_FLOAT}, {"F16", DL_DT_FLOAT16}, {"BF16", DL_DT_BFLOAT16},
                 {"I32", DL_DT_INT32}, {"I64", DL_DT_INT64},   {"BOOL", DL_DT_BOOL}};

// Valid safetensors dtypes that dlcc has no dl_dtype for (reported as unsupported, not corrupt).
static const char *const st_other_dtypes[] = {"F64", "I8",  "I16",     "U8",      "U16",
                                              "U32", "U64", "F8_E4M3", "F8_E5M2", "C64"};

const char *dl_st_dtype_name(dl_dtype t) {
    for (size_t i = 0; i < DL_ARRAY_LEN(st_dtypes); i++) {
        if (st_dtypes[i].dt == t) {
            return st_dtypes[i].name;
        }
    }
    return "?";
}

// Multiplies dims into a byte count, failing on negative dims or overflow of int64/size_t.
static bool shape_nbytes(const int64_t *dims, int32_t rank, size_t elem, uint64_t *out) {
    uint64_t n = elem;
    bool zero = false;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            return false;
        }
        if (dims[i] == 0) {
            zero = true;
        }
    }
    if (zero) {
        *out = 0;
        return true;
    }
    for (int32_t i = 0; i < rank; i++) {
        if (n > (uint64_t)INT64_MAX / (uint64_t)dims[i]) {
            return false;
        }
        n *= (uint64_t)dims[i];
    }
    if (n > (uint64_t)SIZE_MAX) {
        return false;
    }
    *out = n;
    return true;
}

// Length of the valid UTF-8 sequence starting at p (< end), or 0 if it is invalid (overlong,
// surrogate, above U+10FFFF, truncated). JSON text must be UTF-8 (RFC 8259 section 8.1).
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) {
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2, cp = c & 0x1fu, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, cp = c & 0x0fu, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, cp = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) {
        return 0;
    }
    return n;
}

static bool utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    while (p < end) {
        size_t n = utf8_len(p, end);
        if (n == 0) {
            return false;
        }
        p += n;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Writer

typedef struct st_wtensor {
    char *name;  // OWNED
    dl_tensor t; // data BORROWED
    uint64_t nbytes;
} st_wtensor;

typedef struct st_kv {
    char *key, *value; // OWNED (writer) / arena (reader)
} st_kv;

struct dl_st_writer {
    DL_VEC(st_wtensor) tensors;
    DL_VEC(st_kv) meta;
};

dl_status dl_st_writer_create(dl_st_writer **out) {
    *out = dl_mem_calloc(1, sizeof(dl_st_writer));
    return *out ? DL_OK : DL_ERR_NOMEM;
}

void dl_st_writer_destroy(dl_st_writer *w) {
    if (!w) {
        return;
    }
    for (size_t i = 0; i < w->tensors.len; i++) {
        free(w->tensors.data[i].name);
    }
    for (size_t i = 0; i < w->meta.len; i++) {
        free(w->meta.data[i].key);
        free(w->meta.data[i].value);
    }
    free(w->tensors.data);
    free(w->meta.data);
    free(w);
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = dl_mem_alloc(n);
    if (p) {
        memcpy(p, s, n);
    }
    return p;
}

dl_status dl_st_writer_add(dl_st_writer *w, const char *name, const dl_tensor *t) {
    if (!name || !t || strcmp(name, "__metadata__") == 0 || !utf8_valid(name) ||
        (unsigned)t->dtype >= DL_DT_COUNT || t->rank < 0 || t->rank > DL_MAX_RANK) {
        return DL_ERR_INVALID_ARG;
    }
    uint64_t nbytes;
    if (!shape_nbytes(t->dims, t->rank, dl_dtype_size(t->dtype), &nbytes) ||
        (nbytes > 0 && !t->data)) {
        return DL_ERR_INVALID_ARG;
    }
    // Linear scan: writers are trusted callers with checkpoint-sized tensor counts (hundreds).
    for (size_t i = 0; i < w->tensors.len; i++) {
        if (strcmp(w->tensors.data[i].name, name) == 0) {
            return DL_ERR_INVALID_ARG;
        }
    }
    st_wtensor e = {str_dup(name), *t, nbytes};
    if (!e.name || !DL_VEC_PUSH(&w->tensors, e)) {
        free(e.name);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

dl_status dl_st_writer_set_metadata(dl_st_writer *w, const char *key, const char *value) {
    if (!key || !value || !utf8_valid(key) || !utf8_valid(value)) {
        return DL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < w->meta.len; i++) {
        if (strcmp(w->meta.data[i].key, key) == 0) {
            return DL_ERR_INVALID_ARG;
        }
    }
    st_kv kv = {str_dup(key), str_dup(value)};
    if (!kv.key || !kv.value || !DL_VEC_PUSH(&w->meta, kv)) {
        free(kv.key);
        free(kv.value);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

// Builds "8-byte length + padded JSON" into *h (the file minus the data section).
static dl_status build_header(const dl_st_writer *w, dl_strbuf *h) {
    dl_strbuf_append(h, "\0\0\0\0\0\0\0\0", 8);
    dl_strbuf_append(h, "{", 1);
    bool first = true;
    if (w->meta.len) {
        dl_strbuf_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; i < w->meta.len; i++) {
            if (i) {
                dl_strbuf_append(h, ",", 1);
            }
            dl_json_put_string(h, w->meta.data[i].key);
            dl_strbuf_append(h, ":", 1);
            dl_json_put_string(h, w->meta.data[i].value);
        }
        dl_strbuf_append(h, "}", 1);
        first = false;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->tensors.len; i++) {
        const st_wtensor *e = &w->tensors.data[i];
        if (!first) {
            dl_strbuf_append(h, ",", 1);
        }
        first = false;
        dl_json_put_string(h, e->name);
        dl_strbuf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", dl_st_dtype_name(e->t.dtype));
        for (int32_t d = 0; d < e->t.rank; d++) {
            dl_strbuf_printf(h, "%s%lld", d ? "," : "", (long long)e->t.dims[d]);
        }
        dl_strbuf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                         (unsigned long long)(off + e->nbytes));
        off += e->nbytes;
    }
    dl_strbuf_append(h, "}", 1);
    // Spaces (JSON whitespace) so the data section starts 8-byte aligned, as the format allows.
    while (!h->oom && h->len % 8 != 0) {
        dl_strbuf_append(h, " ", 1);
    }
    if (h->oom) {
        return DL_ERR_NOMEM;
    }
    uint64_t n = h->len - 8;
    for (int i = 0; i < 8; i++) {
        h->data[i] = (char)(unsigned char)(n >> (8 * i));
    }
    return DL_OK;
}

dl_status dl_st_writer_serialize(const dl_st_writer *w, unsigned char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    dl_strbuf h = {0};
    dl_status st = build_header(w, &h);
    if (st != DL_OK) {
        dl_strbuf_fini(&h);
        return st;
    }
    size_t total = h.len;
    for (size_t i = 0; i < w->tensors.len; i++) {
        total += (size_t)w->tensors.data[i].nbytes;
    }
    unsigned char *buf = dl_mem_alloc(total ? total : 1);
    if (!buf) {
        dl_strbuf_fini(&h);
        return DL_ERR_NOMEM;
    }
    memcpy(buf, h.data, h.len);
    size_t pos = h.len;
    for (size_t i = 0; i < w->tensors.len; i++) {
        const st_wtensor *e = &w->tensors.data[i];
        if (e->nbytes) {
            memcpy(buf + pos, e->t.data, (size_t)e->nbytes);
            pos += (size_t)e->nbytes;
        }
    }
    dl_strbuf_fini(&h);
    *out = buf;
    *out_len = total;
    return DL_OK;
}

dl_status dl_st_write_file(const dl_st_writer *w, const char *path) {
    dl_strbuf h = {0};
    dl_status st = build_header(w, &h);
    if (st != DL_OK) {
        dl_strbuf_fini(&h);
        return st;
    }
    // Written as dl_write_file_atomic writes, streamed so that a multi-GiB checkpoint is not
    // copied into one buffer first.
    dl_out o;
    st = dl_out_open(path, &o);
    if (st != DL_OK) {
        int saved = errno;
        dl_strbuf_fini(&h);
        errno = saved;
        return st;
    }
    bool ok = dl_write_fd_all(o.fd, h.data, h.len);
    for (size_t i = 0; ok && i < w->tensors.len; i++) {
        const st_wtensor *e = &w->tensors.data[i];
        if (e->nbytes) {
            ok = dl_write_fd_all(o.fd, e->t.data, (size_t)e->nbytes);
        }
    }
    st = dl_out_close(&o, ok);
    int saved = errno;
    dl_strbuf_fini(&h);
    errno = saved;
    return st;
}

// ---------------------------------------------------------------------------------------------
// Reader: strict JSON for the safetensors header schema

typedef struct st_rentry {
    char *name; // arena
    dl_dtype dtype;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    uint64_t begin, end;
} st_rentry;

struct dl_st_file {
    FILE *f;
    uint64_t data_start, data_size;
    dl_arena arena; // names, metadata strings
    DL_VEC(st_rentry) ents;
    DL_VEC(st_kv) meta;
    size_t *ent_by_name;  // indices into ents sorted by name
    size_t *meta_by_name; // indices into meta sorted by key
};

typedef struct jcur {
    const unsigned char *start, *p, *end;
    char *err;
    size_t err_size;
    dl_status st; // DL_ERR_PARSE unless something else went wrong
} jcur;

static bool jfail(jcur *c, const char *fmt, ...) DL_PRINTF(2, 3);
static bool jfail(jcur *c, const char *fmt, ...) {
    if (c->err && c->err_size) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        set_err(c->err, c->err_size, "bad safetensors header at byte %zu: %s",
                (size_t)(c->p - c->start), msg);
    }
    return false;
}

static void jws(jcur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static bool jeat(jcur *c, char ch) {
    jws(c);
    if (c->p < c->end && *c->p == (unsigned char)ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool jexpect(jcur *c, char ch) {
    if (jeat(c, ch)) {
        return true;
    }
    if (c->p >= c->end) {
        return jfail(c, "expected '%c', found the end of the header", ch);
    }
    return jfail(c, "expected '%c'", ch);
}

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

static bool jhex4(jcur *c, uint32_t *out) {
    if (c->end - c->p < 4) {
        return false;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(c->p[i]);
        if (h < 0) {
            return false;
        }
        v = v << 4 | (uint32_t)h;
    }
    c->p += 4;
    *out = v;
    return true;
}

static void utf8_put(dl_strbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    dl_strbuf_append(b, u, n);
}

// string -> '"' (utf8-char-except-control-quote-backslash | '\' escape)* '"'
// Decodes into the arena (*out, NUL-terminated). "\u0000" is rejected: names and metadata are C
// strings here.
static bool jstring(jcur *c, dl_arena *a, char **out) {
    jws(c);
    if (c->p >= c->end || *c->p != '"') {
        return jfail(c, c->p >= c->end ? "expected a string, found the end of the header"
                                       : "expected a string");
    }
    c->p++;
    dl_strbuf b = {0};
    bool ok = false;
    for (;;) {
        if (c->p >= c->end) {
            jfail(c, "unterminated string");
            goto out;
        }
        unsigned char ch = *c->p;
        if (ch == '"') {
            c->p++;
            break;
        }
        if (ch < 0x20) {
            jfail(c, "control character 0x%02x in a string", ch);
            goto out;
        }
        if (ch >= 0x80) {
            size_t n = utf8_len(c->p, c->end);
            if (n == 0) {
                jfail(c, "invalid UTF-8 in a string");
                goto out;
            }
            dl_strbuf_append(&b, (const char *)c->p, n);
            c->p += n;
            continue;
        }
        c->p++;
        if (ch != '\\') {
            dl_strbuf_append(&b, (const char *)&ch, 1);
            continue;
        }
        if (c->p >= c->end) {
            jfail(c, "unterminated string");
            goto out;
        }
        unsigned char e = *c->p++;
        char lit;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            lit = (char)e;
            break;
        case 'b':
            lit = '\b';
            break;
        case 'f':
            lit = '\f';
            break;
        case 'n':
            lit = '\n';
            break;
        case 'r':
            lit = '\r';
            break;
        case 't':
            lit = '\t';
            break;
        case 'u': {
            uint32_t cp;
            if (!jhex4(c, &cp)) {
                jfail(c, "bad \\u escape");
                goto out;
            }
            if (cp >= 0xd800 && cp < 0xdc00) {
                uint32_t lo;
                if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u') {
                    jfail(c, "unpaired surrogate in \\u escape");
                    goto out;
                }
                c->p += 2;
                if (!jhex4(c, &lo) || lo < 0xdc00 || lo >= 0xe000) {
                    jfail(c, "unpaired surrogate in \\u escape");
                    goto out;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                jfail(c, "unpaired surrogate in \\u escape");
                goto out;
            } else if (cp == 0) {
                jfail(c, "\\u0000 in a string is not supported");
                goto out;
            }
            utf8_put(&b, cp);
            continue;
        }
        default:
            jfail(c, "bad escape '\\%c'", e >= 0x20 && e < 0x7f ? (char)e : '?');
            goto out;
        }
        dl_strbuf_append(&b, &lit, 1);
    }
    if (b.oom) {
        c->st = DL_ERR_NOMEM;
        jfail(c, "out of memory");
        goto out;
    }
    *out = dl_arena_strndup(a, b.data ? b.data : "", b.len);
    if (!*out) {
        c->st = DL_ERR_NOMEM;
        jfail(c, "out of memory");
        goto out;
    }
    ok = true;
out:
    dl_strbuf_fini(&b);
    return ok;
}

// uint -> '0' | [1-9][0-9]*   (no sign, fraction or exponent; at most UINT64_MAX)
static bool juint(jcur *c, uint64_t *out) {
    jws(c);
    const unsigned char *s = c->p;
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned dgt = (unsigned)(*c->p - '0');
        if (v > (UINT64_MAX - dgt) / 10) {
            c->p = s;
            return jfail(c, "integer too large");
        }
        v = v * 10 + dgt;
        c->p++;
    }
    if (c->p == s) {
        return jfail(c, "expected a non-negative integer");
    }
    if (c->p - s > 1 && *s == '0') {
        c->p = s;
        return jfail(c, "integer with a leading zero");
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
        return jfail(c, "expected an integer, found a fraction or exponent");
    }
    *out = v;
    return true;
}

// uint_array -> '[' (uint (',' uint)*)? ']'   (at most `max` elements)
static bool juint_array(jcur *c, uint64_t *vals, size_t max, size_t *n, const char *what) {
    *n = 0;
    if (!jexpect(c, '[')) {
        return false;
    }
    if (jeat(c, ']')) {
        return true;
    }
    do {
        if (*n >= max) {
            return jfail(c, "%s has more than %zu elements", what, max);
        }
        if (!juint(c, &vals[*n])) {
            return false;
        }
        (*n)++;
    } while (jeat(c, ','));
    return jexpect(c, ']');
}

// metadata -> '{' (string ':' string (',' string ':' string)*)? '}'
static bool jmetadata(jcur *c, dl_st_file *f) {
    if (!jexpect(c, '{')) {
        return false;
    }
    if (jeat(c, '}')) {
        return true;
    }
    do {
        st_kv kv;
        if (!jstring(c, &f->arena, &kv.key) || !jexpect(c, ':')) {
            return false;
        }
        jws(c);
        if (c->p < c->end && *c->p != '"') {
            char nb[72];
            return jfail(c, "__metadata__ value of '%s' is not a string", printable(kv.key, nb));
        }
        if (!jstring(c, &f->arena, &kv.value)) {
            return false;
        }
        if (!DL_VEC_PUSH(&f->meta, kv)) {
            c->st = DL_ERR_NOMEM;
            return jfail(c, "out of memory");
        }
    } while (jeat(c, ','));
    return jexpect(c, '}');
}

static bool jdtype(jcur *c, dl_arena *a, const char *name, dl_dtype *out) {
    char *s;
    char nb[72], sb[72];
    if (!jstring(c, a, &s)) {
        return false;
    }
    for (size_t i = 0; i < DL_ARRAY_LEN(st_dtypes); i++) {
        if (strcmp(s, st_dtypes[i].name) == 0) {
            *out = st_dtypes[i].dt;
            return true;
        }
    }
    for (size_t i = 0; i < DL_ARRAY_LEN(st_other_dtypes); i++) {
        if (strcmp(s, st_other_dtypes[i]) == 0) {
            c->st = DL_ERR_UNSUPPORTED;
            set_err(c->err, c->err_size,
                    "tensor '%s' has unsupported dtype %s (supported: F32 F16 BF16 I32 I64 BOOL)",
                    printable(name, nb), s);
            return false;
        }
    }
    return jfail(c, "tensor '%s' has unknown dtype '%s'", printable(name, nb), printable(s, sb));
}

// tensor_info -> '{' field (',' field)* '}'
// field -> '"dtype"' ':' string | '"shape"' ':' uint_array | '"data_offsets"' ':' uint_array
// Each field exactly once; any other key is rejected.
static bool jtensor(jcur *c, dl_st_file *f, st_rentry *e) {
    char nb[72];
    const char *name = printable(e->name, nb);
    bool has_dtype = false, has_shape = false, has_off = false;
    if (!jexpect(c, '{')) {
        return false;
    }
    do {
        char *key;
        if (!jstring(c, &f->arena, &key) || !jexpect(c, ':')) {
            return false;
        }
        if (strcmp(key, "dtype") == 0) {
            if (has_dtype) {
                return jfail(c, "tensor '%s' has two 'dtype' keys", name);
            }
            if (!jdtype(c, &f->arena, e->name, &e->dtype)) {
                return false;
            }
            has_dtype = true;
        } else if (strcmp(key, "shape") == 0) {
            uint64_t d[DL_MAX_RANK];
            size_t n;
            if (has_shape) {
                return jfail(c, "tensor '%s' has two 'shape' keys", name);
            }
            if (!juint_array(c, d, DL_MAX_RANK, &n, "shape")) {
                return false;
            }
            for (size_t i = 0; i < n; i++) {
                if (d[i] > (uint64_t)INT64_MAX) {
                    return jfail(c, "tensor '%s' has a dimension too large", name);
                }
                e->dims[i] = (int64_t)d[i];
            }
            e->rank = (int32_t)n;
            has_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            uint64_t d[2];
            size_t n;
            if (has_off) {
                return jfail(c, "tensor '%s' has two 'data_offsets' keys", name);
            }
            if (!juint_array(c, d, 2, &n, "data_offsets")) {
                return false;
            }
            if (n != 2) {
                return jfail(c, "tensor '%s': data_offsets must be [begin, end]", name);
            }
            e->begin = d[0];
            e->end = d[1];
            has_off = true;
        } else {
            char kb[72];
            return jfail(c, "tensor '%s' has unexpected key '%s'", name, printable(key, kb));
        }
    } while (jeat(c, ','));
    if (!jexpect(c, '}')) {
        return false;
    }
    if (!has_dtype || !has_shape || !has_off) {
        return jfail(c, "tensor '%s' lacks '%s'", name,
                     !has_dtype   ? "dtype"
                     : !has_shape ? "shape"
                                  : "data_offsets");
    }
    return true;
}

// header -> '{' (member (',' member)*)? '}' ws* EOF
// member -> '"__metadata__"' ':' metadata | string ':' tensor_info
static bool jheader(jcur *c, dl_st_file *f) {
    bool has_meta = false;
    if (!jexpect(c, '{')) {
        return false;
    }
    if (!jeat(c, '}')) {
        do {
            st_rentry e = {0};
            if (!jstring(c, &f->arena, &e.name) || !jexpect(c, ':')) {
                return false;
            }
            if (strcmp(e.name, "__metadata__") == 0) {
                if (has_meta) {
                    return jfail(c, "two __metadata__ entries");
                }
                has_meta = true;
                if (!jmetadata(c, f)) {
                    return false;
                }
                continue;
            }
            if (!jtensor(c, f, &e)) {
                return false;
            }
            if (!DL_VEC_PUSH(&f->ents, e)) {
                c->st = DL_ERR_NOMEM;
                return jfail(c, "out of memory");
            }
        } while (jeat(c, ','));
        if (!jexpect(c, '}')) {
            return false;
        }
    }
    jws(c);
    if (c->p != c->end) {
        return jfail(c, "unexpected text after the JSON object");
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Reader: validation and access

// qsort has no context argument, so the sort elements carry their own key and original index
// (no globals; the index keeps the order total and deterministic).
typedef struct name_idx {
    const char *name;
    size_t idx;
} name_idx;

static int cmp_name_idx(const void *a, const void *b) {
    const name_idx *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    if (r) {
        return r;
    }
    return (x->idx > y->idx) - (x->idx < y->idx);
}

typedef struct off_idx {
    uint64_t begin, end;
    size_t idx;
} off_idx;

static int cmp_off_idx(const void *a, const void *b) {
    const off_idx *x = a, *y = b;
    if (x->begin != y->begin) {
        return x->begin < y->begin ? -1 : 1;
    }
    if (x->end != y->end) {
        return x->end < y->end ? -1 : 1;
    }
    return (x->idx > y->idx) - (x->idx < y->idx);
}

// Sorts `n` names into *out (indices), failing on the first duplicate (reported via *dup).
static dl_status sort_names(const char *const *names, size_t n, size_t **out, const char **dup) {
    *out = NULL;
    *dup = NULL;
    name_idx *tmp = dl_mem_alloc((n ? n : 1) * sizeof *tmp);
    size_t *idx = dl_mem_alloc((n ? n : 1) * sizeof *idx);
    if (!tmp || !idx) {
        free(tmp);
        free(idx);
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        tmp[i] = (name_idx){names[i], i};
    }
    if (n > 1) {
        qsort(tmp, n, sizeof *tmp, cmp_name_idx);
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = tmp[i].idx;
        if (i > 0 && strcmp(tmp[i - 1].name, tmp[i].name) == 0) {
            *dup = tmp[i].name;
            free(tmp);
            free(idx);
            return DL_ERR_PARSE;
        }
    }
    free(tmp);
    *out = idx;
    return DL_OK;
}

// Everything after the JSON parse: sizes, offsets tiling the data section, unique names.
static dl_status validate(dl_st_file *f, char *err, size_t err_size) {
    char nb[72];
    size_t n = f->ents.len;
    for (size_t i = 0; i < n; i++) {
        const st_rentry *e = &f->ents.data[i];
        uint64_t need;
        if (!shape_nbytes(e->dims, e->rank, dl_dtype_size(e->dtype), &need)) {
            set_err(err, err_size, "tensor '%s' is too large", printable(e->name, nb));
            return DL_ERR_PARSE;
        }
        if (e->begin > e->end) {
            set_err(err, err_size, "tensor '%s': data_offsets [%llu, %llu] have begin > end",
                    printable(e->name, nb), (unsigned long long)e->begin,
                    (unsigned long long)e->end);
            return DL_ERR_PARSE;
        }
        if (e->end > f->data_size) {
            set_err(err, err_size,
                    "tensor '%s': data_offsets [%llu, %llu] exceed the data section (%llu bytes)",
                    printable(e->name, nb), (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)f->data_size);
            return DL_ERR_PARSE;
        }
        if (e->end - e->begin != need) {
            char shp[160];
            dl_shape_format(e->dims, e->rank, shp, sizeof shp);
            set_err(err, err_size, "tensor '%s': data_offsets span %llu bytes but %s%s needs %llu",
                    printable(e->name, nb), (unsigned long long)(e->end - e->begin),
                    dl_st_dtype_name(e->dtype), shp, (unsigned long long)need);
            return DL_ERR_PARSE;
        }
    }
    // The byte ranges must tile [0, data_size): sorted by offset, each begins where the
    // previous one ended (no gap, no overlap) and the last ends at the end of the file.
    off_idx *o = dl_mem_alloc((n ? n : 1) * sizeof *o);
    if (!o) {
        set_err(err, err_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        o[i] = (off_idx){f->ents.data[i].begin, f->ents.data[i].end, i};
    }
    if (n > 1) {
        qsort(o, n, sizeof *o, cmp_off_idx);
    }
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (o[i].begin != pos) {
            const st_rentry *e = &f->ents.data[o[i].idx];
            set_err(
                err, err_size, "tensor '%s': data_offsets [%llu, %llu] %s (expected begin %llu)",
                printable(e->name, nb), (unsigned long long)e->begin, (unsigned long long)e->end,
                o[i].begin < pos ? "overlap another tensor" : "leave a gap", //
                (unsigned long long)pos);
            free(o);
            return DL_ERR_PARSE;
        }
        pos = o[i].end;
    }
    free(o);
    if (pos != f->data_size) {
        set_err(err, err_size,
                "the tensors cover %llu bytes but the data section holds %llu (trailing data)",
                (unsigned long long)pos, (unsigned long long)f->data_size);
        return DL_ERR_PARSE;
    }

    const char **names = dl_mem_alloc((n ? n : 1) * sizeof *names);
    if (!names) {
        set_err(err, err_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = f->ents.data[i].name;
    }
    const char *dup;
    dl_status st = sort_names(names, n, &f->ent_by_name, &dup);
    free(names);
    if (st == DL_ERR_PARSE) {
        set_err(err, err_size, "tensor '%s' is listed twice", printable(dup, nb));
        return st;
    }
    if (st != DL_OK) {
        set_err(err, err_size, "out of memory");
        return st;
    }
    size_t m = f->meta.len;
    names = dl_mem_alloc((m ? m : 1) * sizeof *names);
    if (!names) {
        set_err(err, err_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < m; i++) {
        names[i] = f->meta.data[i].key;
    }
    st = sort_names(names, m, &f->meta_by_name, &dup);
    free(names);
    if (st == DL_ERR_PARSE) {
        set_err(err, err_size, "__metadata__ key '%s' is listed twice", printable(dup, nb));
        return st;
    }
    if (st != DL_OK) {
        set_err(err, err_size, "out of memory");
    }
    return st;
}

// Reads and validates the header of the open stream f->f, whose total size is `size` bytes.
static dl_status open_stream(dl_st_file *f, uint64_t size, char *err, size_t err_size) {
    unsigned char *hdr = NULL;
    dl_status st = DL_ERR_PARSE;
    unsigned char lenb[8];
    if (size < 8 || fread(lenb, 1, 8, f->f) != 8) {
        set_err(err, err_size, "not a safetensors file (shorter than 8 bytes)");
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) {
        hlen = hlen << 8 | lenb[i];
    }
    if (hlen > size - 8) {
        set_err(err, err_size,
                "not a safetensors file (header length %llu exceeds the file size %llu)",
                (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    if (hlen > ST_MAX_HEADER) {
        set_err(err, err_size, "safetensors header too large (%llu bytes, at most %llu)",
                (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
        goto out;
    }
    if (hlen < 2) {
        set_err(err, err_size, "not a safetensors file (header length %llu)",
                (unsigned long long)hlen);
        goto out;
    }
    hdr = dl_mem_alloc((size_t)hlen);
    if (!hdr) {
        set_err(err, err_size, "out of memory");
        st = DL_ERR_NOMEM;
        goto out;
    }
    if (fread(hdr, 1, (size_t)hlen, f->f) != (size_t)hlen) {
        set_err(err, err_size, "cannot read: short read");
        st = DL_ERR_IO;
        goto out;
    }
    f->data_start = 8 + hlen;
    f->data_size = size - 8 - hlen;
    jcur c = {hdr, hdr, hdr + hlen, err, err_size, DL_ERR_PARSE};
    if (!jheader(&c, f)) {
        st = c.st;
        goto out;
    }
    st = validate(f, err, err_size);
out:
    free(hdr);
    return st;
}

dl_status dl_st_open(const char *path, dl_st_file **out, char *err, size_t err_size) {
    *out = NULL;
    dl_status st = DL_ERR_IO;
    dl_st_file *f = dl_mem_calloc(1, sizeof *f);
    if (!f) {
        set_err(err, err_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    dl_arena_init(&f->arena);
    char why[160];
    if (dl_fopen_regular(path, DL_READ_LIMIT_DEFAULT, &f->f, why, sizeof why) != DL_OK) {
        f->f = NULL;
        set_err(err, err_size, "cannot read: %s", why);
        goto out;
    }
    struct stat sb;
    if (fstat(fileno(f->f), &sb) != 0) {
        set_err(err, err_size, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        set_err(err, err_size, "cannot read: not a regular file");
        goto out;
    }
    st = open_stream(f, (uint64_t)sb.st_size, err, err_size);
    if (st == DL_OK) {
        *out = f;
        f = NULL;
    }
out:
    dl_st_close(f);
    return st;
}

dl_status dl_st_open_mem(const void *data, size_t len, dl_st_file **out, char *err,
                         size_t err_size) {
    *out = NULL;
    if (len < 8) { // fmemopen may refuse an empty buffer; the answer is the same anyway
        set_err(err, err_size, "not a safetensors file (shorter than 8 bytes)");
        return DL_ERR_PARSE;
    }
    dl_status st = DL_ERR_NOMEM;
    dl_st_file *f = dl_mem_calloc(1, sizeof *f);
    if (!f) {
        set_err(err, err_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    dl_arena_init(&f->arena);
    // A read-only stream: fmemopen's buffer argument is not const-qualified, but mode "rb"
    // never writes through it.
    f->f = fmemopen((void *)(uintptr_t)data, len, "rb");
    if (!f->f) {
        set_err(err, err_size, "out of memory");
        goto out;
    }
    st = open_stream(f, (uint64_t)len, err, err_size);
    if (st == DL_OK) {
        *out = f;
        f = NULL;
    }
out:
    dl_st_close(f);
    return st;
}

void dl_st_close(dl_st_file *f) {
    if (!f) {
        return;
    }
    if (f->f) {
        fclose(f->f);
    }
    dl_arena_fini(&f->arena);
    free(f->ents.data);
    free(f->meta.data);
    free(f->ent_by_name);
    free(f->meta_by_name);
    free(f);
}

size_t dl_st_count(const dl_st_file *f) {
    return f->ents.len;
}

dl_status dl_st_info(const dl_st_file *f, size_t i, dl_st_tensor_info *out) {
    if (i >= f->ents.len) {
        return DL_ERR_INVALID_ARG;
    }
    const st_rentry *e = &f->ents.data[i];
    *out = (dl_st_tensor_info){e->name, e->dtype, e->rank, {0}, e->begin, e->end};
    memcpy(out->dims, e->dims, sizeof out->dims);
    return DL_OK;
}

// Binary search over an index sorted by name; returns the position in the base array or -1.
static int64_t lookup(const size_t *by_name, size_t n, const char *(*name_of)(const void *, size_t),
                      const void *base, const char *key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(name_of(base, by_name[mid]), key);
        if (r == 0) {
            return (int64_t)by_name[mid];
        }
        if (r < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return -1;
}

static const char *ent_name(const void *base, size_t i) {
    return ((const st_rentry *)base)[i].name;
}

static const char *meta_key(const void *base, size_t i) {
    return ((const st_kv *)base)[i].key;
}

int64_t dl_st_find(const dl_st_file *f, const char *name) {
    return lookup(f->ent_by_name, f->ents.len, ent_name, f->ents.data, name);
}

const char *dl_st_metadata(const dl_st_file *f, const char *key) {
    int64_t i = lookup(f->meta_by_name, f->meta.len, meta_key, f->meta.data, key);
    return i < 0 ? NULL : f->meta.data[i].value;
}

size_t dl_st_metadata_count(const dl_st_file *f) {
    return f->meta.len;
}

dl_status dl_st_metadata_at(const dl_st_file *f, size_t i, const char **out_key,
                            const char **out_value) {
    if (i >= f->meta.len) {
        return DL_ERR_INVALID_ARG;
    }
    *out_key = f->meta.data[i].key;
    *out_value = f->meta.data[i].value;
    return DL_OK;
}

dl_status dl_st_read_into(dl_st_file *f, size_t i, void *dst, size_t size, char *err,
                          size_t err_size) {
    char nb[72];
    if (i >= f->ents.len) {
        set_err(err, err_size, "no tensor #%zu (the file has %zu)", i, f->ents.len);
        return DL_ERR_INVALID_ARG;
    }
    const st_rentry *e = &f->ents.data[i];
    uint64_t need = e->end - e->begin;
    if ((uint64_t)size != need || (need > 0 && !dst)) {
        set_err(err, err_size, "tensor '%s' holds %llu bytes, the buffer %zu",
                printable(e->name, nb), (unsigned long long)need, size);
        return DL_ERR_INVALID_ARG;
    }
    if (need == 0) {
        return DL_OK;
    }
    // Offsets were bounded by the file size at open, which fits in off_t.
    if (fseeko(f->f, (off_t)(f->data_start + e->begin), SEEK_SET) != 0 ||
        fread(dst, 1, size, f->f) != size) {
        set_err(err, err_size, "cannot read tensor '%s': short read (file changed?)",
                printable(e->name, nb));
        return DL_ERR_IO;
    }
    if (e->dtype == DL_DT_BOOL) {
        const unsigned char *v = dst;
        for (size_t k = 0; k < size; k++) {
            if (v[k] > 1) {
                set_err(err, err_size, "tensor '%s': bool element %zu is %u (must be 0 or 1)",
                        printable(e->name, nb), k, v[k]);
                return DL_ERR_PARSE;
            }
        }
    }
    return DL_OK;
}

dl_status dl_st_read(dl_st_file *f, size_t i, dl_tensor *out, char *err, size_t err_size) {
    out->data = NULL;
    if (i >= f->ents.len) {
        set_err(err, err_size, "no tensor #%zu (the file has %zu)", i, f->ents.len);
        return DL_ERR_INVALID_ARG;
    }
    const st_rentry *e = &f->ents.data[i];
    dl_tensor t = {0};
    dl_status st = dl_tensor_alloc(&t, e->dtype, e->rank, e->dims);
    if (st != DL_OK) {
        set_err(err, err_size, "%s", dl_status_str(st));
        return st;
    }
    st = dl_st_read_into(f, i, t.data, (size_t)(e->end - e->begin), err, err_size);
    if (st != DL_OK) {
        dl_tensor_free(&t);
        out->data = NULL;
        return st;
    }
    *out = t;
    return DL_OK;
}

bool dl_st_rule_apply(const dl_st_rule *rules, size_t n_rules, const char *name, char *buf,
                      size_t size) {
    for (size_t i = 0; i < n_rules; i++) {
        const char *from = rules[i].from, *to = rules[i].to;
        size_t fl = strlen(from);
        if (fl > 0 && from[fl - 1] == '*') {
            if (strncmp(name, from, fl - 1) == 0) {
                int n = snprintf(buf, size, "%.*s%s", (int)(strlen(to) - 1), to, name + fl - 1);
                return n >= 0 && (size_t)n < size;
            }
        } else if (strcmp(name, from) == 0) {
            return (size_t)snprintf(buf, size, "%s", to) < size;
        }
    }
    return (size_t)snprintf(buf, size, "%s", name) < size;
}
