// runtime/dlrt.h — the dlcc runtime (libdlrt): loads compiled artifacts and runs them. It links
// neither LLVM nor the compiler's IR; trainers include only this header.
//
// This first version exposes the library's identity; loading artifacts, sessions, infer and
// train_step arrive with the code-generation and training work (see docs/). Every function is
// thread-safe unless stated otherwise.
#ifndef DLRT_H
#define DLRT_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DLRT_BUILDING)
#    define DLRT_API __attribute__((visibility("default")))
#else
#    define DLRT_API
#endif

// Status codes returned by every fallible runtime call.
typedef enum dlrt_status {
    DLRT_OK = 0,
    DLRT_ERR_INVALID_ARG,
    DLRT_ERR_NOMEM,
    DLRT_ERR_IO,
    DLRT_ERR_CORRUPT,     // an artifact failed validation
    DLRT_ERR_UNSUPPORTED, // a valid artifact this runtime cannot run (e.g. newer format)
} dlrt_status;

// The runtime's version as "MAJOR.MINOR.PATCH". Static string; never NULL.
DLRT_API const char *dlrt_version(void);
// A static English description of `s` ("ok", "invalid argument", ...). Never NULL.
DLRT_API const char *dlrt_status_str(dlrt_status s);

#ifdef __cplusplus
}
#endif
#endif
