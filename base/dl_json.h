// base/dl_json.h — JSON text: the one string escaper of the project and a small streaming writer.
// Used by dlcc-cache's --json output, the runtime profiler's trace and the safetensors header.
//
// Strings are escaped the same way everywhere: `"` and `\` with a backslash, \b \f \n \r \t by
// name, every other control character and DEL as \u00XX, valid UTF-8 verbatim and each byte of
// an invalid UTF-8 sequence as U+FFFD (\ufffd), so the output is always valid JSON.
#ifndef DL_JSON_H
#define DL_JSON_H

#include "dl_base.h"

// Appends `s` (n bytes, may hold NUL, which becomes \u0000) as a quoted JSON string.
void dl_json_put_string_n(dl_strbuf *b, const char *s, size_t n);
// Appends NUL-terminated `s` (NULL: "") as a quoted JSON string.
void dl_json_put_string(dl_strbuf *b, const char *s);

// A streaming writer: compact output, commas placed automatically. Zero-initialise it, write,
// then take b (b.oom says whether building it ran out of memory) and dl_strbuf_fini it.
// Nesting deeper than 63 levels is a bug of the caller (asserted).
typedef struct dl_json {
    dl_strbuf b;
    int depth;
    bool first[64];
    bool after_key;
} dl_json;

void dl_json_obj(dl_json *j);     // {
void dl_json_obj_end(dl_json *j); // }
void dl_json_arr(dl_json *j);     // [
void dl_json_arr_end(dl_json *j); // ]
void dl_json_key(dl_json *j, const char *k);
void dl_json_str(dl_json *j, const char *s); // NULL: null
void dl_json_i64(dl_json *j, int64_t v);
void dl_json_u64(dl_json *j, uint64_t v);
void dl_json_f64(dl_json *j, double v); // %.6g; NaN and infinities (which JSON lacks): null
void dl_json_bool(dl_json *j, bool v);
void dl_json_null(dl_json *j);
// "key": value.
void dl_json_kstr(dl_json *j, const char *k, const char *v);
void dl_json_ki64(dl_json *j, const char *k, int64_t v);
void dl_json_ku64(dl_json *j, const char *k, uint64_t v);
void dl_json_kf64(dl_json *j, const char *k, double v);
void dl_json_kbool(dl_json *j, const char *k, bool v);

#endif
