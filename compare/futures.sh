#!/usr/bin/env bash
# Requests awaited as futures against the same requests waited for (`examples/request_overlap.rs`,
# 2 ranks): one 8-byte `rget` awaited on `futures`' executor against one `rget` + `wait`, and 64
# `rget`s joined (`join_all`) against `wait_all`, over shared memory, libfabric's tcp provider
# and libfabric's shm provider, the transports in turns in each round. Prints, per transport,
# the median over the rounds of each ratio and its range.
#
# usage: compare/futures.sh [ROUNDS]      (default 3)
# needs: cargo build --release --bin onesided --example request_overlap
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
for f in "$BIN/onesided" "$BIN/examples/request_overlap"; do
  [[ -x $f ]] || { echo "futures: $f is missing (see the usage above)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# job NAME ENV...: one job; appends "one joined" (the two ratios) to $work/NAME
job() {
  local name=$1
  shift
  env "$@" "$BIN/onesided" run -n 2 -- "$BIN/examples/request_overlap" > "$work/out" 2>&1
  awk '/^awaited:/ { for (i = 1; i <= NF; i++) if ($i ~ /^\(/) r[++k] = substr($i, 2, length($i) - 2)
                     print r[1], r[2] }' "$work/out" >> "$work/$name"
}

for ((round = 1; round <= ROUNDS; round++)); do
  job shm ONESIDED_TRANSPORT=auto
  job fabric_tcp ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp
  job fabric_shm ONESIDED_TRANSPORT=fabric FI_PROVIDER=shm
done

echo "request_overlap, $ROUNDS rounds: awaited / waited, median (range)"
printf '%-12s %-28s %s\n' transport "one rget: awaited / wait" "64 rgets: joined / wait_all"
for name in shm fabric_tcp fabric_shm; do
  awk -v name="$name" '
    function median(a, k,   i, j, t) {
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { k++; o[k] = $1; j[k] = $2 }
    END {
      if (k == 0) { printf "%-12s no result\n", name; exit }
      lo1 = hi1 = o[1]; lo2 = hi2 = j[1]
      for (i = 1; i <= k; i++) {
        if (o[i] < lo1) lo1 = o[i]; if (o[i] > hi1) hi1 = o[i]
        if (j[i] < lo2) lo2 = j[i]; if (j[i] > hi2) hi2 = j[i]
      }
      printf "%-12s %-28s %s\n", name, sprintf("%.2fx (%.2f-%.2f)", median(o, k), lo1, hi1),
        sprintf("%.2fx (%.2f-%.2f)", median(j, k), lo2, hi2)
    }' "$work/$name"
done
