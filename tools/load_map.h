// tools/load_map.h — `--map FILE` (dlcc train --init, dlcc run --params): the rename rules of a
// checkpoint load, one rule per line (tools/load_map.c; syntax in docs/training.md).
#ifndef DL_TOOLS_LOAD_MAP_H
#define DL_TOOLS_LOAD_MAP_H

#include "dl_base.h"
#include "dl_safetensors.h"
#include "dlrt.h"

typedef struct load_map {
    char *text;            // OWNED: the file's text; the names point into it
    dlrt_load_rule *rules; // OWNED: n of them, for dlrt_session_load_with
    dl_st_rule *st_rules;  // OWNED: the same rules, for dl_st_rule_apply
    size_t n;
} load_map;

// Reads the map file `path` into *out (zeroed first; load_map_fini frees it, also on failure).
// Errors go to d with FILE:LINE:COL and the offending name underlined: a line with one name or
// more than two, a prefix rule with '*' on one side only, a '*' before a name's end. Returns
// DL_ERR_IO (unreadable; the reason in d), DL_ERR_PARSE or DL_ERR_NOMEM.
DL_NODISCARD dl_status load_map_read(const char *path, dl_diags *d, load_map *out);
void load_map_fini(load_map *m);

#endif
