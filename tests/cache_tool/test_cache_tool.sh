#!/usr/bin/env bash
# tests/cache_tool/test_cache_tool.sh — end-to-end tests of `dlcc-cache`: a cache filled by
# `dlcc compile` of two small models in a fresh DLCC_CACHE_DIR, then ls (columns), stats (hits
# and misses after a second compile), show (by prefix, ambiguous and unknown prefixes), verify
# (ok, then a blob damaged with python's sqlite3: exit 1), prune (by size and by age), rm,
# clear, export/import into another directory (only your own files unless --trust; a bad file is
# skipped, the rest imported, exit 1), a WAL planted beside the database (every command refuses
# it, verify reports it, compile goes on without the cache), config max-size, --json (parsed by python's json
# module), usage errors (exit 2), help, and explain (one attribute differs: the node and its line
# in both files; only an intermediate name and a comment differ: every component the same).
# usage: test_cache_tool.sh DLCC_CACHE_TOOL DLCC
#
# Every case prints "ok" or "FAIL" with the command's output; the last line is
# "N passed, N failed". Exits 77 when `dlcc compile -v` does not mention the cache (no cache
# support in the driver yet).
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_cache_tool.sh DLCC_CACHE_TOOL DLCC" >&2
  exit 2
fi
tool=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dlcc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
prog=$tool
# The harness: a fresh DLCC_CACHE_DIR (never the user's cache) and TMPDIR; expect/check run
# dlcc-cache.
source "$(cd "$(dirname "$0")/../harness" && pwd)/cli_lib.sh"
run() { run_dlcc "$@"; } # run ARGS...: runs dlcc-cache, capturing stdout/stderr; sets $rc.

has() { grep -q -- "$1" "$2"; }
json_ok() { "$py" -c 'import json,sys; json.load(open(sys.argv[1]))' "$out" 2>>"$err"; }
jq_py() { # jq_py EXPR: evaluates EXPR with d = the JSON on stdout; true if it is truthy.
  "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$out" \
    2>>"$err"
}
sql() { # sql STATEMENT [ARGS...]: runs one statement on the cache database.
  "$py" - "$DLCC_CACHE_DIR/cache.db" "$@" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute(sys.argv[2], sys.argv[3:])
db.commit()
db.close()
EOF
}

make_twin() { # a copy of pool's entry under the key $twin
  sql "INSERT INTO entries(key, model, target, compiler_version, size, source_size, compile_ms, created, last_used, hits, blob_hash, blob) SELECT ?, 'twin', target, compiler_version, size, source_size, compile_ms, created, last_used - 10, 0, blob_hash, blob FROM entries WHERE key = ?" "$twin" "$pool_key"
}
damage_twin() { # flips the first byte of the twin's blob
  "$py" - "$DLCC_CACHE_DIR/cache.db" "$twin" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(blob,) = db.execute("SELECT blob FROM entries WHERE key = ?", (sys.argv[2],)).fetchone()
blob = bytes([blob[0] ^ 0xFF]) + bytes(blob[1:])
db.execute("UPDATE entries SET blob = ? WHERE key = ?", (blob, sys.argv[2]))
db.commit()
EOF
}

# --- models -------------------------------------------------------------------------------------
cat >pool_a.dlg <<'EOF'
# A tiny pooling model (explain: differs from pool_b.dlg in one attribute).
model pool
dim N = 2
input x : float[N, 1, 6, 6]
r = Relu (x)
p = MaxPool <kernel_shape = [2, 2]> (r)
output p
EOF
cat >pool_b.dlg <<'EOF'
# A tiny pooling model (explain: differs from pool_a.dlg in one attribute).
model pool
dim N = 2
input x : float[N, 1, 6, 6]
r = Relu (x)
p = MaxPool <kernel_shape = [3, 3]> (r)
output p
EOF
cat >pool_c.dlg <<'EOF'
# A tiny pooling model.
# Same as pool_a.dlg except for this comment and the intermediate's name.
model pool
dim N = 2
input x : float[N, 1, 6, 6]
activated = Relu (x)   # renamed
p = MaxPool <kernel_shape = [2, 2]> (activated)
output p
EOF
cat >mlp.dlg <<'EOF'
model tiny_mlp
dim N = 4
input x : float[N, 8]
param w : float[8, 3] = glorot_uniform(seed = 1)
param b : float[3] = zeros
h = Gemm (x, w, b)
y = Relu (h)
output y
EOF

# --- skip without cache support in the driver ----------------------------------------------------
"$dlcc" compile -v pool_a.dlg -o pool_a.so >"$out" 2>"$err"
rc=$?
if [ "$rc" -ne 0 ]; then
  fail "dlcc compile pool_a.dlg (exit $rc)"
  echo "$passed passed, $failed failed"
  exit 1
fi
if ! grep -qi cache "$out" "$err"; then
  echo "skip: 'dlcc compile -v' does not mention the cache (no cache support yet)"
  exit 77
fi
"$dlcc" compile -v mlp.dlg -o mlp.so >"$out" 2>"$err" || fail "dlcc compile mlp.dlg"

# --- the empty / missing cache ---------------------------------------------------------------------
empty=$work/never-made
expect 0 "ls on a cache that does not exist" ls --cache-dir "$empty"
check "ls says empty" has "empty" "$out"
expect 0 "stats on a cache that does not exist" stats --cache-dir "$empty"
check "stats says empty" has "empty" "$out"
check "read-only commands do not create the cache" test ! -e "$empty"
expect 0 "verify on a cache that does not exist" verify --cache-dir "$empty"
check "verify: 0 entries" has "ok: 0 entries verified" "$out"

odd=$work/'we"ird\\dir'$'\t''x'
expect 0 "ls --json with quotes, a backslash and a tab in the path" ls --json --cache-dir "$odd"
check "the path round-trips through JSON" \
  "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["cache_dir"] == sys.argv[2] else 1)' "$out" "$odd"

# --- ls ----------------------------------------------------------------------------------------------
expect 0 "ls" ls
check "ls header columns" grep -Eq '^KEY +MODEL +SOURCE +DIMS +TARGET +SIZE +HITS +LAST USED' "$out"
check "ls lists both models" bash -c "grep -q ' pool ' '$out' && grep -q ' tiny_mlp ' '$out'"
check "ls key prefix is 12 hex digits" grep -Eq '^[0-9a-f]{12}  ' "$out"
check "ls size is human" grep -Eq '[0-9.]+ (KiB|MiB|B) ' "$out"
check "ls last used is relative" grep -Eq '(just now|s ago)$' "$out"
expect 0 "ls --json" ls --json
check "ls --json parses, 2 entries with 32-digit keys" \
  jq_py 'len(d["entries"]) == 2 and all(len(e["key"]) == 32 for e in d["entries"])'
check "ls --json fields" jq_py 'set(["model","target","size","hits","last_used","compiler_version"]) <= set(d["entries"][0])'
expect 0 "--json before the command" --json ls
check "--json before the command parses" json_ok

pool_key=$("$tool" ls --json | "$py" -c 'import json,sys; print([e["key"] for e in json.load(sys.stdin)["entries"] if e["model"]=="pool"][0])')
mlp_key=$("$tool" ls --json | "$py" -c 'import json,sys; print([e["key"] for e in json.load(sys.stdin)["entries"] if e["model"]=="tiny_mlp"][0])')

# --- stats after a second compile (a hit) --------------------------------------------------------
"$dlcc" compile -v pool_a.dlg -o pool_a2.so >"$out" 2>"$err"
check "second compile is a cache hit" has "cache hit" "$err"
expect 0 "stats" stats
check "stats: 2 entries" grep -Eq '^entries: +2$' "$out"
check "stats: 1 hit" grep -Eq '^hits: +1$' "$out"
check "stats: 2 misses" grep -Eq '^misses: +2$' "$out"
check "stats: hit rate 33.3 %" has "33.3 %" "$out"
check "stats: compile time saved, limit, location" \
  bash -c "grep -q 'compile time saved' '$out' && grep -q 'size limit' '$out' && grep -q '$DLCC_CACHE_DIR' '$out'"
expect 0 "stats --json" stats --json
check "stats --json values" jq_py 'd["entries"] == 2 and d["hits"] == 1 and d["misses"] == 2 and d["bytes"] > 0 and d["max_size"] > 0'

# --- show --------------------------------------------------------------------------------------------
expect 0 "show by 6-digit prefix" show "${pool_key:0:6}"
check "show: every field" bash -c "for f in key: model: target: 'compiler version:' size: \
  'source size:' 'compile time:' created: 'last used:' hits: 'blob hash:'; do \
  grep -q \"^\$f\" '$out' || exit 1; done"
check "show: full key and hit count" bash -c "grep -q '$pool_key' '$out' && grep -Eq '^hits: +1$' '$out'"
expect 0 "show upper-case prefix" show "$(echo "${mlp_key:0:8}" | tr a-f A-F)"
check "show upper-case prefix finds tiny_mlp" has "tiny_mlp" "$out"
expect 0 "show --json" show "${mlp_key:0:8}" --json
check "show --json is the entry" jq_py "d['key'] == '$mlp_key' and d['model'] == 'tiny_mlp'"
# An ambiguous prefix: make a second key sharing pool's first 4 digits.
twin="${pool_key:0:4}ffffffffffffffffffffffffffff"
[ "$twin" = "$pool_key" ] && twin="${pool_key:0:4}eeeeeeeeeeeeeeeeeeeeeeeeeeee"
make_twin
expect 1 "show ambiguous prefix" show "${pool_key:0:4}"
check "ambiguous prefix lists the matches" \
  bash -c "grep -q ambiguous '$err' && grep -q '$pool_key' '$err' && grep -q '$twin' '$err'"
expect 1 "show unknown prefix" show 0000000000000000
check "unknown prefix message" has "no entry matches" "$err"
expect 2 "show prefix too short" show abc
expect 2 "show non-hex prefix" show xyz123
expect 2 "show without KEY" show

# --- verify ------------------------------------------------------------------------------------------
expect 0 "verify" verify
check "verify ok message" has "ok: 3 entries verified" "$out"
expect 0 "verify --json" verify --json
check "verify --json ok" jq_py 'd["ok"] is True and d["entries"] == 3 and d["problems"] == []'
# Damage the twin's blob: flip its first byte.
damage_twin
expect 1 "verify finds the damaged blob" verify
check "verify names the problem" bash -c "grep -q '^problem:' '$out' && grep -q '${twin:0:8}' '$out'"
expect 0 "verify dropped the damaged entry" verify
check "2 entries left" has "ok: 2 entries verified" "$out"
make_twin
damage_twin
expect 1 "verify --json on damage" verify --json
check "verify --json reports it" jq_py "d['ok'] is False and d['problems_found'] == 1 and '$twin' in d['problems'][0]"
make_twin

# --- rm ----------------------------------------------------------------------------------------------
expect 0 "rm an entry by prefix" rm "${twin:0:12}"
check "rm prints what it removed" has "removed $twin" "$out"
expect 1 "rm again: unknown" rm "${twin:0:12}"
expect 0 "verify after rm" verify
expect 2 "rm --json is a usage error" rm "${pool_key:0:6}" --json

# --- prune -------------------------------------------------------------------------------------------
# Age: pretend tiny_mlp was last used 40 days ago.
sql "UPDATE entries SET last_used = last_used - 40*86400 WHERE key = ?" "$mlp_key"
expect 0 "ls shows an ISO date for an old entry" ls
check "old entry's last used is a date" grep -Eq 'tiny_mlp .*[0-9]{4}-[0-9]{2}-[0-9]{2}$' "$out"
check "old entry listed last" bash -c "tail -1 '$out' | grep -q tiny_mlp"
expect 0 "prune --older-than 30d" prune --older-than 30d
check "prune removed 1 entry" grep -Eq '^removed 1 entry, freed [0-9.]+ (B|KiB|MiB)$' "$out"
expect 0 "ls after prune by age" ls
check "tiny_mlp pruned, pool kept" bash -c "! grep -q tiny_mlp '$out' && grep -q ' pool ' '$out'"
"$dlcc" compile mlp.dlg -o mlp.so >/dev/null 2>&1
expect 0 "prune --max-size 1 --json (everything goes)" prune --max-size 1 --json
check "prune --json counts" jq_py 'd["removed"] == 2 and d["freed"] > 0'
expect 0 "prune on an empty cache" prune --max-size 500M --older-than 12h
check "nothing to prune" has "removed 0 entries" "$out"
expect 2 "prune bad size" prune --max-size lots
expect 2 "prune bad duration" prune --older-than 3y
expect 2 "prune missing value" prune --older-than

# --- clear -------------------------------------------------------------------------------------------
"$dlcc" compile pool_a.dlg -o pool_a.so >/dev/null 2>&1
"$dlcc" compile mlp.dlg -o mlp.so >/dev/null 2>&1
expect 0 "clear" clear
check "clear prints the count" grep -Eq '^removed 2 entries' "$out"
expect 0 "ls after clear" ls
check "empty after clear" has "empty" "$out"

# --- export / import ---------------------------------------------------------------------------------
"$dlcc" compile pool_a.dlg -o pool_a.so >/dev/null 2>&1
"$dlcc" compile mlp.dlg -o mlp.so >/dev/null 2>&1
expect 0 "export" export "$work/exported"
check "export count" has "exported 2 entries" "$out"
check "export wrote 2 files" test "$(ls "$work/exported" | wc -l)" -eq 2
expect 0 "import into another cache" import "$work/exported" --cache-dir "$work/cache2"
check "import count" has "imported 2 entries" "$out"
expect 0 "ls --json of the imported cache" ls --json --cache-dir "$work/cache2"
check "imported keys are the same" jq_py "sorted(e['key'] for e in d['entries']) == sorted(['$pool_key', '$mlp_key'])"
expect 0 "verify the imported cache" verify --cache-dir "$work/cache2"
check "imported cache verifies" has "ok: 2 entries verified" "$out"
"$dlcc" compile -v pool_a.dlg -o pool_a3.so --cache-dir "$work/cache2" >"$out" 2>"$err"
check "an imported entry is a hit" has "cache hit" "$err"
expect 1 "import from a missing directory" import "$work/nope"
expect 2 "export without DIR" export

# --- import reads only your own files; one bad file never stops the rest ----------------------------
# (An artifact is code: a file another user owns or can write is their code. Tests run as root
# here; the "owned by another uid" case needs root and is skipped otherwise.)
cp -r "$work/exported" "$work/shared"
first=$(ls "$work/shared" | sort | head -1)
second=$(ls "$work/shared" | sort | tail -1)
chmod 666 "$work/shared/$first"
expect 1 "import skips a file writable by others, exits 1" import "$work/shared" --cache-dir "$work/cache3"
check "the skipped file is named with the reason" bash -c "grep -q '$first' '$err' && grep -q 'writable by group or others' '$err' && grep -q -- '--trust' '$err'"
check "the other file is still imported" has "imported 1 entry" "$out"
check "the summary says a file was skipped" has "skipped 1 file" "$err"
expect 0 "import --trust takes it" import "$work/shared" --trust --cache-dir "$work/cache4"
check "import --trust count" has "imported 2 entries" "$out"
chmod 644 "$work/shared/$first"
if [ "$(id -u)" -eq 0 ]; then
  chown 65534:65534 "$work/shared/$second"
  expect 1 "import skips a file of another uid" import "$work/shared" --cache-dir "$work/cache5"
  check "the other uid is named" has "owned by uid 65534" "$err"
  chown 0:0 "$work/shared/$second"
else
  echo "skip import of another uid's file: needs root to chown"
fi
head -c 200 "$work/shared/$second" >"$work/shared/aaa_truncated.dlcc"
expect 1 "import skips a truncated file, exits 1" import "$work/shared" --cache-dir "$work/cache6"
check "the truncated file is named" has "aaa_truncated.dlcc" "$err"
check "the good files after it are imported" has "imported 2 entries" "$out"
expect 0 "import --help mentions --trust" help import
check "import help: --trust" has "--trust" "$out"

# --- a WAL planted beside the database is refused by every command, and compile goes on ------------
expect 0 "verify before planting" verify --cache-dir "$work/cache4"
: >>"$work/cache4/cache.db-wal"
chmod 666 "$work/cache4/cache.db-wal"
expect 1 "verify reports a WAL writable by others" verify --cache-dir "$work/cache4"
check "verify names the WAL and the fix" bash -c "grep -q '^problem:.*cache.db-wal.*writable by group or others' '$out' && grep -q 'rm -f' '$out'"
check "verify does not send a refused cache to clear" bash -c "grep -q 'the problem says what to do' '$out' && ! grep -q 'dlcc-cache clear' '$out'"
expect 1 "ls refuses it too" ls --cache-dir "$work/cache4"
"$dlcc" compile -v pool_a.dlg -o pool_a4.so --cache-dir "$work/cache4" >"$out" 2>"$err"
rc=$?
check "compile still succeeds without the cache" test "$rc" -eq 0 -a -s pool_a4.so
check "compile warns that the cache is unavailable" bash -c "grep -q 'cache unavailable' '$err' && ! grep -q 'cache hit' '$err'"
chmod 600 "$work/cache4/cache.db-wal"
if [ "$(id -u)" -eq 0 ]; then
  chown 65534:65534 "$work/cache4/cache.db-wal"
  expect 1 "verify reports a WAL of another uid" verify --cache-dir "$work/cache4"
  check "verify names the other uid" has "owned by uid 65534" "$out"
else
  echo "skip WAL of another uid: needs root to chown"
fi
rm -f "$work/cache4/cache.db-wal" "$work/cache4/cache.db-shm" "$work/cache4/cache.db-journal"
expect 0 "verify after removing the planted files (the fix the warning gives)" verify --cache-dir "$work/cache4"

# --- config ------------------------------------------------------------------------------------------
expect 0 "config max-size (show)" config max-size
check "default limit 2 GiB" has "2.0 GiB" "$out"
check "mentions DLCC_CACHE_MAX_SIZE" has "DLCC_CACHE_MAX_SIZE" "$out"
expect 0 "config max-size 500M" config max-size 500M
check "set message" has "500.0 MiB" "$out"
expect 0 "config max-size shows the new limit" config max-size
check "limit is 500 MiB" has "524288000 bytes" "$out"
expect 0 "stats shows the new limit" stats --json
check "stats max_size 500M" jq_py 'd["max_size"] == 500 * 1024 * 1024'
DLCC_CACHE_MAX_SIZE=1G "$tool" config max-size >"$out" 2>"$err"
check "the environment overrides" bash -c "grep -q 'DLCC_CACHE_MAX_SIZE=1G' '$out'"
expect 2 "config bad size" config max-size huge
expect 2 "config unknown setting" config colour blue
expect 2 "config without a setting" config

# --- explain -----------------------------------------------------------------------------------------
expect 0 "explain: one attribute differs" explain pool_a.dlg pool_b.dlg
check "explain: keys differ" has "keys: differ" "$out"
check "explain: ir differs" grep -Eq '^  ir +differs$' "$out"
check "explain: other components same" bash -c "for c in dims options target format compiler; do \
  grep -Eq \"^  \$c +same\$\" '$out' || exit 1; done"
check "explain: names node 1 and line 6 in both files" \
  has 'first difference: node 1 — pool_a.dlg:6 `p = MaxPool <kernel_shape = \[2, 2\]> (r)` vs pool_b.dlg:6 `p = MaxPool <kernel_shape = \[3, 3\]> (r)`: attribute kernel_shape \[2, 2\] vs \[3, 3\]' "$out"
check "explain: the output type difference is listed" has "difference: output p: type" "$out"
expect 0 "explain: only a name and a comment differ" explain pool_a.dlg pool_c.dlg
check "explain: same keys" has "keys: same" "$out"
check "explain: every component same" \
  bash -c "[ \$(grep -Ec '^  [a-z]+ +same\$' '$out') -eq 6 ] && ! grep -q differ '$out'"
expect 0 "explain --json" explain pool_a.dlg pool_b.dlg --json
check "explain --json" jq_py 'd["same"] is False and d["components"]["ir"] == "differs" and d["first_difference"]["node"] == 1 and d["first_difference"]["line_a"] == 6 and "kernel_shape" in d["first_difference"]["what"]'
expect 0 "explain --json same" explain pool_a.dlg pool_c.dlg --json
check "explain --json same keys" jq_py 'd["same"] is True and set(d["components"].values()) == {"same"} and d["first_difference"] is None'
expect 0 "explain with -D: dims differ" explain pool_a.dlg pool_a.dlg -D N=3
check "explain -D: same (both bound)" has "keys: same" "$out"
expect 0 "explain different models" explain pool_a.dlg mlp.dlg
check "explain different models: node count and inputs listed" \
  bash -c "grep -q 'difference: model name pool vs tiny_mlp' '$out' && grep -q 'first difference: node 0' '$out'"
sed 's/seed = 1/seed = 2/' mlp.dlg >mlp_seed.dlg
expect 0 "explain: a param initialiser differs" explain mlp.dlg mlp_seed.dlg
check "explain names the initialiser" has "difference: param w: initialiser glorot_uniform(seed = 1) vs glorot_uniform(seed = 2)" "$out"
expect 0 "explain -O1 vs default is the same for both" explain pool_a.dlg pool_c.dlg -O 1
# explain names train-block differences: hyper-parameter values (not in the key) and structural
# choices (in the key).
cat >tr_a.dlg <<'EOF'
model tr
input x : float[4, 3]
input t : float[4, 2]
param w : float[3, 2] = uniform(-1, 1, seed = 7)
h = MatMul (x, w)
loss = MeanSquaredError (h, t)
output h
train loss {
  optimizer = adam <lr = 0.01>
  clip_norm = 1.0
  loss_scale = dynamic <init = 1024>
}
EOF
sed 's/adam <lr = 0.01>/adam <lr = 0.2, beta1 = 0.5, eps = 1e-4>/; s/clip_norm = 1.0/clip_norm = 3.0/; s/init = 1024/init = 64/' tr_a.dlg >tr_b.dlg
expect 0 "explain: only hyper-parameter values differ" explain tr_a.dlg tr_b.dlg
check "explain hparams: same keys" has "keys: same" "$out"
check "explain hparams: lr named, not in the key" \
  has "difference: train: adam lr 0.01 vs 0.2 (a hyper-parameter value: not in the key)" "$out"
check "explain hparams: betas, eps, clip norm, loss scale named" bash -c "grep -q 'adam beta1 0.9 vs 0.5' '$out' && \
  grep -q 'adam eps 1e-08 vs 0.0001' '$out' && grep -q 'clip_norm 1 vs 3' '$out' && \
  grep -q 'loss_scale init 1024 vs 64' '$out'"
check "explain hparams: no 'differs elsewhere' note" bash -c "! grep -q 'elsewhere' '$out'"
sed 's/adam <lr = 0.01>/adam <lr = 0.01, amsgrad = 1>/; /clip_norm/d; s/loss_scale = dynamic <init = 1024>/loss_scale = 128\n  accumulate = 4/' tr_a.dlg >tr_c.dlg
expect 0 "explain: structural train differences" explain tr_a.dlg tr_c.dlg
check "explain structure: keys differ" has "keys: differ" "$out"
check "explain structure: amsgrad, clipping, loss scaling, accumulation named" bash -c "\
  grep -q 'difference: train: adam amsgrad 0 vs 1 (structural: in the key)' '$out' && \
  grep -q 'difference: train: clip_norm set vs none (structural: in the key)' '$out' && \
  grep -q 'difference: train: loss_scale dynamic vs static (structural: in the key)' '$out' && \
  grep -q 'difference: train: accumulate 1 vs 4 (structural: in the key)' '$out'"
check "explain structure: no 'differs elsewhere' note" bash -c "! grep -q 'elsewhere' '$out'"
sed 's/adam <lr = 0.01>/sgd <lr = 0.01, momentum = 0.9>/' tr_a.dlg >tr_d.dlg
expect 0 "explain: another optimizer" explain tr_a.dlg tr_d.dlg
check "explain optimizer: named" has "difference: train: optimizer adam vs sgd (structural: in the key)" "$out"
sed 's/momentum = 0.9/momentum = 0/' tr_d.dlg >tr_e.dlg
expect 0 "explain: momentum used or not" explain tr_d.dlg tr_e.dlg
check "explain momentum: structural" \
  has "difference: train: sgd momentum 0.9 vs 0 (structural: whether momentum is used is in the key)" "$out"
expect 0 "explain --json: train differences" explain tr_a.dlg tr_b.dlg --json
check "explain --json: train differences listed" \
  jq_py 'd["same"] is True and any("adam lr 0.01 vs 0.2" in s for s in d["differences"])'
printf 'model broken\ninput x : float[2]\ny = Relu (z)\noutput y\n' >broken.dlg
expect 1 "explain: a model error exits 1" explain pool_a.dlg broken.dlg
check "explain: model error rendered with the file" has "broken.dlg:3" "$err"
expect 1 "explain: missing file" explain pool_a.dlg missing.dlg
expect 2 "explain: one file" explain pool_a.dlg
expect 2 "explain: bad -O" explain pool_a.dlg pool_b.dlg -O 7
expect 2 "explain: bad -D" explain pool_a.dlg pool_b.dlg -D N

# --- damaged or unusable caches --------------------------------------------------------------------
mkdir -p "$work/junk"
chmod 700 "$work/junk"
head -c 4096 /dev/urandom >"$work/junk/cache.db"
chmod 600 "$work/junk/cache.db"
for c in ls stats show prune; do
  args=$c
  [ $c = show ] && args="show abcd"
  expect 1 "$c on a database that is not SQLite" $args --cache-dir "$work/junk"
  check "$c prints the store's warning" grep -q 'warning' "$err"
done
expect 1 "verify on a database that is not SQLite" verify --cache-dir "$work/junk"
check "verify reports the problem" grep -q '^problem:' "$out"
mkdir -p "$work/open"
chmod 777 "$work/open"
"$dlcc" compile pool_a.dlg -o x.so --cache-dir "$work/open" >/dev/null 2>&1
expect 1 "a world-writable cache directory is refused" ls --cache-dir "$work/open"
check "refusal names the directory" has "$work/open" "$err"

# --- usage and help ----------------------------------------------------------------------------------
expect 2 "no command" 
expect 2 "unknown command" frobnicate
expect 2 "unknown flag" ls --frob
expect 2 "ls takes no arguments" ls extra
expect 2 "--cache-dir without a value" ls --cache-dir
expect 2 "--json on clear" clear --json
expect 0 "--help" --help
check "help lists commands" bash -c "for c in ls stats show verify prune rm clear config export import explain; do \
  grep -q \"^  \$c \" '$out' || exit 1; done"
expect 0 "help prune" help prune
check "help prune usage" has "usage: dlcc-cache prune" "$out"
expect 0 "explain --help" explain --help
check "explain --help usage" has "usage: dlcc-cache explain" "$out"
expect 2 "help unknown" help frobnicate

# A database from a newer dlcc (schema version 99) is refused but is NOT damaged: `clear` must
# not delete it.
"$py" -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version=99"); c.commit()' "$DLCC_CACHE_DIR/cache.db"
expect 1 "clear on a database of a newer dlcc is refused" clear
check "the newer database is kept" test -s "$DLCC_CACHE_DIR/cache.db"
rm -f "$DLCC_CACHE_DIR"/cache.db*

# A damaged database: every command refuses it with the store's warning, and `clear` (which the
# warning recommends) starts afresh instead of failing too.
head -c 4096 /dev/urandom >"$DLCC_CACHE_DIR/cache.db"
chmod 600 "$DLCC_CACHE_DIR/cache.db"
expect 1 "ls on a damaged database" ls
check "the warning names the database and the fix" has "run dlcc-cache clear" "$err"
expect 0 "clear on a damaged database" clear
check "clear says it removed the damaged database" has "removed the damaged cache database" "$out"
expect 0 "stats after clear" stats
check "a fresh, empty cache after clear" has "entries: *0" "$out"

finish
