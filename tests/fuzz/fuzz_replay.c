// tests/fuzz/fuzz_replay.c — a plain main() for the fuzz targets other than fuzz_parse: feeds
// every file in the given directories (or the given files) to the target's
// LLVMFuzzerTestOneInput, so ctest replays each seed corpus with any compiler and a crash file
// can be replayed without libFuzzer. Linked into the <target>_replay executables.
#include "dl_base.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    if (dl_read_file(path, &buf, &len) != DL_OK) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    return 0;
}

static int name_cmp(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *e) {
    return e->d_name[0] != '.';
}

int main(int argc, char **argv) {
    int n = 0, bad = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "cannot stat %s\n", argv[a]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            bad += run_file(argv[a]);
            n++;
            continue;
        }
        struct dirent **ents = NULL;
        int ne = scandir(argv[a], &ents, not_hidden, name_cmp);
        if (ne < 0) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        for (int i = 0; i < ne; i++) {
            size_t need = strlen(argv[a]) + strlen(ents[i]->d_name) + 2;
            char *path = malloc(need);
            if (path) {
                snprintf(path, need, "%s/%s", argv[a], ents[i]->d_name);
                // Printed first so that a crash names its input.
                fprintf(stderr, "replay %s\n", path);
                bad += run_file(path);
                n++;
            } else {
                bad++;
            }
            free(path);
            free(ents[i]);
        }
        free(ents);
    }
    printf("%d inputs replayed, %d unreadable\n", n, bad);
    return (bad || n == 0) ? 1 : 0;
}
