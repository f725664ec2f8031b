// tests/fuzz/fuzz_onnx.c — libFuzzer target for the ONNX importer (frontend/onnx_import.c): any
// bytes are imported from memory (dl_fe__import_onnx_mem), once with initializers as params
// and once as consts. When an import succeeds, the module goes the way `dlcc import` sends it:
// printed as .dlg text, which must parse back (the importer must never produce text that the
// parser rejects) to a module that prints as the same text, then shape inference and the
// verifier, as `dlcc check` runs them.
// Contracts checked: DL_OK hands back a module, a failure hands back none and says why.
// fuzz_onnx_replay (tests/fuzz/fuzz_replay.c) runs the seed corpus tests/fuzz/corpus_onnx.
#include "dl_fe.h"
#include "dl_pass.h"
#include "fe_onnx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void import_once(const uint8_t *data, size_t size, bool as_consts) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return;
    }
    dl_ir_module *m = NULL;
    dl_status st = dl_fe__import_onnx_mem("fuzz.onnx", data, size, as_consts, d, &m);
    char *text = NULL;
    if (dl_diags_render(d, &text) == DL_OK) {
        free(text);
        text = NULL;
    }
    if ((st == DL_OK) != (m != NULL)) {
        abort(); // contract: DL_OK and only DL_OK hands back a module
    }
    if (st != DL_OK && st != DL_ERR_NOMEM && dl_diags_error_count(d) == 0) {
        abort(); // a failure always says why
    }
    if (st == DL_OK && dl_ir_print(m, &text) == DL_OK) {
        dl_ir_module *m2 = NULL;
        dl_diags_clear(d);
        if (dl_fe_parse("fuzz.dlg", text, strlen(text), d, &m2) != DL_OK) {
            char *msg = NULL;
            if (dl_diags_render(d, &msg) == DL_OK) {
                fprintf(stderr, "printed text does not parse:\n%s\n%s", msg, text);
                free(msg);
            }
            abort();
        }
        // The printed text is canonical: printing what it parses to gives it back.
        char *text2 = NULL;
        if (dl_ir_print(m2, &text2) == DL_OK && strcmp(text, text2) != 0) {
            fprintf(stderr, "print(parse(text)) differs from text:\n%s---\n%s", text, text2);
            abort();
        }
        free(text2);
        if (dl_pass_shape(m2, d) == DL_OK && dl_ir_verify(m2, d) != DL_OK &&
            dl_diags_error_count(d) == 0) {
            abort(); // a verifier failure says why
        }
        dl_ir_module_destroy(m2);
    }
    free(text);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    import_once(data, size, false);
    import_once(data, size, true);
    return 0;
}
