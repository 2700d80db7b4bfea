#!/usr/bin/env bash
# Threads sharing a window over the direct verbs transport: `onesided bench TEST -t T` (put_rate:
# 8-byte put + flush in a lock_all epoch, rank 0 to rank 1; or get_rate, fop_rate, acc_rate)
# with -t 0 (rank 0's own thread calls the window, no sharing), 1, 2 and 4 threads, with the
# endpoint's lanes (the default of a world at MPI_THREAD_MULTIPLE, which the rate tests ask for:
# each thread puts, gets and runs NIC atomics through a lane) and without (ONESIDED_VERBS_LANES=0:
# every call of a thread goes through the window's thread), every run in turns in each round.
# Prints per variant the median over the rounds of the message rate of each thread count, and
# the ratio lanes / window's thread at each count with its range.
#
# usage: compare/verbs_threads.sh [ROUNDS] [TEST]      (default 3, put_rate; on a host with an
#        RDMA device) or, over software RoCE:
#        rxe/run.sh -e BIN=$PWD/target/rxe 'compare/verbs_threads.sh 3 put_rate'
# environment: BIN (default target/release), ITERS (calls per thread, default 2000)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
TEST=${2:-put_rate}
ITERS=${ITERS:-2000}
[[ -x $BIN/onesided ]] || { echo "verbs_threads: $BIN/onesided is missing" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
THREADS="0 1 2 4"

# run NAME T ENV...: one job of TEST with -t T; appends its rate to $work/NAME.T
run() {
  local name=$1 t=$2
  shift 2
  env ONESIDED_TRANSPORT=verbs "$@" timeout 300 "$BIN/onesided" bench "$TEST" -t "$t" -i "$ITERS" |
    awk '!/^#/ { print $2 }' >> "$work/$name.$t"
}

for ((round = 1; round <= ROUNDS; round++)); do
  for t in $THREADS; do
    run lanes "$t"
    run window "$t" ONESIDED_VERBS_LANES=0
  done
done

echo "$TEST over direct verbs, $ROUNDS rounds, $ITERS calls per thread: messages/s (median)"
printf '%-8s %10s %10s %10s %10s\n' variant t0 t1 t2 t4
for name in lanes window; do
  printf '%-8s' "$name"
  for t in $THREADS; do
    sort -g "$work/$name.$t" | awk '{ a[NR] = $1 } END { printf " %10.0f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
  done
  echo
done
echo "lanes / window's thread, median (range):"
for t in $THREADS; do
  paste "$work/lanes.$t" "$work/window.$t" | awk '{ print $1 / $2 }' | sort -g | awk -v t="$t" '
    { r[NR] = $1 }
    END {
      printf "  t%s: %.2f (%.2f-%.2f)\n", t, NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2, r[1], r[NR]
    }'
done
