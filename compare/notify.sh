#!/usr/bin/env bash
# Notified puts against what MPI-4.1 offers for a hand-off: `onesided bench notify_latency`
# (a ping-pong of SIZE bytes, put_notify + wait_notify against put + flush + a flag put and its
# flush, which the target polls; both ways in turns in one job) over shared memory, libfabric's
# tcp provider and libfabric's shm provider (TRANSPORTS picks among those and, on a host with an
# RDMA device, `verbs` and `fabric_verbs`). For each transport and size it prints the median
# over the rounds of the half round trips and of the ratio flag / notified, with its range.
#
# usage: compare/notify.sh [ROUNDS]      (default 3; SIZES, default "8 4096 65536";
#                                         TRANSPORTS, default "shm fabric_tcp fabric_shm";
#                                         ITERS: -i of each job, OSU's counts if unset)
#   over software RoCE: rxe/run.sh -e BIN=$PWD/target/rxe \
#       'TRANSPORTS="verbs fabric_verbs" compare/notify.sh 3'
# needs: cargo build --release -p onesided-cli (BIN, default target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
SIZES=${SIZES:-8 4096 65536}
TRANSPORTS=${TRANSPORTS:-shm fabric_tcp fabric_shm}
[[ -x $BIN/onesided ]] || { echo "notify: build $BIN/onesided first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# job NAME SIZE ENV...: one job; appends "notified flag" (us) to $work/NAME.SIZE
job() {
  local name=$1 size=$2
  shift 2
  env "$@" "$BIN/onesided" bench notify_latency -m "$size:$size" --format csv "${args[@]}" \
    ${ITERS:+-i "$ITERS" -x 10} > "$work/out"
  awk -F, '$7 == "us" { n = $10 } $7 == "us flag" { f = $10 } END { print n, f }' \
    "$work/out" >> "$work/$name.$size"
}

for ((round = 1; round <= ROUNDS; round++)); do
  for size in $SIZES; do
    for name in $TRANSPORTS; do
      case $name in
        shm) args=(); job shm "$size" ONESIDED_TRANSPORT=auto ;;
        fabric_tcp) args=(--transport fabric); job "$name" "$size" FI_PROVIDER=tcp ;;
        fabric_shm) args=(--transport fabric); job "$name" "$size" FI_PROVIDER=shm ;;
        fabric_verbs) args=(--transport fabric); job "$name" "$size" FI_PROVIDER=verbs ;;
        verbs) args=(--transport verbs); job "$name" "$size" ;;
        *) echo "notify: unknown transport $name" >&2; exit 1 ;;
      esac
    done
  done
done

echo "notify_latency, $ROUNDS rounds; half round trips in us (medians) and flag / notified: median (range)"
printf '%-12s %-8s %-12s %-12s %s\n' transport size notified flag ratio
for name in $TRANSPORTS; do
  for size in $SIZES; do
    awk -v name="$name" -v size="$size" '
      function median(a, k,   i, j, t) {
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
      }
      { k++; n[k] = $1; f[k] = $2; r[k] = $2 / $1 }
      END {
        lo = hi = r[1]
        for (i = 1; i <= k; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
        printf "%-12s %-8s %-12.2f %-12.2f %.2f (%.2f-%.2f)\n", name, size, median(n, k), median(f, k), median(r, k), lo, hi
      }' "$work/$name.$size"
  done
done
