// runtime/rt_arena.c — the session arena: one anonymous mapping holding every buffer of a
// session, committed at creation.
//
// Why committed: Linux overcommits, so a large allocation "succeeds" and its pages are found (or
// not) when first written. Under a memory cgroup the page that does not fit gets the process
// OOM-killed, silently, in the middle of a step, long after the session said it was ready. So
// the arena is populated up front (MADV_POPULATE_WRITE, or a write per page on kernels before
// 5.14), and before that the memory cgroup's headroom is compared with the arena's size: a
// session that cannot have its memory fails at creation with DLRT_ERR_NOMEM and a message naming
// the sizes, instead of dying later. The cgroup check is best effort (cgroup v2 and v1 memory
// controllers, the process's group and its ancestors; page cache counts as reclaimable); an
// unreadable hierarchy means no check.
//
// A testing aid: DLRT_DEBUG_CGROUP_DIR=DIR makes DIR (holding v2-style memory.max,
// memory.current and memory.stat files) the process's only memory cgroup.
#define _GNU_SOURCE // MADV_POPULATE_WRITE
#include "dl_base.h"
#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#    define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

// Reads the first unsigned number of file `dir/name`; false if absent or not a number ("max").
static bool read_u64(const char *dir, const char *name, uint64_t *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (!f) {
        return false;
    }
    unsigned long long v = 0;
    bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    *out = v;
    return ok;
}

// The value of `key` in a memory.stat file (0 if absent).
static uint64_t stat_value(const char *dir, const char *key) {
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "re");
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return v;
}

// Room left in one cgroup directory: limit - (usage - page cache). False when it has no limit.
static bool dir_room(const char *dir, bool v2, uint64_t *limit, uint64_t *room) {
    uint64_t lim = 0, use = 0;
    if (!read_u64(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &lim) ||
        !read_u64(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &use)) {
        return false;
    }
    if (lim >= (UINT64_C(1) << 62)) { // v1 writes "unlimited" as a page-rounded 2^63
        return false;
    }
    uint64_t cache = stat_value(dir, v2 ? "file" : "total_cache");
    uint64_t held = use > cache ? use - cache : 0;
    *limit = lim;
    *room = lim > held ? lim - held : 0;
    return true;
}

// The tightest room over `root` + `rel` and its ancestors up to root. Returns false if none of
// them has a limit.
static bool hierarchy_room(const char *root, const char *rel, bool v2, uint64_t *limit,
                           uint64_t *room) {
    char dir[4200];
    bool any = false;
    snprintf(dir, sizeof dir, "%s%s", root, rel);
    size_t rl = strlen(root);
    for (;;) {
        uint64_t l, r;
        if (dir_room(dir, v2, &l, &r) && (!any || r < *room)) {
            *limit = l;
            *room = r;
            any = true;
        }
        char *slash = strrchr(dir + rl, '/');
        if (!slash) {
            break;
        }
        *slash = 0;
    }
    return any;
}

// The memory cgroup's headroom for this process, if it has a limit.
static bool cgroup_room(uint64_t *limit, uint64_t *room) {
    const char *dbg = getenv("DLRT_DEBUG_CGROUP_DIR");
    if (dbg && *dbg) {
        return dir_room(dbg, true, limit, room);
    }
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) {
        return false;
    }
    char line[4096];
    bool any = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            continue;
        }
        *c2 = 0;
        const char *ctrls = c1 + 1, *rel = c2 + 1;
        bool v2 = strcmp(line, "0") == 0 && *ctrls == 0;
        bool v1mem = false;
        for (const char *p = ctrls; !v2 && *p;) {
            size_t n = strcspn(p, ",");
            v1mem = v1mem || (n == 6 && strncmp(p, "memory", 6) == 0);
            p += n + (p[n] == ',');
        }
        if (!v2 && !v1mem) {
            continue;
        }
        const char *roots_v2[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        const char *roots_v1[] = {"/sys/fs/cgroup/memory"};
        const char **roots = v2 ? roots_v2 : roots_v1;
        size_t n_roots = v2 ? 2 : 1;
        for (size_t i = 0; i < n_roots; i++) {
            uint64_t l, r;
            // The group as /proc names it; in a container whose cgroup namespace is not its own
            // the path may not exist under the mount, where the mount root is the group.
            if ((hierarchy_room(roots[i], strcmp(rel, "/") == 0 ? "" : rel, v2, &l, &r) ||
                 hierarchy_room(roots[i], "", v2, &l, &r)) &&
                (!any || r < *room)) {
                *limit = l;
                *room = r;
                any = true;
            }
        }
    }
    fclose(f);
    return any;
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

dlrt_status rt__arena_alloc(size_t size, uint8_t **out) {
    *out = NULL;
    size_t pg = page_size();
    size_t len = size ? (size + pg - 1) / pg * pg : pg;
    if (len < size) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory (session needs %zu bytes)", size);
    }
    uint64_t limit = 0, room = 0;
    if (cgroup_room(&limit, &room) && len > room) {
        return rt__fail(DLRT_ERR_NOMEM,
                        "out of memory: the session needs %zu bytes, but the memory cgroup "
                        "limit (%" PRIu64 " bytes) leaves room for %" PRIu64 " more",
                        len, limit, room);
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory (session needs %zu bytes): %s", size,
                        strerror(errno));
    }
    // Commit every page now (fresh anonymous pages are zero). madvise reports a failure to
    // populate as an error instead of a fault; without it, writing each page commits it too.
    if (madvise(p, len, MADV_POPULATE_WRITE) != 0) {
        int e = errno;
        if (e != EINVAL) {
            munmap(p, len);
            return rt__fail(DLRT_ERR_NOMEM,
                            "out of memory: cannot commit the session's %zu bytes: %s", size,
                            strerror(e));
        }
        for (size_t i = 0; i < len; i += pg) {
            ((volatile uint8_t *)p)[i] = 0;
        }
    }
    *out = p;
    return DLRT_OK;
}

void rt__arena_free(uint8_t *p, size_t size) {
    if (p) {
        size_t pg = page_size();
        munmap(p, size ? (size + pg - 1) / pg * pg : pg);
    }
}
