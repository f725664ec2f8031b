// tools/cli.h — what the two command-line mains (dlcc, dlcc-cache) share: exit statuses, help
// tables, usage errors, the one argument scanner, and printing a diagnostics sink.
//
// Only the mains print and choose exit codes (STYLE.md 3.3); this file is part of them. Flags
// may be written `-o X`, `-oX` (short), `--out X` or `--out=X` (long); `--` ends the flags.
// Every message starts with the program name set once by cli_init ("dlcc", "dlcc-cache").
#ifndef DL_TOOLS_CLI_H
#define DL_TOOLS_CLI_H

#include "dl_base.h"
#include "dl_json.h"

#include <stdio.h>

// The exit statuses, documented in both mains' --help, README.md and docs/status.md alike.
enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3, EXIT_DIVERGED = 4 };

typedef struct cli_help {
    const char *name;
    const char *summary;
    const char *usage;
    const char *details;
    const char *more; // printed after `details` (C17 limits one literal to 4095 bytes), or NULL
} cli_help;

// Sets the program name and help table for every later call. Once, at the top of main; the
// arguments must outlive the process's use of this file.
void cli_init(const char *prog, const cli_help *helps, size_t n_helps);
const cli_help *cli_find_help(const char *name); // NULL for an unknown command
void cli_print_commands(FILE *f);                // "  NAME     SUMMARY" per command, then help
void cli_print_cmd_help(const cli_help *h);      // "usage: ...\n\nDETAILS" on stdout

// A usage error: "PROG[ CMD]: error: MSG", then the command's usage line and a pointer to its
// help (or to --help without a command). Returns EXIT_USAGE.
int cli_usage_error(const char *cmd, const char *fmt, ...) DL_PRINTF(2, 3);
// Any other error of a command: "PROG CMD: error: MSG". Returns `rc`.
int cli_cmd_error(const char *cmd, int rc, const char *fmt, ...) DL_PRINTF(3, 4);

// The scanner over one command's arguments.
typedef struct cli_args {
    const char *cmd; // for messages; NULL before the command
    int argc;
    char **argv;
    int i; // the next argument
    bool no_more_flags;
} cli_args;

// If argv[i] is flag `s` (short, may be NULL) or `l` (long, may be NULL), consumes it and its
// value when `has_value`. Returns 1 on match, 0 on no match, -1 (after printing) on a missing
// value.
int cli_take_flag(cli_args *a, const char *s, const char *l, bool has_value, const char **val);
// Long flag `l` with a non-empty value (a file or directory name, `what` says which): as
// cli_take_flag, and -1 (after printing) on an empty value.
int cli_take_name_flag(cli_args *a, const char *l, const char *what, const char **val);
// True when argv[i] is a flag (not "-" alone, not after "--").
bool cli_is_flag(const cli_args *a);
// An integer argument in [lo, hi]; false when malformed or out of range.
bool cli_parse_long(const char *s, long lo, long hi, long *out);
// "--help" or "-h" anywhere among a command's arguments (before "--").
bool cli_wants_help(int argc, char **argv);

// THE mapping of a library status to an exit status: out of memory is internal (3), every
// other failure is the input's (1).
int cli_status_exit(dl_status st);

// Renders everything in `d` (file:line:col with caret) to stderr, then clears it. False (after
// saying so) when rendering runs out of memory.
bool cli_flush_diags(dl_diags *d);

// Prints a finished JSON document and a newline on stdout and finalises it. EXIT_OK, or
// EXIT_INTERNAL (after saying so) when building it ran out of memory.
int cli_print_json(dl_json *j);

#endif
