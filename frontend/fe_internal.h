// frontend/fe_internal.h — private interfaces of the .dlg frontend: tokens and the on-demand
// lexer (lexer.c), the error-counting diagnostics context and attribute validation (attrs.c),
// used by the parser (parser.c).
//
// Lexical errors are not reported by the lexer: it returns an FE_TOK_ERROR token carrying its
// message, and the parser reports it when the token is the one it trips over. That keeps every
// diagnostic in source order, lets recovery skip the rest of a bad statement quietly, and puts
// lexical errors under the same 20-error cap as the rest.
#ifndef DL_FE_INTERNAL_H
#define DL_FE_INTERNAL_H

#include "dl_fe.h"

#define FE_MAX_ERRORS 20

// ---------------------------------------------------------------------------------------------
// Diagnostics context: counts errors, stops after FE_MAX_ERRORS.

typedef struct fe_ctx {
    dl_diags *d;
    uint32_t file;
    size_t n_errors;
    bool stop; // the cap was hit: no more diagnostics, the parser winds down
    bool oom;
} fe_ctx;

// Records an error unless stopped; the 21st error becomes the note "too many errors, stopping".
void dl_fe__error(fe_ctx *cx, dl_src_loc loc, const char *fmt, ...) DL_PRINTF(3, 4);
void dl_fe__note(fe_ctx *cx, dl_src_loc loc, const char *fmt, ...) DL_PRINTF(3, 4);

// Levenshtein distance, capped: returns > cap as soon as it is known to exceed `cap`.
size_t dl_fe__edit_distance(const char *a, const char *b, size_t cap);
// Best "did you mean" candidate among `names` (case-insensitive equal first, then edit distance
// <= 2 and less than half the length), or NULL.
const char *dl_fe__suggest(const char *word, const char *const *names, size_t n_names);

// ---------------------------------------------------------------------------------------------
// Tokens

typedef enum fe_tok_kind {
    FE_TOK_EOF,
    FE_TOK_NEWLINE,
    FE_TOK_IDENT,
    FE_TOK_INT,
    FE_TOK_FLOAT,
    FE_TOK_STRING,
    FE_TOK_PUNCT,
    FE_TOK_ERROR, // a lexical error; `s` is the message, err_col/err_len where it points
} fe_tok_kind;

typedef struct fe_token {
    fe_tok_kind kind;
    char punct;         // PUNCT: one of = , : ( ) [ ] < > { }
    uint32_t line, col; // 1-based; col in bytes
    uint32_t len;       // bytes of source covered (>= 1 except at EOF)
    const char *text;   // points into the source (not NUL-terminated)
    const char *s;      // IDENT: NUL-terminated copy; STRING: decoded value; ERROR: message
    int64_t i;          // INT
    double f;           // FLOAT
    uint32_t err_col, err_len;
} fe_token;

// A comment as written ("# ..." without the newline and trailing blanks).
typedef struct fe_comment {
    uint32_t line;
    bool full_line; // nothing but blanks before it on its line
    const char *text;
    size_t len;
} fe_comment;

typedef struct fe_lexer {
    const char *src;
    size_t len, pos;
    uint32_t line;
    size_t line_start;           // byte offset of the current line
    bool line_has_token;         // a token was seen on the current line
    dl_arena *scratch;           // token strings and messages live here
    DL_VEC(fe_comment) comments; // every comment, in source order; heap, freed by lex_fini
    bool oom;
} fe_lexer;

void dl_fe__lex_init(fe_lexer *lx, const char *src, size_t len, dl_arena *scratch);
void dl_fe__lex_fini(fe_lexer *lx);
// Produces the next token. Never fails: problems become FE_TOK_ERROR tokens; allocation failure
// sets lx->oom (and yields an ERROR token).
void dl_fe__lex_next(fe_lexer *lx, fe_token *out);

// ---------------------------------------------------------------------------------------------
// Attributes as parsed, before and after validation

typedef struct fe_attr {
    dl_ir_attr a;      // list payloads live in the module arena
    dl_src_loc vloc;   // the value (first token for lists: the '[')
    dl_src_loc *elocs; // per list element (n entries), scratch arena; NULL for scalars
    bool empty_list;   // `[]`: its kind is taken from the spec
} fe_attr;

// Validates `attrs` against `specs` for `owner` ("Gemm", "adam", "loss_scale"): unknown and
// duplicate names, kinds (an int where a float is expected becomes FLOAT, ints where floats are
// expected become FLOATS, `[]` takes the spec's list kind), minimum values and choices, and
// required attributes (reported at owner_loc). Attributes that fail are reported; returns true
// when all passed.
bool dl_fe__check_attrs(fe_ctx *cx, const char *owner, const dl_ir_attr_spec *specs, size_t n_specs,
                        fe_attr *attrs, size_t n_attrs, dl_src_loc owner_loc);

// "an int", "a list of floats", ...
const char *dl_fe__kind_phrase(dl_ir_attr_kind k);

#endif
