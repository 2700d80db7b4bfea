#!/usr/bin/env bash
# Threads sharing a window (`Window::share`): `onesided bench put_rate` (8-byte put + flush, in
# a lock_all epoch, rank 0 to rank 1; or get_rate, fop_rate, acc_rate, notify_rate) with -t 0
# (rank 0's own thread calls the window, no sharing), -t 1, -t 2 and -t 4 threads, over shared memory and libfabric's tcp and shm
# providers, the fabric ones with an endpoint per thread (ONESIDED_FABRIC_THREADS=endpoints, the
# default) and with every call through the window's thread (=window), every run in turns in each
# round. Prints, per transport, the median over the rounds of the message rate of each thread
# count, and the ratios t1/t0 and t2/t1 with their range.
#
# With SYNC fence, the calls are made in a fence epoch without flushes (`-s fence`: a fence on
# every rank opens the epoch, rank 0 times its calls and the fence that closes it).
#
# usage: compare/threads.sh [ROUNDS] [TEST] [SYNC]      (default 5, put_rate, flush)
# needs: cargo build --release --bin onesided
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-5}
TEST=${2:-put_rate}
SYNC=${3:-flush}
[[ -x $BIN/onesided ]] || { echo "threads: $BIN/onesided is missing (see the usage above)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
THREADS="0 1 2 4"

# run NAME T ITERS ENV...: one job of TEST with -t T and -i ITERS; appends its rate to
# $work/NAME.T
run() {
  local name=$1 t=$2 iters=$3
  shift 3
  env "$@" "$BIN/onesided" bench "$TEST" -s "$SYNC" -t "$t" -i "$iters" | awk '!/^#/ { print $2 }' >> "$work/$name.$t"
}

# Iterations per thread: tens to hundreds of milliseconds of calls on each transport, so that
# starting the threads (and over the fabric their endpoints) is lost in them.
NAMES="shm fabric_tcp tcp_window fabric_shm shm_window"
for ((round = 1; round <= ROUNDS; round++)); do
  for t in $THREADS; do
    run shm "$t" 2000000 ONESIDED_TRANSPORT=auto
    for threads in endpoints window; do
      name=fabric_tcp fast=fabric_shm
      [[ $threads == window ]] && name=tcp_window fast=shm_window
      run "$name" "$t" 20000 ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp ONESIDED_FABRIC_THREADS=$threads
      run "$fast" "$t" 200000 ONESIDED_TRANSPORT=fabric FI_PROVIDER=shm ONESIDED_FABRIC_THREADS=$threads
    done
  done
done

echo "$TEST -s $SYNC, $ROUNDS rounds: messages/s (median), ratios median (range)"
printf '%-12s %12s %12s %12s %12s   %-22s %s\n' transport t0 t1 t2 t4 "t1/t0" "t2/t1"
for name in $NAMES; do
  paste "$work/$name.0" "$work/$name.1" "$work/$name.2" "$work/$name.4" | awk -v name="$name" '
    function median(a, k,   i, j, t, b) {
      for (i = 1; i <= k; i++) b[i] = a[i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
      return k % 2 ? b[(k + 1) / 2] : (b[k / 2] + b[k / 2 + 1]) / 2
    }
    function range(a, k,   i, lo, hi) {
      lo = hi = a[1]
      for (i = 1; i <= k; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
      return sprintf("%.3f (%.3f-%.3f)", median(a, k), lo, hi)
    }
    { k++; t0[k] = $1; t1[k] = $2; t2[k] = $3; t4[k] = $4; r10[k] = $2 / $1; r21[k] = $3 / $2 }
    END {
      printf "%-12s %12.0f %12.0f %12.0f %12.0f   %-22s %s\n", name, median(t0, k), median(t1, k),
        median(t2, k), median(t4, k), range(r10, k), range(r21, k)
    }'
done
