// runtime/rt_fault.c — the allocation-failure hook of libdlrt's own copy of base/ (base is linked
// in statically with hidden symbols, so a test that drives libdlrt.so cannot reach the hook of
// its own dl_base). Test-only entry points: not in dlrt.h, named dlrt__ (internal), exported
// only because the version script exports dlrt_*. See dl_test_fail_alloc_after in dl_base.h.
#include "dl_base.h"
#include "dlrt.h"

DLRT_API void dlrt__test_fail_alloc_after(long n);
DLRT_API long dlrt__test_alloc_count(void);
DLRT_API int dlrt__test_alloc_failed(void);

void dlrt__test_fail_alloc_after(long n) {
    dl_test_fail_alloc_after(n);
}

long dlrt__test_alloc_count(void) {
    return dl_test_alloc_count();
}

int dlrt__test_alloc_failed(void) {
    return dl_test_alloc_failed() ? 1 : 0;
}
