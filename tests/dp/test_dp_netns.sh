#!/usr/bin/env bash
# tests/dp/test_dp_netns.sh — data-parallel training across two "hosts" on one machine: two
# network namespaces joined by a veth pair (ip netns), one rank in each, Open MPI over TCP
# between them (btl self,tcp: no shared memory), started by mpirun in the first namespace with
# an rsh agent that runs the second host's daemon in its namespace. The multi-host path, not
# only shared memory:
#   - params identical on both ranks after every step, and the same bits as over shared memory
#     (the reduction's order does not depend on the transport);
#   - a rank that exits mid-run makes rank 0 fail within the 3 s timeout, naming it.
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) for the namespaces: exit 77 (skip) when they cannot
# be made, or when mpirun or the plugin is missing.
# usage: test_dp_netns.sh DLCC TEST_DP SOURCE_DIR
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
src=$(cd "$3" && pwd)
source "$src/tests/harness/cli_lib.sh"

source "$src/tests/dp/lib.sh"
# Names unique to this run (parallel test runs), veth names at most 15 characters.
id=$(( $$ % 100000 ))
h1=dlcch1_$id h2=dlcch2_$id v1=dlccva$id v2=dlccvb$id
net=10.$(( 100 + $$ % 100 )).$(( $$ / 100 % 250 ))
cleanup() {
  ip netns del "$h1" 2>/dev/null
  ip netns del "$h2" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$h1" 2>/dev/null; then
  echo "skip: cannot create network namespaces here (needs root: ip netns add)"
  exit 77
fi
ip netns add "$h2" &&
  ip link add "$v1" type veth peer name "$v2" &&
  ip link set "$v1" netns "$h1" && ip link set "$v2" netns "$h2" &&
  ip -n "$h1" addr add "$net.1/24" dev "$v1" && ip -n "$h2" addr add "$net.2/24" dev "$v2" &&
  ip -n "$h1" link set "$v1" up && ip -n "$h2" link set "$v2" up &&
  ip -n "$h1" link set lo up && ip -n "$h2" link set lo up
check "two namespaces joined by a veth pair ($net.1, $net.2)" test $? -eq 0

# The rsh agent: `rsh HOST COMMAND...` runs COMMAND in HOST's namespace.
cat > rsh <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $net.1) ns=$h1 ;;
  $net.2) ns=$h2 ;;
  *) echo "rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x rsh
printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" > hosts
two_hosts=(timeout 120 ip netns exec "$h1" mpirun --hostfile hosts -np 2
  --mca plm_rsh_agent "$work/rsh" --mca plm_rsh_no_tree_spawn 1
  --mca btl self,tcp --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24")


runc "$dlcc" compile --no-cache -D N=16 "$src/samples/mlp_fmnist.dlg" -o mlp16.so
check "compile" test "$rc" -eq 0
runc "${two_hosts[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK: $(ip -br addr | grep -o "10[.0-9]*/24")"'
cat "$out"
check "one rank in each namespace" test "$(sort -u "$out" | wc -l)" -eq 2
runc "${two_hosts[@]}" "$prog" train mlp16.so 4 tcp.bin --bucket 262144
cat "$out"
check "2 hosts over TCP: params identical after every step" \
  test "$rc" -eq 0 -a "$(grep -c ' ranks identical$' "$out")" -eq 4
steps "$out" > tcp.txt
runc "${mpi[@]}" "$prog" train mlp16.so 4 shm.bin --bucket 262144
steps "$out" > shm.txt
check "the same bits as over shared memory" cmp -s tcp.txt shm.txt
check "... the same final params" cmp -s tcp.bin shm.bin

t0=$(date +%s.%N)
runc "${two_hosts[@]}" --mca orte_abort_on_non_zero_status 0 "$prog" train mlp16.so 5 f.bin \
  --timeout 3 --fail-rank 1 --fail-step 2
t1=$(date +%s.%N)
grep -E "^rank" "$err"
check "a rank that exits on the other host: rank 0 stops naming it" \
  grep -qE "^rank 0: step 3 failed after [0-9.]+ s: .*no answer from rank 1 within 3 s" "$err"
secs=$(sed -nE 's/^rank 0: step 3 failed after ([0-9.]+) s.*/\1/p' "$err")
wall=$($py -c "print(round($t1 - $t0, 2))")
check "... after 3 to 6 s (took ${secs:-?} s; mpirun returned after $wall s)" \
  $py -c "import sys; sys.exit(not (3.0 <= float('${secs:-0}') < 6.0))"
finish
