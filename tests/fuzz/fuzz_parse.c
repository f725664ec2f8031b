// tests/fuzz/fuzz_parse.c — libFuzzer entry point for the .dlg parser: any bytes go to
// dl_fe_parse, then everything is destroyed (ASan reports leaks, UBSan undefined behaviour).
// Built with DL_FUZZ_REPLAY_MAIN it is a plain program that feeds every file in the given
// directories (or files) to the same entry point: the ctest over tests/fuzz/corpus, and the way
// to replay a crash file without libFuzzer.
#include "dl_fe.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return 0;
    }
    dl_ir_module *m = NULL;
    dl_status st = dl_fe_parse("fuzz.dlg", (const char *)data, size, d, &m);
    // Rendering walks every location against the source text: exercise it too.
    char *text = NULL;
    if (dl_diags_render(d, &text) == DL_OK) {
        free(text);
    }
    if (st == DL_OK && !m) {
        abort(); // contract: DL_OK hands back a module
    }
    if (st != DL_OK && m) {
        abort(); // contract: errors hand back NULL
    }
    if (st == DL_ERR_PARSE && dl_diags_error_count(d) == 0) {
        abort(); // a parse failure always says why
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return 0;
}

#ifdef DL_FUZZ_REPLAY_MAIN
#    include <dirent.h>
#    include <sys/stat.h>

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
        DIR *dir = opendir(argv[a]);
        if (!dir) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            size_t need = strlen(argv[a]) + strlen(e->d_name) + 2;
            char *path = malloc(need);
            if (!path) {
                closedir(dir);
                return 1;
            }
            snprintf(path, need, "%s/%s", argv[a], e->d_name);
            bad += run_file(path);
            n++;
            free(path);
        }
        closedir(dir);
    }
    printf("%d inputs replayed, %d unreadable\n", n, bad);
    return (bad || n == 0) ? 1 : 0;
}
#endif
