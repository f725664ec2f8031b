// tests/runtime/artifact_seal.h — for tests that alter an artifact's bytes on purpose: recomputes
// the checksum trailer (runtime/dlrt_format.h, format 4) so the altered artifact passes the
// checksum and reaches the plan validation behind it (a forged artifact: the checksum guards
// against accidents only). Header-only; needs base (dl_hash128_of).
#ifndef DL_TEST_ARTIFACT_SEAL_H
#define DL_TEST_ARTIFACT_SEAL_H

#include "dl_base.h"
#include "dlrt_format.h"

#include <string.h>

// Reseals artifact bytes a[0, n) in place. False if they have no trailer to reseal.
static inline bool dl_test_artifact_reseal(uint8_t *a, size_t n) {
    dlrt_artifact_trailer t;
    if (n < sizeof t) {
        return false;
    }
    memcpy(&t, a + n - sizeof t, sizeof t);
    if (memcmp(t.magic, DLRT_TRAILER_MAGIC, sizeof t.magic) != 0 || t.size != n) {
        return false;
    }
    dl_hash128 h = dl_hash128_of(a, n - 16);
    t.hash_lo = h.lo;
    t.hash_hi = h.hi;
    memcpy(a + n - sizeof t, &t, sizeof t);
    return true;
}

#endif
