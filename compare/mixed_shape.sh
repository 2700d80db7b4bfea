#!/usr/bin/env bash
# The cluster's shape against its parts: `onesided bench mixed_epochs` (rounds of fence, PSCW,
# lock and lock_all epochs, about 20 operations per rank, two barriers) as two simulated nodes
# (shared memory inside a node, libfabric's tcp across) against the same job over tcp to
# every target, at 3, 4 and 8 ranks, in rounds of quads (tcp, mixed, mixed, tcp) so that the
# drift of a shared machine weighs on both alike. For each it prints the median over the
# rounds of the ratios mixed / tcp of the job's wall time and CPU time (user + system, every
# rank and thread), with their ranges, and the time per round of each side.
#
# usage: compare/mixed_shape.sh [ROUNDS]      (default 3; ITERS rounds of the workload per job,
#                                              default 300; RANKS, default "3 4 8")
# needs: cargo build --release -p onesided-cli (BIN, default target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
ITERS=${ITERS:-300}
RANKS=${RANKS:-3 4 8}
[[ -x $BIN/onesided ]] || { echo "mixed_shape: build $BIN/onesided first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# job SIDE N: one job; appends "wall cpu per_round_us" to $work/SIDE.N
job() {
  local side=$1 n=$2 args=()
  local env=(FI_PROVIDER=tcp)
  case $side in
    tcp) env+=(ONESIDED_TRANSPORT=fabric) ;;
    mixed) args=(--simulate-nodes 2) ;;
  esac
  env "${env[@]}" /usr/bin/time -f '%e %U %S' -o "$work/time" "$BIN/onesided" bench \
    mixed_epochs -n "$n" -i "$ITERS" -x 5 "${args[@]}" > "$work/out"
  local per_round
  per_round=$(grep -vE '^#|^$' "$work/out" | tail -1 | awk '{ print $2 }')
  awk -v r="$per_round" '{ print $1, $2 + $3, r }' "$work/time" >> "$work/$side.$n"
}

for ((round = 1; round <= ROUNDS; round++)); do
  for n in $RANKS; do
    job tcp "$n"; job mixed "$n"; job mixed "$n"; job tcp "$n"
  done
done

# Per N: pair the k-th tcp job with the k-th mixed job (quads keep them adjacent).
echo "mixed_epochs, $ITERS rounds per job, $ROUNDS rounds of quads; ratios mixed / tcp: median (range)"
printf '%-6s %-24s %-24s %-16s %-16s\n' ranks wall cpu "tcp us/round" "mixed us/round"
for n in $RANKS; do
  paste -d' ' "$work/tcp.$n" "$work/mixed.$n" | awk -v n="$n" '
    function median(a, k,   i, j, t) {
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { k++; w[k] = $4 / $1; c[k] = $5 / $2; t[k] = $3; m[k] = $6 }
    END {
      for (i = 1; i <= k; i++) { ws[i] = w[i]; cs[i] = c[i] }
      lo_w = hi_w = w[1]; lo_c = hi_c = c[1]
      for (i = 1; i <= k; i++) {
        if (w[i] < lo_w) lo_w = w[i]; if (w[i] > hi_w) hi_w = w[i]
        if (c[i] < lo_c) lo_c = c[i]; if (c[i] > hi_c) hi_c = c[i]
      }
      printf "%-6s %-24s %-24s %-16.0f %-16.0f\n", n,
        sprintf("%.2f (%.2f-%.2f)", median(ws, k), lo_w, hi_w),
        sprintf("%.2f (%.2f-%.2f)", median(cs, k), lo_c, hi_c), median(t, k), median(m, k)
    }'
done
