#!/usr/bin/env bash
# How soon a waiting rank sees a late one, over shared memory: `examples/late_arrival.rs` (rank 1
# computes 3 ms before it enters a fence, completes a PSCW epoch or releases the exclusive lock
# rank 0 waits for) at 2, 3 and 4 ranks, ROUNDS jobs each. With BEFORE=path/to/late_arrival (the
# example built from an earlier commit), that build runs too, in turns with this one. Prints
# each job's median time seen after the late rank, in us.
#
# usage: compare/late_arrival.sh [ROUNDS]      (default 3; RANKS, default "2 3 4")
# needs: cargo build --release -p onesided-cli --example late_arrival
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
RANKS=${RANKS:-2 3 4}
for f in "$BIN/onesided" "$BIN/examples/late_arrival" ${BEFORE:+"$BEFORE"}; do
  [[ -x $f ]] || { echo "late_arrival: $f is missing (see the usage above)" >&2; exit 1; }
done
builds=(now)
[[ -n ${BEFORE:-} ]] && builds=(before now)
printf '%-7s %-6s %-6s %s\n' build ranks wait "seen after (us), one job per round"
for n in $RANKS; do
  for build in "${builds[@]}"; do
    exe=$BIN/examples/late_arrival
    [[ $build == before ]] && exe=$BEFORE
    for ((round = 1; round <= ROUNDS; round++)); do
      "$BIN/onesided" run -n "$n" -- "$exe"
    done | awk -v b="$build" -v n="$n" '/^late_arrival/ {
        mode = $2; sub(":", "", mode)
        for (i = 1; i < NF; i++) if ($i == "seen") seen[mode] = seen[mode] " " $(i + 1) }
      END { for (m in seen) printf "%-7s %-6s %-6s%s\n", b, n, m, seen[m] }' | sort -k3
  done
done
