#!/usr/bin/env bash
# The direct verbs transport against its floor on the same device: perftest's ib_write_lat,
# ib_read_lat and ib_atomic_lat beside onesided's 8-byte put + flush, get, fetch_and_op and
# compare_and_swap (`onesided bench ... --transport verbs --per-op`, 64-bit elements so that the
# atomics run on the NIC), interleaved in rounds of quads (perftest, onesided, onesided,
# perftest), so that drift weighs on both alike. Prints each round's pairs, then per operation
# the median ratio over the rounds and its range.
#
# usage: compare/verbs_floor.sh [ROUNDS]        (default 3)
#   on a host with an RDMA device:  BIN=target/release compare/verbs_floor.sh 5
#   over software RoCE (rxe/README.md), in the guest:
#     cargo build --release && rxe/run.sh -e BIN=$PWD/target/release 'compare/verbs_floor.sh 3'
# environment: BIN (a directory holding the onesided command; default target/release), ITERS
#   (iterations of each measurement; default 1000), PERFTEST_DEVICE (default: the first device
#   listed in /sys/class/infiniband), and the PERFTEST_* settings of rxe/perftest.sh.
#
# What is compared: ib_write_lat reports half a ping-pong of writes (one way), while a put +
# flush waits for its completion (a round trip): the floor of that row is 2 x ib_write_lat,
# which is what the ratio is taken against. ib_read_lat and ib_atomic_lat are round trips, as
# get and the atomics are. Under software RoCE the CPU is emulated: the ratios say how far the
# library's path is from perftest's on the same emulated machine, not what a real HCA gives.
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
BIN=${BIN:-target/release}
ITERS=${ITERS:-1000}
export PERFTEST_ITERS=$ITERS
if [[ -z ${PERFTEST_DEVICE:-} ]]; then
  PERFTEST_DEVICE=$(ls /sys/class/infiniband 2> /dev/null | head -1)
  export PERFTEST_DEVICE
fi
[[ -n $PERFTEST_DEVICE ]] || { echo "verbs_floor: no RDMA device (see rxe/README.md)" >&2; exit 1; }
[[ -x $BIN/onesided ]] || { echo "verbs_floor: no $BIN/onesided (cargo build --release)" >&2; exit 1; }
# shellcheck source=../rxe/perftest.sh
. rxe/perftest.sh

# perftest TEST: its typical microseconds (one number), or nothing on failure
floor() {
  local line
  line=$(perftest_one "$1" | grep "^perftest $1 typical_us=") || return 1
  line=${line#*typical_us=}
  echo "${line%% *}"
}

# ours TEST [ARGS]: the median microseconds of onesided's 8-byte TEST over direct verbs
ours() {
  local test=$1
  shift
  "$BIN/onesided" bench "$test" --transport verbs -i "$ITERS" -x $((ITERS / 10)) \
    --per-op --format csv -r 1 "$@" 2> /dev/null | awk -F, 'NR == 2 { print $12 }'
}

# (name, perftest test, the floor's multiple, onesided test and arguments)
ROWS=(
  "put+flush|ib_write_lat|2|put_latency -m 8:8 -s flush"
  "get|ib_read_lat|1|get_latency -m 8:8 -s flush"
  "fetch_and_op|ib_atomic_lat|1|fop_latency -T long"
  "compare_and_swap|ib_atomic_lat|1|cas_latency -T long"
)
declare -A RATIOS
for ((r = 1; r <= ROUNDS; r++)); do
  for row in "${ROWS[@]}"; do
    IFS='|' read -r name test times cmd <<< "$row"
    # shellcheck disable=SC2086  # the command's words
    a=$(floor "$test"); b=$(ours $cmd); c=$(ours $cmd); d=$(floor "$test")
    if [[ -z $a || -z $b || -z $c || -z $d ]]; then
      echo "round $r $name: a run printed no number (perftest $a $d, onesided $b $c): left out"
      continue
    fi
    line=$(awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v k="$times" 'BEGIN {
      f = k * (a + d) / 2; o = (b + c) / 2
      printf "%.2f %.2f %.3f", f, o, o / f }')
    read -r f o ratio <<< "$line"
    RATIOS[$name]+="$ratio "
    echo "round $r $name: floor ${f} us ($test x$times: $a, $d), onesided ${o} us ($b, $c), ratio $ratio"
  done
done
echo "verbs_floor: median ratio onesided / floor over $ROUNDS rounds ($PERFTEST_DEVICE, $ITERS iterations each):"
for row in "${ROWS[@]}"; do
  name=${row%%|*}
  # shellcheck disable=SC2086
  printf '%s\n' ${RATIOS[$name]:-} | grep . | sort -g | awk -v n="$name" '
    { v[NR] = $1 } END {
      if (NR == 0) { printf "  %-17s no round\n", n; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "  %-17s %.3f (range %.3f-%.3f, %d rounds)\n", n, m, v[1], v[NR], NR }'
done
