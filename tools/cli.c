// tools/cli.c — the shared part of the command-line mains (tools/cli.h): help tables, usage
// errors, the argument scanner, exit statuses and printing diagnostics.
//
// The program name and help table are file-scope state set once by cli_init before anything
// else runs; the mains are single-threaded, and no library code reaches this file.
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "dlcc";
static const cli_help *helps;
static size_t n_helps;

void cli_init(const char *name, const cli_help *table, size_t n) {
    prog = name;
    helps = table;
    n_helps = n;
}

const cli_help *cli_find_help(const char *name) {
    for (size_t i = 0; i < n_helps; i++) {
        if (strcmp(helps[i].name, name) == 0) {
            return &helps[i];
        }
    }
    return NULL;
}

void cli_print_commands(FILE *f) {
    for (size_t i = 0; i < n_helps; i++) {
        fprintf(f, "  %-8s %s\n", helps[i].name, helps[i].summary);
    }
    fprintf(f, "  %-8s show help for a command (%s help COMMAND)\n", "help", prog);
}

void cli_print_cmd_help(const cli_help *h) {
    printf("usage: %s\n\n%s%s", h->usage, h->details, h->more ? h->more : "");
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s%s%s: error: ", prog, cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    const cli_help *h = cmd ? cli_find_help(cmd) : NULL;
    if (h) {
        fprintf(stderr, "usage: %s\n(run '%s help %s' for details)\n", h->usage, prog, cmd);
    } else {
        fprintf(stderr, "(run '%s --help' for a list of commands)\n", prog);
    }
    return EXIT_USAGE;
}

int cli_cmd_error(const char *cmd, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: error: ", prog, cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return rc;
}

int cli_take_flag(cli_args *a, const char *s, const char *l, bool has_value, const char **val) {
    const char *arg = a->argv[a->i];
    size_t ln = l ? strlen(l) : 0;
    const char *inline_val = NULL;
    bool match = false;
    if (s && strcmp(arg, s) == 0) {
        match = true;
    } else if (l && strcmp(arg, l) == 0) {
        match = true;
    } else if (has_value && l && strncmp(arg, l, ln) == 0 && arg[ln] == '=') {
        match = true;
        inline_val = arg + ln + 1;
    } else if (has_value && s && strncmp(arg, s, 2) == 0 && arg[2] != 0) {
        match = true;
        inline_val = arg + 2;
    }
    if (!match) {
        return 0;
    }
    a->i++;
    if (!has_value) {
        return 1;
    }
    if (inline_val) {
        *val = inline_val;
        return 1;
    }
    if (a->i >= a->argc) {
        cli_usage_error(a->cmd, "%s needs an argument", arg);
        return -1;
    }
    *val = a->argv[a->i++];
    return 1;
}

int cli_take_name_flag(cli_args *a, const char *l, const char *what, const char **val) {
    int r = cli_take_flag(a, NULL, l, true, val);
    if (r == 1 && !**val) {
        cli_usage_error(a->cmd, "%s needs %s", l, what);
        return -1;
    }
    return r;
}

bool cli_is_flag(const cli_args *a) {
    const char *arg = a->argv[a->i];
    return !a->no_more_flags && arg[0] == '-' && arg[1] != 0;
}

bool cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || errno == ERANGE || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            return false;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return true;
        }
    }
    return false;
}

int cli_status_exit(dl_status st) {
    return st == DL_OK ? EXIT_OK : st == DL_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
}

bool cli_flush_diags(dl_diags *d) {
    if (dl_diags_count(d) > 0) {
        char *text = NULL;
        if (dl_diags_render(d, &text) != DL_OK) {
            fprintf(stderr, "%s: error: out of memory rendering diagnostics\n", prog);
            return false;
        }
        fputs(text, stderr);
        free(text);
    }
    if (dl_diags_oom(d)) {
        fprintf(stderr, "%s: error: out of memory (some diagnostics were lost)\n", prog);
    }
    dl_diags_clear(d);
    return true;
}

int cli_print_json(dl_json *j) {
    DL_ASSERT(j->depth == 0);
    int rc = EXIT_OK;
    if (j->b.oom) {
        fprintf(stderr, "%s: error: out of memory\n", prog);
        rc = EXIT_INTERNAL;
    } else {
        printf("%s\n", j->b.data ? j->b.data : "");
    }
    dl_strbuf_fini(&j->b);
    return rc;
}
