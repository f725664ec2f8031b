// base/hash.c — 128-bit hashing through xxHash's XXH3-128 (Debian libxxhash-dev), the cache's key
// and checksum function. Hex form: 32 lower-case digits, high word first.
#include "dl_base.h"

#include <xxhash.h>

#include <stdlib.h>

struct dl_hash128_state {
    XXH3_state_t *st;
};

static dl_hash128 from_xxh(XXH128_hash_t h) {
    return (dl_hash128){h.low64, h.high64};
}

dl_hash128 dl_hash128_of(const void *data, size_t len) {
    return from_xxh(XXH3_128bits(data, len));
}

dl_status dl_hash128_begin(dl_hash128_state **out) {
    dl_hash128_state *s = dl_mem_alloc(sizeof *s);
    if (!s || !(s->st = XXH3_createState())) {
        free(s);
        *out = NULL;
        return DL_ERR_NOMEM;
    }
    XXH3_128bits_reset(s->st);
    *out = s;
    return DL_OK;
}

void dl_hash128_update(dl_hash128_state *s, const void *data, size_t len) {
    XXH3_128bits_update(s->st, data, len);
}

dl_hash128 dl_hash128_end(dl_hash128_state *s) {
    dl_hash128 h = from_xxh(XXH3_128bits_digest(s->st));
    XXH3_freeState(s->st);
    free(s);
    return h;
}

void dl_hash128_hex(dl_hash128 h, char buf[33]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        buf[i] = digits[(h.hi >> (60 - 4 * i)) & 15];
        buf[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 15];
    }
    buf[32] = 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

bool dl_hash128_parse(const char *hex, dl_hash128 *out) {
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        int v = hex[i] ? hexval(hex[i]) : -1;
        if (v < 0) {
            return false;
        }
        w[i / 16] = (w[i / 16] << 4) | (uint64_t)v;
    }
    if (hex[32] != 0) {
        return false;
    }
    out->hi = w[0];
    out->lo = w[1];
    return true;
}

bool dl_hash128_eq(dl_hash128 a, dl_hash128 b) {
    return a.lo == b.lo && a.hi == b.hi;
}
