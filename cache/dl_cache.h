// cache/dl_cache.h — the compilation cache store: one SQLite database of compiled artifacts keyed
// by a 128-bit hash (computed by the compiler, see driver/dlcc.h). Depends on base/ and SQLite
// only: keys arrive as dl_hash128, artifacts as bytes.
//
// Location: $DLCC_CACHE_DIR, else $XDG_CACHE_HOME/dlcc, else ~/.cache/dlcc (dl_cache_default_dir).
// The directory is created 0700 and the database file (cache.db) 0600. A directory, database or
// any file SQLite would read beside it (cache.db-wal, -shm, -journal) that is owned by another
// user, writable by group or others, or not a regular file is refused (DL_ERR_CACHE with a
// message naming the path and the fix), before SQLite opens anything. The database is treated
// as data: triggers and views in it never run (docs/cache.md, "Security"). The database runs in WAL
// mode with a busy timeout; every write is one transaction, so no partial entry is ever visible to
// another process.
//
// The store never makes a compile fail: callers treat any error as "no cache" and go on. Library
// code never prints: messages go to the dl_diags sink given to dl_cache_open (as warnings).
// Thread-safety: a dl_cache handle is used by one thread at a time; many processes may use the
// same database concurrently.
#ifndef DL_CACHE_H
#define DL_CACHE_H

#include "dl_base.h"

typedef struct dl_cache dl_cache;

// Metadata stored with each entry (strings are copied by put; returned ones are OWNED by the
// entry struct and freed by dl_cache_entry_fini).
typedef struct dl_cache_entry {
    dl_hash128 key;
    char *model;            // model name
    char *target;           // "x86_64-pc-linux-gnu/znver3"
    char *compiler_version; // "dlcc 0.1.0 (gitrev) LLVM 19.1.7"
    char *source;           // the model file it was compiled from ("" if unknown: an entry of an
                            // older cache or an imported one)
    char *dims;             // the bound dims, "N=64,C=10" ("" if none or unknown)
    uint64_t size;          // artifact bytes
    uint64_t source_size;   // canonical IR bytes (informational)
    double compile_ms;      // time the compile took (for "compile time saved")
    int64_t created;        // unix seconds
    int64_t last_used;      // unix seconds
    int64_t hits;
    dl_hash128 blob_hash; // XXH3-128 of the artifact bytes
} dl_cache_entry;

void dl_cache_entry_fini(dl_cache_entry *e); // frees the strings; NULL-safe fields

typedef struct dl_cache_stats {
    int64_t entries;
    uint64_t bytes;          // sum of artifact sizes
    int64_t hits, misses;    // lookups since the database was created
    double compile_ms_saved; // sum over hits of the entry's compile_ms
    uint64_t max_size;       // the configured size limit in bytes; 0: no limit
} dl_cache_stats;

// The default cache directory (see top); heap string, caller frees. NULL only on out of memory or
// when neither DLCC_CACHE_DIR, XDG_CACHE_HOME nor HOME is set (then: DL_ERR_CACHE).
DL_NODISCARD dl_status dl_cache_default_dir(char **out);

// Opens (creating if needed) the store in `dir` (NULL: the default). Checks ownership and
// permissions, creates (or migrates) the schema, sets WAL and the busy timeout. The handle is
// read-only instead (as dl_cache_open_readonly; dl_cache_readonly_reason says why) when
// DLCC_CACHE_READONLY is set to 1/true/yes/on, or when the directory or the database exists and
// is not writable by this process: lookups serve hits, nothing is stored or counted. On failure
// returns DL_ERR_CACHE (or DL_ERR_NOMEM) with a warning in `d` saying why and what to do, and
// *out NULL.
// A database file that is not SQLite or is damaged gives DL_ERR_CORRUPT (with the warning) and
// is not deleted: the caller goes on without the cache; dl_cache_remove_damaged repairs it.
DL_NODISCARD dl_status dl_cache_open(const char *dir, dl_diags *d, dl_cache **out);
// The repair for DL_ERR_CORRUPT from dl_cache_open (dlcc-cache clear): deletes DIR/cache.db and
// its -wal/-shm/-journal files, only when DIR passes the trust rules of dl_cache_open (ours, not
// writable by group or others) and cache.db is a regular file of ours. *out_removed says whether
// the database is gone. DL_ERR_CACHE (nothing deleted) when the rules refuse, DL_ERR_IO when a
// file cannot be deleted, DL_ERR_NOMEM. Call it only on DL_ERR_CORRUPT: a locked, newer or
// untrusted database is refused for reasons that deleting it would not fix.
DL_NODISCARD dl_status dl_cache_remove_damaged(const char *dir, bool *out_removed);
// Opens an existing store read-only (for loading artifacts; used by libdlrt too). Never creates.
DL_NODISCARD dl_status dl_cache_open_readonly(const char *dir, dl_diags *d, dl_cache **out);
void dl_cache_close(dl_cache *c); // NULL is a no-op
// Why dl_cache_open gave a read-only handle ("DLCC_CACHE_READONLY=1", "the cache directory D is
// not writable (Permission denied)"); NULL for a writable handle. Borrowed.
const char *dl_cache_readonly_reason(const dl_cache *c);
// Whether the environment turns the cache off: DLCC_CACHE set to 0/false/no/off (as --no-cache).
bool dl_cache_env_disabled(void);
const char *dl_cache_dir(const dl_cache *c); // borrowed

// Looks `key` up. On a hit: *out_blob (malloc'd, caller frees) and *out_len hold the artifact,
// *meta (if non-NULL) its metadata, hits/last_used are updated and the hit counted; returns DL_OK.
// On a miss returns DL_OK with *out_blob NULL and counts the miss. A stored blob whose hash does
// not match is deleted (a warning in `d`) and reported as a miss. Errors: DL_ERR_CACHE.
DL_NODISCARD dl_status dl_cache_get(dl_cache *c, dl_hash128 key, uint8_t **out_blob,
                                    size_t *out_len, dl_cache_entry *meta, dl_diags *d);
// Stores an artifact (one transaction; replaces an entry with the same key). meta->key, size,
// blob_hash, created, last_used and hits are filled in by the store. Afterwards evicts least
// recently used entries until the total size is within the limit (never the entry just stored,
// never an entry in use — see dl_cache_pin).
DL_NODISCARD dl_status dl_cache_put(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                                    const dl_cache_entry *meta, dl_diags *d);

// Marks `key` as in use by this process until dl_cache_unpin or process exit (recorded with the
// pid; entries pinned by live processes are never evicted or pruned).
DL_NODISCARD dl_status dl_cache_pin(dl_cache *c, dl_hash128 key);
DL_NODISCARD dl_status dl_cache_unpin(dl_cache *c, dl_hash128 key);

// Maintenance (dlcc-cache).
DL_NODISCARD dl_status dl_cache_stats_get(dl_cache *c, dl_cache_stats *out);
// Sets hits, misses and compile time saved to zero (`dlcc-cache stats -z`); entries are kept.
DL_NODISCARD dl_status dl_cache_stats_zero(dl_cache *c);
// Every entry, most recently used first. *out is a heap array of *n entries; free each with
// dl_cache_entry_fini and the array with free().
DL_NODISCARD dl_status dl_cache_list(dl_cache *c, dl_cache_entry **out, size_t *n);
// Entries whose hex key starts with `prefix` (>= 4 hex digits). Same ownership as dl_cache_list.
DL_NODISCARD dl_status dl_cache_find_prefix(dl_cache *c, const char *prefix, dl_cache_entry **out,
                                            size_t *n);
DL_NODISCARD dl_status dl_cache_remove(dl_cache *c, dl_hash128 key, bool *out_removed);
DL_NODISCARD dl_status dl_cache_clear(dl_cache *c, int64_t *out_removed);
// Removes entries (not pinned) not used for `older_than_s` seconds (< 0: no age limit), then
// least recently used ones until the total is <= max_size (0: the configured limit; UINT64_MAX:
// no size limit).
DL_NODISCARD dl_status dl_cache_prune(dl_cache *c, uint64_t max_size, int64_t older_than_s,
                                      int64_t *out_removed, uint64_t *out_freed);
// PRAGMA integrity_check plus, per entry, its column types and values, its blob's hash and the
// artifact's ELF header; problems go to `d`; *out_bad counts them. Bad entries are dropped on a
// writable handle (reported only on a read-only one).
DL_NODISCARD dl_status dl_cache_verify(dl_cache *c, dl_diags *d, int64_t *out_bad);
// The size limit: DLCC_CACHE_MAX_SIZE (bytes, or with K/M/G suffix) overrides the value stored
// with dl_cache_set_max_size; default 2 GiB. 0 (stored or in the environment) means no limit.
DL_NODISCARD dl_status dl_cache_set_max_size(dl_cache *c, uint64_t bytes);
// Export writes one file per entry into `dir` (KEY.dlcc: metadata + blob, self-describing).
// Count in *out_n.
DL_NODISCARD dl_status dl_cache_export(dl_cache *c, const char *dir, dl_diags *d, int64_t *out_n);
// Import reads such files. Unless `trust_others`, only regular files owned by the caller's uid
// and not writable by group or others are read (symbolic links are not followed): an artifact is
// code. Each file must pass the checks verify applies to a stored entry (format, checksum, blob
// hash, ELF header, metadata values). A file failing any check is skipped with a warning naming
// it and counted in *out_skipped; the rest are still imported (*out_n). Returns DL_OK unless the
// directory cannot be read (DL_ERR_IO), memory runs out, or the database itself fails (full
// disk, lock, damage: DL_ERR_CACHE, with the entries imported before it kept).
DL_NODISCARD dl_status dl_cache_import(dl_cache *c, const char *dir, bool trust_others, dl_diags *d,
                                       int64_t *out_n, int64_t *out_skipped);

// Parses "2G", "512M", "1048576" (K/M/G/T = powers of 1024). false on bad syntax.
bool dl_cache_parse_size(const char *s, uint64_t *out);

#endif
