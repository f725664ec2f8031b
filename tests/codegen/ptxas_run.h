// tests/codegen/ptxas_run.h — NVIDIA's PTX assembler, run on PTX text from the NVPTX target, for
// the tests that need no GPU: tests/codegen/nvptx_ptxas.c (the seam's own cases) and cg_check.c's
// GPU mode (DLCC_TEST_CPU=cuda:sm_XX: every codegen case emitted as PTX and assembled).
#ifndef PTXAS_RUN_H
#define PTXAS_RUN_H

#include <stdbool.h>
#include <stddef.h>

// The assembler: $DLCC_PTXAS, else /usr/local/cuda/bin/ptxas; NULL when it is not executable.
const char *ptxas_find(void);

// Writes `ptx` to DIR/NAME.ptx and runs `ptxas -arch=SM -v --warning-as-error` on it, writing
// DIR/NAME.cubin. Its output (at most log_size - 1 bytes) goes to log. Returns ptxas's exit
// status (0: accepted with no error and no warning), -1 when it could not run. The files are
// removed unless DLCC_TEST_KEEP_PTX is set.
int ptxas_run(const char *ptxas, const char *dir, const char *name, const char *sm, const char *ptx,
              char *log, size_t log_size);

// The number of kernel entries (".entry") in the PTX text.
size_t ptxas_count_entries(const char *ptx);

#endif
