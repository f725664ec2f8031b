// tests/codegen/ptxas_run.c — see ptxas_run.h. popen of a shell command line: the paths are
// the test's own temporary directory and file names, quoted.
#include "ptxas_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *ptxas_find(void) {
    const char *p = getenv("DLCC_PTXAS");
    p = p && p[0] ? p : "/usr/local/cuda/bin/ptxas";
    return access(p, X_OK) == 0 ? p : NULL;
}

int ptxas_run(const char *ptxas, const char *dir, const char *name, const char *sm, const char *ptx,
              char *log, size_t log_size) {
    char path[4200], cubin[4300], cmd[9200];
    log[0] = 0;
    snprintf(path, sizeof path, "%s/%s.ptx", dir, name);
    snprintf(cubin, sizeof cubin, "%s/%s.cubin", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(log, log_size, "cannot write %s", path);
        return -1;
    }
    bool wrote = fputs(ptx, f) >= 0;
    if (fclose(f) != 0 || !wrote) {
        snprintf(log, log_size, "cannot write %s", path);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' -arch=%s -v --warning-as-error '%s' -o '%s' 2>&1", ptxas, sm,
             path, cubin);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(log, log_size, "cannot run %s", ptxas);
        return -1;
    }
    size_t used = 0;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        size_t n = strlen(line);
        if (used + n < log_size) {
            memcpy(log + used, line, n + 1);
            used += n;
        }
    }
    int ws = pclose(p);
    if (!getenv("DLCC_TEST_KEEP_PTX")) {
        unlink(path);
        unlink(cubin);
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

size_t ptxas_count_entries(const char *ptx) {
    size_t n = 0;
    for (const char *s = strstr(ptx, ".entry "); s; s = strstr(s + 1, ".entry ")) {
        n++;
    }
    return n;
}
