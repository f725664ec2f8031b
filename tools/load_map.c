// tools/load_map.c — the `--map FILE` of dlcc train --init and dlcc run --params: the rename rules
// of a checkpoint load (dlrt_load_rule, runtime/dlrt.h) written one per line:
//
//     # comment (to the end of the line; blank lines are ignored)
//     FROM TO            an exact rule: the file's tensor FROM is the model's TO
//     encoder.* enc.*    a prefix rule: both sides end in '*'
//
// Names are separated by spaces or tabs. The first rule that matches a file name wins. The names
// point into the file's text (kept in the map, NUL-terminated in place), so the map owns three
// allocations: the text and the two rule arrays (the runtime's type and base's, equal content).
#include "load_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void load_map_fini(load_map *m) {
    free(m->text);
    free(m->rules);
    free(m->st_rules);
    memset(m, 0, sizeof *m);
}

static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}

// Checks one name (its '*' only at the end); error into d at loc.
static bool check_star(const char *name, dl_src_loc loc, dl_diags *d) {
    const char *star = strchr(name, '*');
    if (star && star[1] != '\0') {
        loc.col += (uint32_t)(star - name);
        loc.len = 1;
        dl_diag(d, DL_SEV_ERROR, loc,
                "'%s': a '*' may only end a name (a prefix rule: 'encoder.* enc.*')", name);
        return false;
    }
    return true;
}

dl_status load_map_read(const char *path, dl_diags *d, load_map *out) {
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char why[256] = "";
    dl_status st = dl_read_file_max(path, DL_READ_LIMIT_DLG, &out->text, &len, why, sizeof why);
    uint32_t file = 0;
    if (st != DL_OK || dl_diags_add_file(d, path, out->text, len, &file) != DL_OK) {
        dl_src_loc loc = DL_NO_LOC;
        if (dl_diags_add_file(d, path, "", 0, &loc.file) != DL_OK) {
            loc = DL_NO_LOC;
        }
        dl_diag(d, DL_SEV_ERROR, loc, "--map: cannot read the file: %s",
                st != DL_OK ? why : "out of memory");
        return st != DL_OK ? st : DL_ERR_NOMEM;
    }
    size_t cap = 1; // lines bound the rules
    for (size_t i = 0; i < len; i++) {
        cap += out->text[i] == '\n';
    }
    out->rules = dl_mem_alloc(cap * sizeof *out->rules);
    out->st_rules = dl_mem_alloc(cap * sizeof *out->st_rules);
    if (!out->rules || !out->st_rules) {
        return DL_ERR_NOMEM;
    }
    bool ok = true;
    char *p = out->text;
    for (uint32_t line = 1; *p; line++) {
        char *eol = strchr(p, '\n');
        char *next = eol ? eol + 1 : p + strlen(p);
        if (eol) {
            *eol = '\0';
        }
        char *names[3] = {NULL, NULL, NULL};
        uint32_t cols[3] = {0, 0, 0}, lens[3] = {0, 0, 0};
        int n = 0;
        for (char *q = p; *q && *q != '#';) {
            if (is_blank(*q)) {
                q++;
                continue;
            }
            char *start = q;
            while (*q && !is_blank(*q) && *q != '#') {
                q++;
            }
            if (n < 3) {
                names[n] = start;
                cols[n] = (uint32_t)(start - p) + 1;
                lens[n] = (uint32_t)(q - start);
            }
            n++;
            if (*q && *q != '#') {
                *q++ = '\0';
            } else if (*q == '#') {
                *q = '\0'; // a comment right after the name ends it
                break;
            }
        }
        dl_src_loc loc = {file, line, 0, 0};
        if (n == 1) {
            loc.col = cols[0];
            loc.len = lens[0];
            dl_diag(d, DL_SEV_ERROR, loc, "'%s' has no new name: a rule is FROM TO", names[0]);
            ok = false;
        } else if (n > 2) {
            loc.col = cols[2];
            loc.len = lens[2];
            dl_diag(d, DL_SEV_ERROR, loc,
                    "a third name on the line: a rule is FROM TO (two names, '#' starts a "
                    "comment)");
            ok = false;
        } else if (n == 2) {
            bool fine = true;
            for (int k = 0; k < 2 && fine; k++) {
                fine = check_star(names[k], (dl_src_loc){file, line, cols[k], lens[k]}, d);
            }
            size_t l0 = strlen(names[0]), l1 = strlen(names[1]);
            bool s0 = names[0][l0 - 1] == '*', s1 = names[1][l1 - 1] == '*';
            if (fine && s0 != s1) {
                int k = s0 ? 1 : 0; // the side without the '*'
                loc.col = cols[k];
                loc.len = lens[k];
                dl_diag(d, DL_SEV_ERROR, loc,
                        "'%s %s': a prefix rule ends in '*' on both sides (e.g. 'encoder.* enc.*')",
                        names[0], names[1]);
                fine = false;
            }
            if (fine) {
                out->rules[out->n] = (dlrt_load_rule){names[0], names[1]};
                out->st_rules[out->n] = (dl_st_rule){names[0], names[1]};
                out->n++;
            }
            ok = ok && fine;
        }
        p = next;
    }
    if (dl_diags_oom(d)) {
        return DL_ERR_NOMEM;
    }
    return ok ? DL_OK : DL_ERR_PARSE;
}
