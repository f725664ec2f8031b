// tools/dlcc_cache.c — the `dlcc-cache` command line: inspect and maintain the compilation cache
// (ls, stats, show, verify, prune, rm, clear, config, export, import) and explain why two models
// get different cache keys (explain).
//
// Like tools/dlcc.c this is the only layer that prints and chooses exit codes: 0 success, 1
// invalid input or a failed check (damaged cache, unknown key, bad model), 2 bad usage, 3
// internal error (out of memory). The store (cache/dl_cache.h) reports problems as warnings in a
// dl_diags sink; they are printed as "dlcc-cache: warning: ..." and never crash the tool. A cache
// that does not exist yet is not created by the read-only commands (ls, stats, show, verify,
// export): they report it as empty. Every command parses all of its arguments before opening the
// cache, so a usage error has no side effects. `--json` output is produced by the small emitter
// below (one JSON document on stdout, strings escaped, invalid UTF-8 replaced by U+FFFD).
#include "cli.h"
#include "dl_cache.h"
#include "dl_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef DL_VERSION
#    define DL_VERSION "0.0.0"
#endif
#ifndef DL_GIT_REV
#    define DL_GIT_REV "unknown"
#endif

// ---------------------------------------------------------------------------------------------
// Help texts

#define COMMON_OPTS                                                                                \
    "  --cache-dir DIR   the cache directory (default: $DLCC_CACHE_DIR, $XDG_CACHE_HOME/dlcc or\n" \
    "                    ~/.cache/dlcc)\n"
#define JSON_OPT "  --json            machine-readable output (one JSON document on stdout)\n"

static const cli_help helps[] = {
    {"ls", "list cached artifacts, most recently used first", "dlcc-cache ls [--json]",
     "Lists every entry: key prefix, model, the source file it was compiled from, its bound\n"
     "dims, target, artifact size, hits and when it was last used, most recently used first\n"
     "('-' for what an entry of an older cache or an imported one does not record). A cache\n"
     "that does not exist yet is reported as empty.\n"
     "\n" COMMON_OPTS JSON_OPT,
     NULL},
    {"stats", "entries, size, hit rate and compile time saved", "dlcc-cache stats [-z] [--json]",
     "Prints the number of entries, their total size, hits, misses, the hit rate, the compile\n"
     "time the hits saved, the size limit and the cache location.\n"
     "\n"
     "  -z, --zero        set hits, misses and compile time saved to zero (entries are kept);\n"
     "                    also 'dlcc-cache -z'\n" COMMON_OPTS JSON_OPT,
     NULL},
    {"show", "every metadata field of one entry", "dlcc-cache show KEY [--json]",
     "Shows one entry. KEY is its hex key or a unique prefix of at least 4 hex digits; an\n"
     "ambiguous prefix lists the matching keys and exits 1.\n"
     "\n" COMMON_OPTS JSON_OPT,
     NULL},
    {"verify", "check the database and every artifact's hash", "dlcc-cache verify [--json]",
     "Runs SQLite's integrity check and recomputes every stored artifact's hash. Prints\n"
     "'ok: N entries verified', or each problem and exits 1.\n"
     "\n" COMMON_OPTS JSON_OPT,
     NULL},
    {"prune", "remove old entries or shrink the cache",
     "dlcc-cache prune [--max-size SIZE] [--older-than DURATION] [--json]",
     "Removes entries not used for DURATION, then least recently used entries until the cache\n"
     "is at most SIZE (default: the configured limit). Entries in use by a running process are\n"
     "kept. Prints how many entries were removed and how much space was freed.\n"
     "\n"
     "  --max-size SIZE          e.g. 500M, 2G, 1048576 (K/M/G/T are powers of 1024); 0: no\n"
     "                           size limit (only --older-than removes entries)\n"
     "  --older-than DURATION    e.g. 30d, 12h, 90m, 45s\n" COMMON_OPTS JSON_OPT,
     NULL},
    {"rm", "remove one entry", "dlcc-cache rm KEY",
     "Removes the entry whose key is KEY or starts with KEY (at least 4 hex digits).\n"
     "\n" COMMON_OPTS,
     NULL},
    {"clear", "remove every entry", "dlcc-cache clear",
     "Removes every entry and prints how many were removed.\n\n" COMMON_OPTS, NULL},
    {"config", "show or set the size limit", "dlcc-cache config max-size [SIZE]",
     "Without SIZE prints the size limit; with SIZE (e.g. 500M, 2G) stores a new limit and\n"
     "evicts least recently used entries at the next store if the cache is larger. 0 means\n"
     "no limit. 'dlcc-cache -M SIZE' (as ccache) is the same as 'config max-size SIZE'. The\n"
     "environment variable DLCC_CACHE_MAX_SIZE (0: no limit) overrides the stored limit.\n"
     "\n" COMMON_OPTS,
     NULL},
    {"export", "write every entry to a directory", "dlcc-cache export DIR",
     "Writes one self-describing file per entry (KEY.dlcc) into DIR, created if needed.\n"
     "\n" COMMON_OPTS,
     NULL},
    {"import", "read entries written by export", "dlcc-cache import DIR [--trust]",
     "Adds the KEY.dlcc files in DIR to the cache. An artifact is code that dlcc loads, so\n"
     "only files you own that are not writable by group or others are read (symbolic links\n"
     "are not followed). Every file is checked like `verify` checks an entry (format,\n"
     "checksum, artifact hash, ELF header, metadata). A file failing a check is skipped with\n"
     "a warning naming it, the rest are imported, and the command exits 1.\n"
     "\n"
     "  --trust           also import files of other users or writable by them (and follow\n"
     "                    links): only for a directory whose writers you trust\n" COMMON_OPTS,
     NULL},
    {"explain", "why two models get the same or different cache keys",
     "dlcc-cache explain A.dlg B.dlg [-D NAME=INT]... [--cpu NAME] [--features F] [-O N] "
     "[--json]",
     "Loads both models with the same options and prints both cache keys and, for each key\n"
     "component (ir, dims, options, target, format, compiler), 'same' or 'differs'. When the\n"
     "IR differs, prints the first node that differs with its line in both files, and any\n"
     "difference in inputs, params, outputs and node count. Exits 0 whether or not the keys\n"
     "differ, 1 if a model has an error. Runs 'dlcc explain' (the keys need the compiler).\n"
     "\n"
     "  -D NAME=INT        bind dim NAME in both models\n"
     "  --cpu NAME         target CPU (default: this machine)\n"
     "  --features F       LLVM target features (default: the CPU's)\n"
     "  -O N               optimisation level 0-3 (default 3)\n" JSON_OPT,
     NULL},
};

static void print_main_help(FILE *f) {
    fprintf(f, "dlcc-cache %s — inspect and maintain the dlcc compilation cache\n\n", DL_VERSION);
    fprintf(f, "usage: dlcc-cache COMMAND [--cache-dir DIR] [--json] [ARGS...]\n\ncommands:\n");
    cli_print_commands(f);
    fprintf(f, "\noptions:\n" COMMON_OPTS JSON_OPT "  -h, --help        show this help\n"
               "  --version         show the version\n"
               "  -M SIZE           set the size limit (config max-size SIZE; 0: no limit)\n"
               "  -z                zero the statistics (stats -z)\n");
    fprintf(
        f, "\nenvironment: DLCC_CACHE=0 turns the cache off for dlcc, DLCC_CACHE_READONLY=1 makes\n"
           "it read-only (hits are used, nothing is stored), DLCC_CACHE_MAX_SIZE overrides the\n"
           "size limit (docs/cache.md)\n");
    fprintf(f, "\nexit status: 0 success, 1 invalid input or failed check, 2 bad usage, "
               "3 internal error\n");
}

// Prints the store's messages ("dlcc-cache: warning: ...") and clears the sink.
static void flush_store_diags(dl_diags *d) {
    if (!d) {
        return;
    }
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        const dl_diag_entry *e = dl_diags_get(d, i);
        const char *sev = e->sev == DL_SEV_ERROR     ? "error"
                          : e->sev == DL_SEV_WARNING ? "warning"
                                                     : "note";
        fprintf(stderr, "dlcc-cache: %s: %s\n", sev, e->msg);
    }
    if (dl_diags_oom(d)) {
        fprintf(stderr, "dlcc-cache: error: out of memory (some messages were lost)\n");
    }
    dl_diags_clear(d);
}

// ---------------------------------------------------------------------------------------------
// JSON output: base's writer (dl_json.h).

// ---------------------------------------------------------------------------------------------
// Sizes, durations and times

static void format_size(uint64_t n, char *buf, size_t size) {
    if (n < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", n);
    } else if (n < (uint64_t)1024 * 1024) {
        snprintf(buf, size, "%.1f KiB", (double)n / 1024.0);
    } else if (n < (uint64_t)1024 * 1024 * 1024) {
        snprintf(buf, size, "%.1f MiB", (double)n / (1024.0 * 1024.0));
    } else {
        snprintf(buf, size, "%.1f GiB", (double)n / (1024.0 * 1024.0 * 1024.0));
    }
}

// "30d", "12h", "90m", "45s" (also "2w"; a bare number is seconds) -> seconds.
static bool parse_duration(const char *s, int64_t *out) {
    char *end = NULL;
    if (!s || *s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE) {
        return false;
    }
    int64_t mul = 1;
    if (*end != 0) {
        if (end[1] != 0) {
            return false;
        }
        switch (*end) {
        case 's':
            mul = 1;
            break;
        case 'm':
            mul = 60;
            break;
        case 'h':
            mul = 3600;
            break;
        case 'd':
            mul = 86400;
            break;
        case 'w':
            mul = 7 * 86400;
            break;
        default:
            return false;
        }
    }
    if (v > INT64_MAX / mul) {
        return false;
    }
    *out = (int64_t)v * mul;
    return true;
}

static void format_iso(int64_t t, char *buf, size_t size) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (!localtime_r(&tt, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M", &tm) == 0) {
        snprintf(buf, size, "%" PRId64, t);
    }
}

// "just now", "42 s ago", "3 min ago", "5 h ago", "2 days ago", else the ISO date.
static void format_ago(int64_t t, int64_t now, char *buf, size_t size) {
    int64_t d = now - t;
    if (t <= 0) {
        snprintf(buf, size, "never");
    } else if (d < 0) {
        format_iso(t, buf, size); // clock skew: say when, not "in the future"
    } else if (d < 5) {
        snprintf(buf, size, "just now");
    } else if (d < 60) {
        snprintf(buf, size, "%" PRId64 " s ago", d);
    } else if (d < 3600) {
        snprintf(buf, size, "%" PRId64 " min ago", d / 60);
    } else if (d < 86400) {
        snprintf(buf, size, "%" PRId64 " h ago", d / 3600);
    } else if (d < 7 * 86400) {
        snprintf(buf, size, "%" PRId64 " day%s ago", d / 86400, d / 86400 == 1 ? "" : "s");
    } else {
        char iso[64];
        format_iso(t, iso, sizeof iso);
        iso[10] = 0; // the date is enough this far back
        snprintf(buf, size, "%s", iso);
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments: per command, the common flags (--cache-dir, --json) are taken wherever they appear.

typedef struct opts {
    const char *cmd;
    const char *cache_dir;
    bool json;
    DL_VEC(const char *) pos; // positional arguments
} opts;

// Extra per-command flags: a callback consumes argv[*i] (returns 1 taken, 0 unknown, -1 usage).
typedef int (*flag_fn)(void *ctx, cli_args *a);

// Parses the command's arguments: common flags, the command's own flags, positionals. Checks
// the positional count is within [min_pos, max_pos] and that --json is allowed.
static int parse_args(opts *o, int argc, char **argv, bool json_ok, size_t min_pos, size_t max_pos,
                      const char *pos_what, flag_fn fn, void *ctx) {
    cli_args a = {o->cmd, argc, argv, 0, false};
    while (a.i < argc) {
        const char *arg = argv[a.i];
        const char *val = NULL;
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (!DL_VEC_PUSH(&o->pos, arg)) {
                return EXIT_INTERNAL;
            }
            a.i++;
        } else if ((r = cli_take_flag(&a, NULL, "--cache-dir", true, &val)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
            if (!*val) {
                return cli_usage_error(o->cmd, "--cache-dir needs a directory");
            }
            o->cache_dir = val;
        } else if (cli_take_flag(&a, NULL, "--json", false, NULL) == 1) {
            if (!json_ok) {
                return cli_usage_error(o->cmd, "--json is not supported by this command");
            }
            o->json = true;
        } else if (fn && (r = fn(ctx, &a)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
        } else {
            return cli_usage_error(o->cmd, "unknown flag '%s'", arg);
        }
    }
    if (o->pos.len < min_pos) {
        return cli_usage_error(o->cmd, "missing %s", pos_what);
    }
    if (o->pos.len > max_pos) {
        return cli_usage_error(o->cmd, "unexpected argument '%s'", o->pos.data[max_pos]);
    }
    return EXIT_OK;
}

// A key prefix must be >= 4 and <= 32 hex digits. Lower-cases it into buf[33].
static int check_key_arg(const char *cmd, const char *key, char buf[33]) {
    size_t n = strlen(key);
    if (n < 4 || n > 32) {
        return cli_usage_error(cmd, "KEY must be 4 to 32 hex digits, got '%s'", key);
    }
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return cli_usage_error(cmd, "KEY must be hex digits, got '%s'", key);
        }
        buf[i] = c;
    }
    buf[n] = 0;
    return EXIT_OK;
}

// ---------------------------------------------------------------------------------------------
// Opening the cache

typedef struct cache_ctx {
    char *dir; // resolved directory (heap)
    dl_diags *d;
    dl_cache *c;
} cache_ctx;

static void cache_ctx_fini(cache_ctx *cx) {
    dl_cache_close(cx->c);
    flush_store_diags(cx->d);
    dl_diags_destroy(cx->d);
    free(cx->dir);
    memset(cx, 0, sizeof *cx);
}

// Resolves the directory and creates the diagnostics sink.
static int cache_resolve(const opts *o, cache_ctx *cx) {
    memset(cx, 0, sizeof *cx);
    if (dl_diags_create(&cx->d) != DL_OK) {
        return EXIT_INTERNAL;
    }
    if (o->cache_dir) {
        cx->dir = dl_mem_strdup(o->cache_dir);
        if (!cx->dir) {
            return EXIT_INTERNAL;
        }
        return EXIT_OK;
    }
    dl_status st = dl_cache_default_dir(&cx->dir);
    if (st != DL_OK) {
        flush_store_diags(cx->d);
        if (st == DL_ERR_NOMEM) {
            return EXIT_INTERNAL;
        }
        return cli_cmd_error(
            o->cmd, EXIT_INPUT,
            "no cache location: set DLCC_CACHE_DIR (or HOME), or pass --cache-dir");
    }
    return EXIT_OK;
}

// Whether the store's database exists in the resolved directory (read-only commands do not
// create a cache that is not there). When it does not, the directory itself must still pass the
// trust rules the store applies (ours, not writable by group or others): otherwise prints a
// warning and returns 1, as opening would. Returns 0 with *out_exists set otherwise.
static int cache_probe(const opts *o, const cache_ctx *cx, bool *out_exists) {
    *out_exists = true;
    size_t n = strlen(cx->dir) + sizeof "/cache.db";
    char *p = dl_mem_alloc(n);
    if (!p) {
        return EXIT_INTERNAL;
    }
    snprintf(p, n, "%s/cache.db", cx->dir);
    struct stat sb;
    bool ok = lstat(p, &sb) == 0;
    free(p);
    if (ok) {
        return EXIT_OK;
    }
    *out_exists = false;
    if (stat(cx->dir, &sb) != 0) {
        return EXIT_OK; // no directory either: simply no cache yet
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "dlcc-cache: warning: cache location %s is not a directory\n", cx->dir);
    } else if (sb.st_uid != geteuid()) {
        fprintf(stderr,
                "dlcc-cache: warning: refusing the cache directory %s: it belongs to another "
                "user (use your own directory: --cache-dir or DLCC_CACHE_DIR)\n",
                cx->dir);
    } else if ((sb.st_mode & 022) != 0) {
        fprintf(stderr,
                "dlcc-cache: warning: refusing the cache directory %s: it is writable by group "
                "or others (fix: chmod 700 %s)\n",
                cx->dir, cx->dir);
    } else {
        return EXIT_OK;
    }
    return cli_cmd_error(o->cmd, EXIT_INPUT, "cannot use the cache in %s", cx->dir);
}

// Opens the store; on failure prints its warning and returns 1 (3 when out of memory).
static int cache_open(const opts *o, cache_ctx *cx) {
    dl_status st = dl_cache_open(cx->dir, cx->d, &cx->c);
    if (st != DL_OK) {
        flush_store_diags(cx->d);
        if (st == DL_ERR_NOMEM) {
            return EXIT_INTERNAL;
        }
        return cli_cmd_error(o->cmd, EXIT_INPUT, "cannot use the cache in %s (%s)", cx->dir,
                             dl_status_str(st));
    }
    return EXIT_OK;
}

static int store_error(const opts *o, cache_ctx *cx, dl_status st, const char *what) {
    flush_store_diags(cx->d);
    if (st == DL_ERR_NOMEM) {
        fprintf(stderr, "dlcc-cache %s: error: out of memory\n", o->cmd);
        return EXIT_INTERNAL;
    }
    const char *ro = cx->c ? dl_cache_readonly_reason(cx->c) : NULL;
    if (ro) {
        return cli_cmd_error(o->cmd, EXIT_INPUT, "%s failed: the cache is read-only (%s)", what,
                             ro);
    }
    return cli_cmd_error(o->cmd, EXIT_INPUT, "%s failed (%s)", what, dl_status_str(st));
}

static void free_entries(dl_cache_entry *es, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dl_cache_entry_fini(&es[i]);
    }
    free(es);
}

// Resolves KEY (a prefix) to exactly one entry. 0 with *out filled; 1 (printed) when none or
// several match.
static int resolve_key(const opts *o, cache_ctx *cx, const char *prefix, dl_cache_entry *out) {
    dl_cache_entry *es = NULL;
    size_t n = 0;
    dl_status st = dl_cache_find_prefix(cx->c, prefix, &es, &n);
    if (st != DL_OK) {
        return store_error(o, cx, st, "lookup");
    }
    if (n == 0) {
        free_entries(es, n);
        return cli_cmd_error(o->cmd, EXIT_INPUT, "no entry matches '%s'", prefix);
    }
    if (n > 1) {
        fprintf(stderr, "dlcc-cache %s: error: '%s' is ambiguous: %zu entries match:\n", o->cmd,
                prefix, n);
        for (size_t i = 0; i < n; i++) {
            char hex[33];
            dl_hash128_hex(es[i].key, hex);
            fprintf(stderr, "  %s  %s\n", hex, es[i].model ? es[i].model : "");
        }
        fprintf(stderr, "(give more digits)\n");
        free_entries(es, n);
        return EXIT_INPUT;
    }
    *out = es[0]; // moves the strings
    free(es);
    return EXIT_OK;
}

// ---------------------------------------------------------------------------------------------
// ls

static void json_entry(dl_json *j, const dl_cache_entry *e) {
    char hex[33], bh[33];
    dl_hash128_hex(e->key, hex);
    dl_hash128_hex(e->blob_hash, bh);
    dl_json_obj(j);
    dl_json_kstr(j, "key", hex);
    dl_json_kstr(j, "model", e->model);
    dl_json_kstr(j, "target", e->target);
    dl_json_kstr(j, "compiler_version", e->compiler_version);
    dl_json_ku64(j, "size", e->size);
    dl_json_ku64(j, "source_size", e->source_size);
    dl_json_kf64(j, "compile_ms", e->compile_ms);
    dl_json_ki64(j, "created", e->created);
    dl_json_ki64(j, "last_used", e->last_used);
    dl_json_ki64(j, "hits", e->hits);
    dl_json_kstr(j, "blob_hash", bh);
    dl_json_kstr(j, "source", e->source ? e->source : "");
    dl_json_kstr(j, "dims", e->dims ? e->dims : "");
    dl_json_obj_end(j);
}

// A metadata string for a table: "-" when empty or unknown.
static const char *or_dash(const char *s) {
    return s && *s ? s : "-";
}

// The wider of `w` and the width of or_dash(s).
static int text_width(const char *s, int w) {
    int n = (int)strlen(or_dash(s));
    return n > w ? n : w;
}

static int cmd_ls(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, true, 0, 0, "", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    cache_ctx cx;
    dl_cache_entry *es = NULL;
    size_t n = 0;
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (exists) {
        if ((rc = cache_open(o, &cx)) != EXIT_OK) {
            goto out;
        }
        dl_status st = dl_cache_list(cx.c, &es, &n);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "listing");
            goto out;
        }
    }
    if (o->json) {
        dl_json j = {0};
        dl_json_obj(&j);
        dl_json_kstr(&j, "cache_dir", cx.dir);
        dl_json_key(&j, "entries");
        dl_json_arr(&j);
        for (size_t i = 0; i < n; i++) {
            json_entry(&j, &es[i]);
        }
        dl_json_arr_end(&j);
        dl_json_obj_end(&j);
        rc = cli_print_json(&j);
        goto out;
    }
    if (n == 0) {
        printf("the cache is empty (%s)\n", cx.dir);
        goto out;
    }
    int64_t now = (int64_t)time(NULL);
    int wm = 5, ws = 6, wd = 4, wt = 6;
    for (size_t i = 0; i < n; i++) {
        wm = text_width(es[i].model, wm);
        ws = text_width(es[i].source, ws);
        wd = text_width(es[i].dims, wd);
        wt = text_width(es[i].target, wt);
    }
    printf("%-12s  %-*s  %-*s  %-*s  %-*s  %10s  %6s  %s\n", "KEY", wm, "MODEL", ws, "SOURCE", wd,
           "DIMS", wt, "TARGET", "SIZE", "HITS", "LAST USED");
    for (size_t i = 0; i < n; i++) {
        char hex[33], size[32], ago[64];
        dl_hash128_hex(es[i].key, hex);
        hex[12] = 0;
        format_size(es[i].size, size, sizeof size);
        format_ago(es[i].last_used, now, ago, sizeof ago);
        printf("%-12s  %-*s  %-*s  %-*s  %-*s  %10s  %6" PRId64 "  %s\n", hex, wm,
               or_dash(es[i].model), ws, or_dash(es[i].source), wd, or_dash(es[i].dims), wt,
               or_dash(es[i].target), size, es[i].hits, ago);
    }
out:
    free_entries(es, n);
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// stats

static int stats_flag(void *ctx, cli_args *a) {
    if (cli_take_flag(a, "-z", "--zero", false, NULL) == 1) {
        *(bool *)ctx = true;
        return 1;
    }
    return 0;
}

// "2.0 GiB (2147483648 bytes)", or "no limit" for 0.
static void format_limit(uint64_t n, char *buf, size_t size) {
    if (n == 0) {
        snprintf(buf, size, "no limit");
        return;
    }
    char hs[32];
    format_size(n, hs, sizeof hs);
    snprintf(buf, size, "%s (%" PRIu64 " bytes)", hs, n);
}

static int cmd_stats(opts *o, int argc, char **argv) {
    bool zero = false;
    int rc = parse_args(o, argc, argv, true, 0, 0, "", stats_flag, &zero);
    if (rc != EXIT_OK) {
        return rc;
    }
    if (zero && o->json) {
        return cli_usage_error(o->cmd, "-z prints no statistics: --json does not apply");
    }
    cache_ctx cx;
    dl_cache_stats s;
    memset(&s, 0, sizeof s);
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (zero) { // like ccache -z: the counters restart, the entries stay
        if (exists) {
            if ((rc = cache_open(o, &cx)) != EXIT_OK) {
                goto out;
            }
            dl_status st = dl_cache_stats_zero(cx.c);
            if (st != DL_OK) {
                rc = store_error(o, &cx, st, "zeroing the statistics");
                goto out;
            }
        }
        printf("statistics zeroed (%s)\n", cx.dir);
        goto out;
    }
    if (exists) {
        if ((rc = cache_open(o, &cx)) != EXIT_OK) {
            goto out;
        }
        dl_status st = dl_cache_stats_get(cx.c, &s);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "reading the statistics");
            goto out;
        }
    } else {
        // No database yet: the limit is what a new cache would get.
        s.max_size = (uint64_t)2 << 30;
        const char *env = getenv("DLCC_CACHE_MAX_SIZE");
        uint64_t v;
        if (env && dl_cache_parse_size(env, &v)) {
            s.max_size = v; // 0: no limit, as the store reads it
        }
    }
    int64_t lookups = s.hits + s.misses;
    double rate = lookups > 0 ? (double)s.hits / (double)lookups : 0.0;
    if (o->json) {
        dl_json j = {0};
        dl_json_obj(&j);
        dl_json_kstr(&j, "cache_dir", cx.dir);
        dl_json_kbool(&j, "exists", exists);
        dl_json_ki64(&j, "entries", s.entries);
        dl_json_ku64(&j, "bytes", s.bytes);
        dl_json_ki64(&j, "hits", s.hits);
        dl_json_ki64(&j, "misses", s.misses);
        dl_json_kf64(&j, "hit_rate", rate);
        dl_json_kf64(&j, "compile_ms_saved", s.compile_ms_saved);
        dl_json_ku64(&j, "max_size", s.max_size);
        dl_json_obj_end(&j);
        rc = cli_print_json(&j);
        goto out;
    }
    char bytes[32], lim[64];
    format_size(s.bytes, bytes, sizeof bytes);
    format_limit(s.max_size, lim, sizeof lim);
    if (!exists) {
        printf("the cache is empty (no cache in %s yet)\n", cx.dir);
    }
    printf("location:           %s\n", cx.dir);
    if (cx.c && dl_cache_readonly_reason(cx.c)) {
        printf("read-only:          %s\n", dl_cache_readonly_reason(cx.c));
    }
    printf("entries:            %" PRId64 "\n", s.entries);
    printf("size:               %s (%" PRIu64 " bytes)\n", bytes, s.bytes);
    printf("size limit:         %s%s\n", lim,
           getenv("DLCC_CACHE_MAX_SIZE") ? " (from DLCC_CACHE_MAX_SIZE)" : "");
    printf("hits:               %" PRId64 "\n", s.hits);
    printf("misses:             %" PRId64 "\n", s.misses);
    if (lookups > 0) {
        printf("hit rate:           %.1f %%\n", 100.0 * rate);
    } else {
        printf("hit rate:           - (no lookups yet)\n");
    }
    if (s.compile_ms_saved >= 1000.0) {
        printf("compile time saved: %.1f s\n", s.compile_ms_saved / 1000.0);
    } else {
        printf("compile time saved: %.0f ms\n", s.compile_ms_saved);
    }
out:
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// show

static int cmd_show(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, true, 1, 1, "KEY", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    char prefix[33];
    if ((rc = check_key_arg(o->cmd, o->pos.data[0], prefix)) != EXIT_OK) {
        return rc;
    }
    cache_ctx cx;
    dl_cache_entry e;
    memset(&e, 0, sizeof e);
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (!exists) {
        rc = cli_cmd_error(o->cmd, EXIT_INPUT, "no entry matches '%s' (the cache in %s is empty)",
                           prefix, cx.dir);
        goto out;
    }
    if ((rc = cache_open(o, &cx)) != EXIT_OK || (rc = resolve_key(o, &cx, prefix, &e)) != EXIT_OK) {
        goto out;
    }
    if (o->json) {
        dl_json j = {0};
        json_entry(&j, &e);
        rc = cli_print_json(&j);
        goto out;
    }
    char hex[33], bh[33], size[32], src[32], created[64], used[64], ago[64];
    dl_hash128_hex(e.key, hex);
    dl_hash128_hex(e.blob_hash, bh);
    format_size(e.size, size, sizeof size);
    format_size(e.source_size, src, sizeof src);
    format_iso(e.created, created, sizeof created);
    format_iso(e.last_used, used, sizeof used);
    format_ago(e.last_used, (int64_t)time(NULL), ago, sizeof ago);
    printf("key:              %s\n", hex);
    printf("model:            %s\n", e.model ? e.model : "");
    printf("source:           %s\n", or_dash(e.source));
    printf("dims:             %s\n", or_dash(e.dims));
    printf("target:           %s\n", e.target ? e.target : "");
    printf("compiler version: %s\n", e.compiler_version ? e.compiler_version : "");
    printf("size:             %s (%" PRIu64 " bytes)\n", size, e.size);
    printf("source size:      %s (%" PRIu64 " bytes of canonical IR)\n", src, e.source_size);
    printf("compile time:     %.1f ms\n", e.compile_ms);
    printf("created:          %s\n", created);
    printf("last used:        %s (%s)\n", used, ago);
    printf("hits:             %" PRId64 "\n", e.hits);
    printf("blob hash:        %s\n", bh);
out:
    dl_cache_entry_fini(&e);
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// verify

static int cmd_verify(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, true, 0, 0, "", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    cache_ctx cx;
    int64_t bad = 0;
    dl_cache_stats s;
    memset(&s, 0, sizeof s);
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    dl_status st = DL_OK;
    if (exists) {
        st = dl_cache_open(cx.dir, cx.d, &cx.c);
        if (st == DL_ERR_NOMEM) {
            rc = EXIT_INTERNAL;
            goto out;
        }
        if (st == DL_OK) {
            st = dl_cache_stats_get(cx.c, &s);
        }
        if (st == DL_OK) {
            st = dl_cache_verify(cx.c, cx.d, &bad);
        }
        if (st == DL_ERR_NOMEM) {
            rc = EXIT_INTERNAL;
            goto out;
        }
        if (st != DL_OK && bad == 0) {
            bad = 1; // the database could not be opened or checked at all
        }
    }
    if (o->json) {
        dl_json j = {0};
        dl_json_obj(&j);
        dl_json_kstr(&j, "cache_dir", cx.dir);
        dl_json_kbool(&j, "ok", bad == 0 && st == DL_OK);
        dl_json_ki64(&j, "entries", s.entries);
        dl_json_ki64(&j, "problems_found", bad);
        dl_json_key(&j, "problems");
        dl_json_arr(&j);
        for (size_t i = 0; i < dl_diags_count(cx.d); i++) {
            dl_json_str(&j, dl_diags_get(cx.d, i)->msg);
        }
        if (st != DL_OK && dl_diags_count(cx.d) == 0) {
            dl_json_str(&j, dl_status_str(st));
        }
        dl_json_arr_end(&j);
        dl_json_obj_end(&j);
        dl_diags_clear(cx.d);
        rc = cli_print_json(&j);
        if (rc == EXIT_OK && (bad != 0 || st != DL_OK)) {
            rc = EXIT_INPUT;
        }
        goto out;
    }
    if (bad == 0 && st == DL_OK) {
        flush_store_diags(cx.d);
        printf("ok: %" PRId64 " entries verified%s\n", s.entries,
               exists ? "" : " (no cache here yet)");
        goto out;
    }
    for (size_t i = 0; i < dl_diags_count(cx.d); i++) {
        printf("problem: %s\n", dl_diags_get(cx.d, i)->msg);
    }
    if (st != DL_OK && dl_diags_count(cx.d) == 0) {
        printf("problem: the cache in %s cannot be checked (%s)\n", cx.dir, dl_status_str(st));
    }
    dl_diags_clear(cx.d);
    // `clear` starts over from damage, but not from a refused (untrusted, locked, newer) cache:
    // it is refused the same way, and the problem's own message says what to do.
    bool refused = st != DL_OK && !cx.c && st != DL_ERR_CORRUPT;
    printf("verify: %" PRId64 " problem%s found in %s (%s)\n", bad, bad == 1 ? "" : "s", cx.dir,
           refused ? "the problem says what to do" : "run 'dlcc-cache clear' to start over");
    rc = EXIT_INPUT;
out:
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// prune

typedef struct prune_flags {
    const char *max_size, *older_than;
} prune_flags;

static int prune_flag(void *ctx, cli_args *a) {
    prune_flags *p = ctx;
    int r = cli_take_flag(a, NULL, "--max-size", true, &p->max_size);
    if (r == 0) {
        r = cli_take_flag(a, NULL, "--older-than", true, &p->older_than);
    }
    return r;
}

static int cmd_prune(opts *o, int argc, char **argv) {
    prune_flags pf = {0};
    int rc = parse_args(o, argc, argv, true, 0, 0, "", prune_flag, &pf);
    if (rc != EXIT_OK) {
        return rc;
    }
    uint64_t max_size = 0;
    int64_t older = -1;
    if (pf.max_size && !dl_cache_parse_size(pf.max_size, &max_size)) {
        return cli_usage_error(o->cmd, "--max-size expects a size like 500M or 2G, got '%s'",
                               pf.max_size);
    }
    if (pf.max_size && max_size == 0) {
        max_size = UINT64_MAX; // 0: no size limit (dl_cache_prune's 0 is the configured one)
    }
    if (pf.older_than && !parse_duration(pf.older_than, &older)) {
        return cli_usage_error(
            o->cmd, "--older-than expects a duration like 30d, 12h, 90m or 45s, got '%s'",
            pf.older_than);
    }
    cache_ctx cx;
    int64_t removed = 0;
    uint64_t freed = 0;
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (exists) {
        if ((rc = cache_open(o, &cx)) != EXIT_OK) {
            goto out;
        }
        dl_status st = dl_cache_prune(cx.c, max_size, older, &removed, &freed);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "pruning");
            goto out;
        }
    }
    if (o->json) {
        dl_json j = {0};
        dl_json_obj(&j);
        dl_json_ki64(&j, "removed", removed);
        dl_json_ku64(&j, "freed", freed);
        dl_json_obj_end(&j);
        rc = cli_print_json(&j);
        goto out;
    }
    char fs[32];
    format_size(freed, fs, sizeof fs);
    printf("removed %" PRId64 " entr%s, freed %s\n", removed, removed == 1 ? "y" : "ies", fs);
out:
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// rm, clear

static int cmd_rm(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, false, 1, 1, "KEY", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    char prefix[33];
    if ((rc = check_key_arg(o->cmd, o->pos.data[0], prefix)) != EXIT_OK) {
        return rc;
    }
    cache_ctx cx;
    dl_cache_entry e;
    memset(&e, 0, sizeof e);
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (!exists) {
        rc = cli_cmd_error(o->cmd, EXIT_INPUT, "no entry matches '%s' (the cache in %s is empty)",
                           prefix, cx.dir);
        goto out;
    }
    if ((rc = cache_open(o, &cx)) != EXIT_OK || (rc = resolve_key(o, &cx, prefix, &e)) != EXIT_OK) {
        goto out;
    }
    bool removed = false;
    dl_status st = dl_cache_remove(cx.c, e.key, &removed);
    if (st != DL_OK) {
        rc = store_error(o, &cx, st, "removing");
        goto out;
    }
    char hex[33], size[32];
    dl_hash128_hex(e.key, hex);
    format_size(e.size, size, sizeof size);
    if (!removed) {
        rc = cli_cmd_error(o->cmd, EXIT_INPUT, "%s was not removed (in use by a running process?)",
                           hex);
        goto out;
    }
    printf("removed %s (%s, %s)\n", hex, e.model ? e.model : "", size);
out:
    dl_cache_entry_fini(&e);
    cache_ctx_fini(&cx);
    return rc;
}

static int cmd_clear(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, false, 0, 0, "", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    cache_ctx cx;
    int64_t removed = 0;
    uint64_t bytes = 0;
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (exists) {
        dl_status ost = dl_cache_open(cx.dir, cx.d, &cx.c);
        bool gone = false;
        if (ost == DL_ERR_CORRUPT && dl_cache_remove_damaged(cx.dir, &gone) == DL_OK && gone) {
            // The store refuses a damaged database (its warning says to run `clear`): clearing
            // means starting afresh, so the files go and a new database is created.
            dl_diags_clear(cx.d);
            printf("removed the damaged cache database in %s\n", cx.dir);
            ost = dl_cache_open(cx.dir, cx.d, &cx.c);
        }
        if (ost != DL_OK) {
            flush_store_diags(cx.d);
            rc = ost == DL_ERR_NOMEM
                     ? EXIT_INTERNAL
                     : cli_cmd_error(o->cmd, EXIT_INPUT, "cannot use the cache in %s (%s)", cx.dir,
                                     dl_status_str(ost));
            goto out;
        }
        dl_cache_stats s;
        if (dl_cache_stats_get(cx.c, &s) == DL_OK) {
            bytes = s.bytes;
        }
        dl_status st = dl_cache_clear(cx.c, &removed);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "clearing");
            goto out;
        }
    }
    char fs[32];
    format_size(bytes, fs, sizeof fs);
    printf("removed %" PRId64 " entr%s, freed %s\n", removed, removed == 1 ? "y" : "ies", fs);
out:
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// config

static int cmd_config(opts *o, int argc, char **argv) {
    int rc = parse_args(o, argc, argv, false, 1, 2, "setting name (max-size)", NULL, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    if (strcmp(o->pos.data[0], "max-size") != 0) {
        return cli_usage_error(o->cmd, "unknown setting '%s' (known: max-size)", o->pos.data[0]);
    }
    uint64_t v = 0;
    bool set = o->pos.len == 2;
    if (set && !dl_cache_parse_size(o->pos.data[1], &v)) {
        return cli_usage_error(o->cmd,
                               "max-size expects a size like 500M or 2G (0: no limit), got '%s'",
                               o->pos.data[1]);
    }
    cache_ctx cx;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_open(o, &cx)) != EXIT_OK) {
        goto out;
    }
    dl_status st;
    char hs[64];
    if (set) {
        st = dl_cache_set_max_size(cx.c, v);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "setting max-size");
            goto out;
        }
        format_limit(v, hs, sizeof hs);
        printf("max-size set to %s\n", hs);
    } else {
        dl_cache_stats s;
        st = dl_cache_stats_get(cx.c, &s);
        if (st != DL_OK) {
            rc = store_error(o, &cx, st, "reading max-size");
            goto out;
        }
        format_limit(s.max_size, hs, sizeof hs);
        printf("max-size: %s\n", hs);
    }
    const char *env = getenv("DLCC_CACHE_MAX_SIZE");
    if (env) {
        printf("note: DLCC_CACHE_MAX_SIZE=%s is set and overrides the stored limit\n", env);
    } else {
        printf("note: the environment variable DLCC_CACHE_MAX_SIZE overrides this limit\n");
    }
out:
    cache_ctx_fini(&cx);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// export, import

static int import_flag(void *ctx, cli_args *a) {
    if (cli_take_flag(a, NULL, "--trust", false, NULL) == 1) {
        *(bool *)ctx = true;
        return 1;
    }
    return 0;
}

static int cmd_export_import(opts *o, int argc, char **argv, bool is_import) {
    bool trust = false;
    int rc = parse_args(o, argc, argv, false, 1, 1, "DIR", is_import ? import_flag : NULL, &trust);
    if (rc != EXIT_OK) {
        return rc;
    }
    const char *dir = o->pos.data[0];
    cache_ctx cx;
    int64_t n = 0, skipped = 0;
    bool exists = false;
    if ((rc = cache_resolve(o, &cx)) != EXIT_OK || (rc = cache_probe(o, &cx, &exists)) != EXIT_OK) {
        goto out;
    }
    if (!is_import && !exists) {
        printf("exported 0 entries to %s (the cache in %s is empty)\n", dir, cx.dir);
        goto out;
    }
    if (is_import) {
        struct stat sb;
        int serr = stat(dir, &sb) != 0 ? errno : 0;
        if (serr != 0 || !S_ISDIR(sb.st_mode)) {
            rc = cli_cmd_error(o->cmd, EXIT_INPUT, "%s: %s", dir,
                               serr != 0 ? strerror(serr) : "not a directory");
            goto out;
        }
    } else if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        rc = cli_cmd_error(o->cmd, EXIT_INPUT, "cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    if ((rc = cache_open(o, &cx)) != EXIT_OK) {
        goto out;
    }
    dl_status st = is_import ? dl_cache_import(cx.c, dir, trust, cx.d, &n, &skipped)
                             : dl_cache_export(cx.c, dir, cx.d, &n);
    bool warned = dl_diags_count(cx.d) > 0;
    flush_store_diags(cx.d);
    if (st != DL_OK) {
        rc = store_error(o, &cx, st, is_import ? "import" : "export");
        goto out;
    }
    printf("%s %" PRId64 " entr%s %s %s%s\n", is_import ? "imported" : "exported", n,
           n == 1 ? "y" : "ies", is_import ? "from" : "to", dir,
           warned && !skipped ? " (see the warnings above)" : "");
    if (skipped) {
        // The good files are in; the command still fails, so a script notices the bad ones.
        rc =
            cli_cmd_error(o->cmd, EXIT_INPUT, "skipped %" PRId64 " file%s (see the warnings above)",
                          skipped, skipped == 1 ? "" : "s");
    }
out:
    cache_ctx_fini(&cx);
    return rc;
}

static int cmd_export(opts *o, int argc, char **argv) {
    return cmd_export_import(o, argc, argv, false);
}

static int cmd_import(opts *o, int argc, char **argv) {
    return cmd_export_import(o, argc, argv, true);
}

// ---------------------------------------------------------------------------------------------
// explain: runs `dlcc explain` with the same arguments. The keys need the compiler (parsing,
// shape inference, the target and compiler parts of the key), which this tool does not link;
// the dlcc next to this executable is used (the build tree and an install keep them together),
// else the one on PATH.

static int cmd_explain(opts *o, int argc, char **argv) {
    char **args = dl_mem_calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        return cli_cmd_error(o->cmd, EXIT_INTERNAL, "out of memory");
    }
    size_t n = 0;
    args[n++] = (char *)(uintptr_t)"dlcc";
    args[n++] = (char *)(uintptr_t)"explain";
    if (o->json) { // given before the command: dlcc-cache --json explain A B
        args[n++] = (char *)(uintptr_t)"--json";
    }
    for (int i = 0; i < argc; i++) {
        args[n++] = argv[i];
    }
    char self[4096], path[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(path, sizeof path, "%s/dlcc", self);
            fflush(stdout);
            execv(path, args); // returns only on failure: try PATH
        }
    }
    fflush(stdout);
    execvp("dlcc", args);
    int e = errno;
    free(args);
    return cli_cmd_error(o->cmd, EXIT_INTERNAL,
                         "cannot run dlcc, which explain needs (it parses the models and computes "
                         "their keys): %s",
                         strerror(e));
}

// ---------------------------------------------------------------------------------------------

typedef int (*cmd_fn)(opts *o, int argc, char **argv);

static const struct {
    const char *name;
    cmd_fn fn;
} commands[] = {
    {"ls", cmd_ls},         {"stats", cmd_stats},     {"show", cmd_show},
    {"verify", cmd_verify}, {"prune", cmd_prune},     {"rm", cmd_rm},
    {"clear", cmd_clear},   {"config", cmd_config},   {"export", cmd_export},
    {"import", cmd_import}, {"explain", cmd_explain},
};

int main(int argc, char **argv) {
    cli_init("dlcc-cache", helps, DL_ARRAY_LEN(helps));
    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    // Common flags may also come before the command: dlcc-cache --cache-dir D ls.
    opts o;
    memset(&o, 0, sizeof o);
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        const char *arg = argv[first];
        const char *val = NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_main_help(stdout);
            return EXIT_OK;
        }
        if (strcmp(arg, "--version") == 0) {
            printf("dlcc-cache %s (%s)\n", DL_VERSION, DL_GIT_REV);
            return EXIT_OK;
        }
        if (strcmp(arg, "--json") == 0) {
            o.json = true;
            first++;
            continue;
        }
        // ccache's spellings: -M SIZE (config max-size SIZE) and -z (stats -z), with the
        // arguments after them given to that command.
        if (strcmp(arg, "-M") == 0 || strcmp(arg, "-z") == 0) {
            bool is_m = arg[1] == 'M';
            if (is_m && first + 1 >= argc) {
                return cli_usage_error(NULL, "-M needs a size (e.g. 5G; 0: no limit)");
            }
            DL_VEC(char *) args = {0};
            bool ok = !is_m || DL_VEC_PUSH(&args, "max-size");
            for (int k = first + 1; ok && k < argc; k++) {
                ok = DL_VEC_PUSH(&args, argv[k]);
            }
            ok = ok && (is_m || DL_VEC_PUSH(&args, "-z"));
            int rc = EXIT_INTERNAL;
            if (ok) {
                o.cmd = is_m ? "config" : "stats";
                rc = is_m ? cmd_config(&o, (int)args.len, args.data)
                          : cmd_stats(&o, (int)args.len, args.data);
            }
            free(args.data);
            free(o.pos.data);
            return rc;
        }
        cli_args a = {NULL, argc, argv, first, false};
        int r = cli_take_flag(&a, NULL, "--cache-dir", true, &val);
        first = a.i;
        if (r < 0) {
            return EXIT_USAGE;
        }
        if (r == 0) {
            return cli_usage_error(NULL, "unknown option '%s'", arg);
        }
        o.cache_dir = val;
    }
    if (first >= argc) {
        return cli_usage_error(NULL, "no command");
    }
    const char *cmd = argv[first];
    if (strcmp(cmd, "help") == 0) {
        if (first + 1 >= argc) {
            print_main_help(stdout);
            return EXIT_OK;
        }
        const cli_help *h = cli_find_help(argv[first + 1]);
        if (!h) {
            return cli_usage_error(NULL, "no help for unknown command '%s'", argv[first + 1]);
        }
        cli_print_cmd_help(h);
        return EXIT_OK;
    }
    for (size_t i = 0; i < DL_ARRAY_LEN(commands); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            int cargc = argc - first - 1;
            char **cargv = argv + first + 1;
            if (cli_wants_help(cargc, cargv)) {
                const cli_help *h = cli_find_help(cmd);
                cli_print_cmd_help(h);
                return EXIT_OK;
            }
            o.cmd = cmd;
            bool json_ok = strcmp(cmd, "ls") == 0 || strcmp(cmd, "stats") == 0 ||
                           strcmp(cmd, "show") == 0 || strcmp(cmd, "verify") == 0 ||
                           strcmp(cmd, "prune") == 0 || strcmp(cmd, "explain") == 0;
            if (o.json && !json_ok) {
                return cli_usage_error(cmd, "--json is not supported by this command");
            }
            int rc = commands[i].fn(&o, cargc, cargv);
            free(o.pos.data);
            return rc;
        }
    }
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
