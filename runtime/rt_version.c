// runtime/rt_version.c — the runtime's identity and status strings.
#include "dlrt.h"

const char *dlrt_version(void) {
    return DLRT_VERSION;
}

const char *dlrt_status_str(dlrt_status s) {
    switch (s) {
    case DLRT_OK:
        return "ok";
    case DLRT_ERR_INVALID_ARG:
        return "invalid argument";
    case DLRT_ERR_NOMEM:
        return "out of memory";
    case DLRT_ERR_IO:
        return "i/o error";
    case DLRT_ERR_CORRUPT:
        return "corrupt artifact";
    case DLRT_ERR_UNSUPPORTED:
        return "unsupported artifact";
    case DLRT_ERR_NO_DEVICE:
        return "no device";
    }
    return "unknown status";
}
