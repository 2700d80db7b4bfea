#!/usr/bin/env bash
# rxe/perftest.sh: perftest's latency tests over the rxe device, in the rxe guest.
#
# usage: rxe/run.sh -f rxe/perftest.sh                     all three tests
#        rxe/run.sh 'rxe/perftest.sh ib_write_lat'         only the ones named
#        (in the guest, or on a host with a RoCE device: rxe/perftest.sh [TEST ...])
#   TEST is a perftest latency program: ib_write_lat, ib_read_lat, ib_atomic_lat (the default set,
#   in that order), or ib_send_lat. For each one the server runs in the background and the client
#   against the device's own IPv4 address, both bounded by timeout, with -d DEVICE -x GID -n ITERS;
#   then one line on stdout:
#       perftest TEST typical_us=X min_us=Y
#   (the client's t_typical and t_min, microseconds), or, when it fails, the output of both sides
#   and a line "perftest TEST FAIL (...)". Exit status: 0 when every test passed, 1 when one
#   failed, 2 for a usage error.
# environment:
#   PERFTEST_ITERS    iterations (-n; default 1000)
#   PERFTEST_DEVICE   the RDMA device (-d; default rxe0)
#   PERFTEST_PORT     the TCP port the two sides meet on (-p; default 18515)
#   PERFTEST_TIMEOUT  seconds each side may take (default 120)
#   PERFTEST_ARGS     more arguments for both sides (e.g. "-s 8"), split on blanks
# The GID index is not fixed: it is the device's first RoCE v2 GID that is IPv4-mapped
# (::ffff:a.b.c.d), read from /sys/class/infiniband/DEVICE/ports/1/gids/* and gid_attrs/types/*,
# and the address the client connects to is the a.b.c.d of that GID.
#
# Sourced (". rxe/perftest.sh"), it only defines the functions: perftest_gid prints "INDEX ADDRESS"
# and perftest_one TEST runs one test and prints its line, so another script can interleave
# these runs with its own.

PERFTEST_DEFAULT_TESTS=(ib_write_lat ib_read_lat ib_atomic_lat)

# perftest_gid [DEVICE]: "INDEX ADDRESS" of the first RoCE v2 IPv4-mapped GID of port 1.
perftest_gid() {
  local dev=${1:-${PERFTEST_DEVICE:-rxe0}} port i gid type a b
  port=/sys/class/infiniband/$dev/ports/1
  [[ -d $port/gids ]] || { echo "perftest: no device $dev (no $port/gids)" >&2; return 1; }
  for ((i = 0; ; i++)); do
    [[ -e $port/gids/$i ]] || break
    read -r gid < "$port/gids/$i" 2> /dev/null || continue
    [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]] || continue
    # unpopulated entries have no type (reading it fails)
    read -r type < "$port/gid_attrs/types/$i" 2> /dev/null || continue
    [[ $type == "RoCE v2" ]] || continue
    a=${gid:30:4} b=${gid:35:4}
    echo "$i $((16#${a:0:2})).$((16#${a:2:2})).$((16#${b:0:2})).$((16#${b:2:2}))"
    return 0
  done
  echo "perftest: $dev port 1 has no RoCE v2 IPv4-mapped GID (is its netdev up with an IPv4 address?)" >&2
  return 1
}

# perftest_listening PORT: whether a TCP socket listens on PORT (from /proc, without a program).
perftest_listening() {
  local hex line f
  printf -v hex '%04X' "$1"
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r $f ]] || continue
    while read -r line; do
      # "sl local_address rem_address st ...": local port $hex, state 0A (LISTEN)
      [[ $line =~ ^[0-9]+:\ [0-9A-F]+:$hex\ [0-9A-F]+:[0-9A-F]+\ 0A\  ]] && return 0
    done < "$f"
  done
  return 1
}

# perftest_one TEST: run TEST's server and client; print "perftest TEST typical_us=X min_us=Y".
# perftest times with the TSC at a rate it measures against gettimeofday when it starts; on an
# emulated CPU whose host is busy that measurement can fail (stderr: "Correlation coefficient
# r^2: ... < 0.9") and every latency then reads inf. Such a run is repeated, up to
# PERFTEST_TRIES times in all (default 3), with a "note:" line saying so.
perftest_one() {
  local test=$1 dev=${PERFTEST_DEVICE:-rxe0} iters=${PERFTEST_ITERS:-1000}
  local port=${PERFTEST_PORT:-18515} limit=${PERFTEST_TIMEOUT:-120} tries=${PERFTEST_TRIES:-3}
  local extra=() args gidaddr idx addr srv cli spid src crc line try
  [[ $test =~ ^ib_[a-z]+_lat$ ]] || { echo "perftest: '$test' is not a perftest latency test (ib_*_lat)" >&2; return 2; }
  [[ $iters =~ ^[1-9][0-9]*$ ]] || { echo "perftest: PERFTEST_ITERS must be a number, not '$iters'" >&2; return 2; }
  [[ $tries =~ ^[1-9][0-9]*$ ]] || { echo "perftest: PERFTEST_TRIES must be a number, not '$tries'" >&2; return 2; }
  command -v "$test" > /dev/null || { echo "perftest $test FAIL (not installed: perftest package)"; return 1; }
  gidaddr=$(perftest_gid "$dev") || { echo "perftest $test FAIL (no GID)"; return 1; }
  read -r idx addr <<< "$gidaddr"
  # shellcheck disable=SC2206  # PERFTEST_ARGS is split on blanks on purpose
  [[ -n ${PERFTEST_ARGS:-} ]] && extra=(${PERFTEST_ARGS})
  args=(-d "$dev" -x "$idx" -n "$iters" -p "$port" -F ${extra[@]+"${extra[@]}"})
  srv=$(mktemp) cli=$(mktemp)
  for ((try = 1; try <= tries; try++)); do
    timeout -k 5 "$limit" "$test" "${args[@]}" > "$srv" 2>&1 &
    spid=$!
    # the client may connect once the server listens (10 s at most)
    for _ in {1..100}; do
      perftest_listening "$port" && break
      kill -0 "$spid" 2> /dev/null || break
      sleep 0.1
    done
    timeout -k 5 "$limit" "$test" "${args[@]}" "$addr" > "$cli" 2>&1
    crc=$?
    [[ $crc -ne 0 ]] && kill "$spid" 2> /dev/null
    wait "$spid"
    src=$?
    # the client's table: a header with t_min[usec] and t_typical[usec], then a row of values
    line=$(awk '
      /t_typical/ { for (i = 1; i <= NF; i++) { if ($i ~ /^t_min/) m = i; if ($i ~ /^t_typical/) t = i }; next }
      t && m && $1 ~ /^[0-9]+$/ { printf "typical_us=%s min_us=%s\n", $t, $m; exit }' "$cli")
    [[ $crc -eq 0 && $src -eq 0 ]] || break
    if [[ $line =~ ^typical_us=[0-9.]+\ min_us=[0-9.]+$ ]]; then
      echo "perftest $test $line"
      rm -f "$srv" "$cli"
      return 0
    fi
    [[ -n $line && $try -lt $tries ]] \
      && echo "note: $test: perftest read '$line' (its clock calibration failed: $(grep -m1 -o 'r^2.*' "$cli" || echo '?')); run $((try + 1)) of $tries"
  done
  echo "-- $test client ($addr, GID index $idx), exit $crc:"; cat "$cli"
  echo "-- $test server, exit $src:"; cat "$srv"
  if [[ -n $line ]]; then line=", read: $line"; else line=", no latency line"; fi
  echo "perftest $test FAIL (client exit $crc, server exit $src$line)"
  rm -f "$srv" "$cli"
  return 1
}

# run as a program (not sourced): the tests named, or the default three
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  tests=("$@")
  [[ $# -gt 0 ]] || tests=("${PERFTEST_DEFAULT_TESTS[@]}")
  failed=0
  for t in "${tests[@]}"; do
    perftest_one "$t"
    case $? in 0) ;; 2) exit 2;; *) failed=1;; esac
  done
  exit "$failed"
fi
