// frontend/lexer.c — the .dlg lexer: turns source bytes into tokens on demand.
//
// Tokens: identifiers [A-Za-z_][A-Za-z0-9_.]*, C-like ints and floats (an optional sign is part
// of the number, so `-3` and `-inf` are one token; bare `inf`/`nan` are identifiers the parser
// reads as numbers), strings with \" and \\ escapes, the punctuation = , : ( ) [ ] < > { } and
// NEWLINE (the parser decides when a newline ends a statement). `#` comments are not tokens:
// they are recorded in lx->comments with their line so the parser can hand them to `dlcc fmt`.
// Invariants: lx->pos <= lx->len; the source need not be NUL-terminated and may hold any bytes;
// every token covers at least one byte except EOF, so the lexer always makes progress.
#include "fe_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dl_fe__lex_init(fe_lexer *lx, const char *src, size_t len, dl_arena *scratch) {
    memset(lx, 0, sizeof(*lx));
    lx->src = src ? src : "";
    lx->len = src ? len : 0;
    lx->line = 1;
    lx->scratch = scratch;
}

void dl_fe__lex_fini(fe_lexer *lx) {
    free(lx->comments.data);
    lx->comments.data = NULL;
    lx->comments.len = lx->comments.cap = 0;
}

static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c) {
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static uint32_t clamp_u32(size_t v) {
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

// Turns `t` (already positioned) into an ERROR token with a formatted message pointing at
// source bytes [at, at + n).
static void set_error(fe_lexer *lx, fe_token *t, size_t at, size_t n, const char *fmt, ...)
    DL_PRINTF(5, 6);
static void set_error(fe_lexer *lx, fe_token *t, size_t at, size_t n, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    t->kind = FE_TOK_ERROR;
    t->s = dl_arena_strdup(lx->scratch, buf);
    if (!t->s) {
        lx->oom = true;
        t->s = "out of memory";
    }
    t->err_col = clamp_u32(at - lx->line_start + 1);
    t->err_len = clamp_u32(n ? n : 1);
}

// Writes source bytes for a message: printable ASCII as is, other bytes as \xNN, at most ~40
// bytes of source (then "...").
static void quote_bytes(const char *s, size_t n, char *buf, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        }
    }
    buf[o] = 0;
}

// comment -> '#' any* (to end of line)
static void lex_comment(fe_lexer *lx) {
    size_t start = lx->pos;
    while (lx->pos < lx->len && lx->src[lx->pos] != '\n') {
        lx->pos++;
    }
    size_t end = lx->pos;
    while (end > start &&
           (lx->src[end - 1] == ' ' || lx->src[end - 1] == '\t' || lx->src[end - 1] == '\r')) {
        end--;
    }
    fe_comment c = {lx->line, !lx->line_has_token, lx->src + start, end - start};
    if (!DL_VEC_PUSH(&lx->comments, c)) {
        lx->oom = true;
    }
}

// number -> [+-]? (digits ('.' digits?)? | '.' digits) ([eE] [+-]? digits)? | [+-] 'inf'
static void lex_number(fe_lexer *lx, fe_token *t) {
    const char *s = lx->src;
    size_t n = lx->len, p = lx->pos, start = lx->pos;
    bool neg = false;
    if (s[p] == '-' || s[p] == '+') {
        neg = s[p] == '-';
        p++;
    }
    if (p + 3 <= n && memcmp(s + p, "inf", 3) == 0 && (p + 3 == n || !is_ident_char(s[p + 3]))) {
        lx->pos = p + 3;
        t->kind = FE_TOK_FLOAT;
        t->f = neg ? -INFINITY : INFINITY;
        t->len = clamp_u32(lx->pos - start);
        return;
    }
    bool is_float = false, bad = false;
    size_t n_digits = 0;
    while (p < n && is_digit(s[p])) {
        p++;
        n_digits++;
    }
    if (p < n && s[p] == '.') {
        is_float = true;
        p++;
        while (p < n && is_digit(s[p])) {
            p++;
            n_digits++;
        }
    }
    if (n_digits == 0) {
        bad = true;
    }
    if (!bad && p < n && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < n && (s[q] == '+' || s[q] == '-')) {
            q++;
        }
        if (q < n && is_digit(s[q])) {
            while (q < n && is_digit(s[q])) {
                q++;
            }
            p = q;
            is_float = true;
        } else {
            bad = true;
        }
    }
    if (p < n && is_ident_char(s[p])) {
        bad = true;
    }
    if (bad) {
        while (p < n && (is_ident_char(s[p]) || ((s[p] == '+' || s[p] == '-') && p > start &&
                                                 (s[p - 1] == 'e' || s[p - 1] == 'E')))) {
            p++;
        }
        if (p == start + 1 && (s[start] == '-' || s[start] == '+')) {
            // A lone sign: not a number at all.
            lx->pos = p;
            t->len = 1;
            set_error(lx, t, start, 1, "unexpected character '%c'", s[start]);
            return;
        }
        lx->pos = p;
        t->len = clamp_u32(p - start);
        char q[200];
        quote_bytes(s + start, p - start, q, sizeof(q));
        set_error(lx, t, start, p - start, "invalid number '%s'", q);
        return;
    }
    lx->pos = p;
    t->len = clamp_u32(p - start);
    if (!is_float) {
        // Accumulate in uint64 with an overflow check; -9223372036854775808 is allowed.
        uint64_t v = 0;
        bool overflow = false;
        for (size_t i = start + (s[start] == '-' || s[start] == '+'); i < p; i++) {
            uint64_t d = (uint64_t)(s[i] - '0');
            if (v > (UINT64_MAX - d) / 10) {
                overflow = true;
                break;
            }
            v = v * 10 + d;
        }
        uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        if (overflow || v > limit) {
            char q[200];
            quote_bytes(s + start, p - start, q, sizeof(q));
            set_error(lx, t, start, p - start, "integer literal '%s' is out of range", q);
            return;
        }
        t->kind = FE_TOK_INT;
        t->i = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
        return;
    }
    char *tmp = dl_arena_strndup(lx->scratch, s + start, p - start);
    if (!tmp) {
        lx->oom = true;
        set_error(lx, t, start, p - start, "out of memory");
        return;
    }
    errno = 0;
    double v = strtod(tmp, NULL);
    if (errno == ERANGE && isinf(v)) {
        char q[200];
        quote_bytes(s + start, p - start, q, sizeof(q));
        set_error(lx, t, start, p - start, "float literal '%s' is out of range", q);
        return;
    }
    t->kind = FE_TOK_FLOAT;
    t->f = v;
}

// string -> '"' (char | '\"' | '\\')* '"'   (no newline inside)
static void lex_string(fe_lexer *lx, fe_token *t) {
    const char *s = lx->src;
    size_t n = lx->len, start = lx->pos, p = lx->pos + 1;
    size_t bad_at = 0, nul_at = 0;
    bool bad_escape = false, has_nul = false;
    for (;;) {
        if (p >= n || s[p] == '\n') {
            lx->pos = p;
            t->len = clamp_u32(p - start);
            set_error(lx, t, start, 1, "unterminated string");
            return;
        }
        char c = s[p];
        if (c == '"') {
            p++;
            break;
        }
        if (c == '\\') {
            if (p + 1 < n && (s[p + 1] == '"' || s[p + 1] == '\\')) {
                p += 2;
                continue;
            }
            if (!bad_escape) {
                bad_escape = true;
                bad_at = p;
            }
            if (p + 1 < n && s[p + 1] != '\n') {
                p += 2;
            } else {
                p++;
            }
            continue;
        }
        if (c == 0 && !has_nul) {
            has_nul = true;
            nul_at = p;
        }
        p++;
    }
    lx->pos = p;
    t->len = clamp_u32(p - start);
    if (bad_escape) {
        char q[16];
        quote_bytes(s + bad_at + 1, bad_at + 1 < p - 1 ? 1 : 0, q, sizeof(q));
        set_error(lx, t, bad_at, 2, "unknown escape sequence '\\%s' in string (only \\\" and \\\\)",
                  q);
        return;
    }
    if (has_nul) {
        set_error(lx, t, nul_at, 1, "string contains a NUL byte");
        return;
    }
    char *out = dl_arena_alloc(lx->scratch, p - start);
    if (!out) {
        lx->oom = true;
        set_error(lx, t, start, 1, "out of memory");
        return;
    }
    size_t o = 0;
    for (size_t i = start + 1; i + 1 < p; i++) {
        if (s[i] == '\\') {
            i++;
        }
        out[o++] = s[i];
    }
    out[o] = 0;
    t->kind = FE_TOK_STRING;
    t->s = out;
}

// Consumes one unexpected character: a whole UTF-8 sequence when the byte starts one, so `é`
// is reported once and shown as written.
static void lex_unexpected(fe_lexer *lx, fe_token *t) {
    const unsigned char *s = (const unsigned char *)lx->src;
    size_t start = lx->pos, n = 1, want = 0;
    unsigned char c = s[start];
    if (c >= 0xc2 && c <= 0xdf) {
        want = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        want = 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
        want = 4;
    }
    while (want && n < want && start + n < lx->len && (s[start + n] & 0xc0) == 0x80) {
        n++;
    }
    lx->pos = start + n;
    t->len = clamp_u32(n);
    if (want && n == want) {
        set_error(lx, t, start, n, "unexpected character '%.*s'", (int)n, lx->src + start);
    } else {
        char q[64];
        quote_bytes(lx->src + start, n, q, sizeof(q));
        set_error(lx, t, start, n, "unexpected character '%s'", q);
    }
}

void dl_fe__lex_next(fe_lexer *lx, fe_token *t) {
    memset(t, 0, sizeof(*t));
    const char *s = lx->src;
    for (;;) {
        while (lx->pos < lx->len &&
               (s[lx->pos] == ' ' || s[lx->pos] == '\t' || s[lx->pos] == '\r' ||
                s[lx->pos] == '\v' || s[lx->pos] == '\f')) {
            lx->pos++;
        }
        if (lx->pos < lx->len && s[lx->pos] == '#') {
            lex_comment(lx);
            continue;
        }
        break;
    }
    t->line = lx->line;
    t->col = clamp_u32(lx->pos - lx->line_start + 1);
    t->text = s + lx->pos;
    if (lx->pos >= lx->len) {
        t->kind = FE_TOK_EOF;
        t->len = 0;
        return;
    }
    char c = s[lx->pos];
    if (c == '\n') {
        t->kind = FE_TOK_NEWLINE;
        t->len = 1;
        lx->pos++;
        lx->line++;
        lx->line_start = lx->pos;
        lx->line_has_token = false;
        return;
    }
    lx->line_has_token = true;
    size_t start = lx->pos;
    if (is_ident_start(c)) {
        while (lx->pos < lx->len && is_ident_char(s[lx->pos])) {
            lx->pos++;
        }
        t->kind = FE_TOK_IDENT;
        t->len = clamp_u32(lx->pos - start);
        t->s = dl_arena_strndup(lx->scratch, s + start, lx->pos - start);
        if (!t->s) {
            lx->oom = true;
            set_error(lx, t, start, 1, "out of memory");
        }
        return;
    }
    bool next_digit = lx->pos + 1 < lx->len && is_digit(s[lx->pos + 1]);
    bool next_dot_digit =
        lx->pos + 2 < lx->len && s[lx->pos + 1] == '.' && is_digit(s[lx->pos + 2]);
    bool next_inf = lx->pos + 3 < lx->len && memcmp(s + lx->pos + 1, "inf", 3) == 0;
    if (is_digit(c) || (c == '.' && next_digit) ||
        ((c == '-' || c == '+') && (next_digit || next_dot_digit || next_inf))) {
        lex_number(lx, t);
        return;
    }
    if (c == '"') {
        lex_string(lx, t);
        return;
    }
    if (strchr("=,:()[]<>{}", c) && c != 0) {
        t->kind = FE_TOK_PUNCT;
        t->punct = c;
        t->len = 1;
        lx->pos++;
        return;
    }
    lex_unexpected(lx, t);
}
