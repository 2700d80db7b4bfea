#!/usr/bin/env bash
# Accumulates of several elements from threads sharing a window over the fabric: `onesided bench
# acc_rate` (an accumulate of four u64 + flush, in a lock_all epoch, rank 0 to rank 1) with -t 0,
# 1 and 2, over libfabric's shm provider and over tcp with the NIC's atomics only
# (ONESIDED_FABRIC_ATOMICS=verbs, so that tcp takes the paths of InfiniBand's atomics instead of
# serving accumulates at the target), each with an endpoint per thread
# (ONESIDED_FABRIC_THREADS=endpoints, the default) and through the window's thread (=window),
# every run in turns in each round. Prints the median message rate of each and its runs.
#
# usage: compare/acc_threads.sh [ROUNDS] [ITERS]       (default 5, 20000; BIN, default
#                                                       target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-5}
ITERS=${2:-20000}
[[ -x $BIN/onesided ]] || { echo "acc_threads: build $BIN/onesided first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((round = 1; round <= ROUNDS; round++)); do
  for prov in shm tcp; do
    atomics=auto
    [[ $prov == tcp ]] && atomics=verbs
    for t in 0 1 2; do
      for threads in endpoints window; do
        [[ $t == 0 && $threads == window ]] && continue
        ONESIDED_FABRIC_ATOMICS=$atomics ONESIDED_FABRIC_THREADS=$threads ONESIDED_TRANSPORT=fabric \
          FI_PROVIDER=$prov "$BIN/onesided" bench acc_rate -t "$t" -i "$ITERS" -x 200 \
          | awk '!/^#/ { print $2 }' >> "$work/$prov.$threads.$t"
      done
    done
  done
done
echo "acc_rate, $ROUNDS rounds: messages/s, median (runs, lowest first)"
for prov in shm tcp; do
  for threads in endpoints window; do
    for t in 0 1 2; do
      f=$work/$prov.$threads.$t
      [[ -s $f ]] || continue
      sort -g "$f" | awk -v name="$prov $threads t$t" '
        { v[NR] = $1 } END {
          m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%-22s %10.0f  (", name, m
          for (i = 1; i <= NR; i++) printf "%s%.0f", (i > 1 ? " " : ""), v[i]
          print ")"
        }'
    done
  done
done
