#!/usr/bin/env bash
# IMB-RMA's benchmarks through `onesided bench imb` (2 ranks): Truly_passive_put over every
# transport (TRANSPORTS), and, where IMB_RMA names an IMB-RMA binary built against an MPI
# library, all of them against that library in one run.
#
# Truly_passive_put times put + flush + barrier while the target waits in the barrier (t_pure),
# then while it computes for t_pure before each barrier, outside the library (t_ovrl). A put
# that completes while the target computes gives t_ovrl about t_pure plus one barrier; one that
# waits for the target, about 2 t_pure. Printed per transport and size: the medians over the
# rounds and t_ovrl / t_pure, median (range).
#
# With IMB_RMA set, each round also runs `$MPIRUN -np 2 $IMB_RMA -msglog 3:$LOG` and the same
# list through `onesided bench imb -n 2 -m 8:2^LOG` over shared memory (windows of
# MPI_Win_create, as IMB's), compares them with `onesided bench compare` and prints, per
# benchmark and column, the geometric mean over the sizes of onesided / MPI (latency: below 1 is
# onesided faster).
#
# usage: compare/imb.sh [ROUNDS]   (default 3; SIZES "MIN:MAX" of Truly_passive_put, default
#                                   "8:4M"; TRANSPORTS, default "shm fabric_tcp fabric_shm", on
#                                   an RDMA host also "verbs fabric_verbs"; IMB_RMA, MPIRUN
#                                   (default "mpirun --oversubscribe"), LOG (default 16))
#   IMB-RMA: make -C src_c -f Makefile TARGET=RMA CC=mpicc in a clone of
#   github.com/intel/mpi-benchmarks (Open MPI as root also wants OMPI_ALLOW_RUN_AS_ROOT=1
#   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
#   over software RoCE: rxe/run.sh -e BIN=$PWD/target/rxe 'TRANSPORTS="verbs fabric_verbs" compare/imb.sh 3'
# needs: cargo build --release -p onesided-cli (BIN, default target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${1:-3}
SIZES=${SIZES:-8:4M}
TRANSPORTS=${TRANSPORTS:-shm fabric_tcp fabric_shm}
MPIRUN=${MPIRUN:-mpirun --oversubscribe}
LOG=${LOG:-16}
[[ -x $BIN/onesided ]] || { echo "imb: build $BIN/onesided first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# passive NAME ENV...: one job of Truly_passive_put; appends "size t_pure t_ovrl" rows to $work/NAME
passive() {
  local name=$1
  shift
  env "$@" "$BIN/onesided" bench imb -n 2 -m "$SIZES" Truly_passive_put "${args[@]}" |
    awk '/^ *[0-9]/ { print $1, $3, $4 }' >> "$work/$name"
}

for ((round = 1; round <= ROUNDS; round++)); do
  for name in $TRANSPORTS; do
    case $name in
      shm) args=(); passive shm ONESIDED_TRANSPORT=auto ;;
      fabric_tcp) args=(--transport fabric); passive "$name" FI_PROVIDER=tcp ;;
      fabric_shm) args=(--transport fabric); passive "$name" FI_PROVIDER=shm ;;
      fabric_verbs) args=(--transport fabric); passive "$name" "FI_PROVIDER=verbs;ofi_rxm" ;;
      verbs) args=(--transport verbs); passive "$name" ;;
      *) echo "imb: unknown transport $name" >&2; exit 1 ;;
    esac
  done
  if [[ -n ${IMB_RMA:-} ]]; then
    $MPIRUN -np 2 "$IMB_RMA" -msglog "3:$LOG" > "$work/mpi.$round.txt"
    "$BIN/onesided" bench imb -n 2 -m "8:$((1 << LOG))" > "$work/onesided.$round.txt"
    "$BIN/onesided" bench compare "$work/mpi.$round.txt" "$work/onesided.$round.txt" \
      > "$work/compare.$round.txt"
  fi
done

echo "Truly_passive_put, $ROUNDS rounds; t_pure and t_ovrl in us (medians), t_ovrl / t_pure: median (range)"
printf '%-12s %-10s %-12s %-12s %s\n' transport size t_pure t_ovrl ratio
for name in $TRANSPORTS; do
  awk -v name="$name" '
    function median(a, k,   i, j, t) {
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { if (!($1 in k)) order[++sizes] = $1; i = ++k[$1]; p[$1, i] = $2; o[$1, i] = $3; r[$1, i] = $2 > 0 ? $3 / $2 : 0 }
    END {
      for (s = 1; s <= sizes; s++) {
        z = order[s]; n = k[z]; lo = hi = r[z, 1]
        for (i = 1; i <= n; i++) { a[i] = p[z, i]; b[i] = o[z, i]; c[i] = r[z, i]; if (c[i] < lo) lo = c[i]; if (c[i] > hi) hi = c[i] }
        printf "%-12s %-10s %-12.2f %-12.2f %.2f (%.2f-%.2f)\n", name, z, median(a, n), median(b, n), median(c, n), lo, hi
      }
    }' "$work/$name"
done

if [[ -n ${IMB_RMA:-} ]]; then
  echo
  echo "onesided (shared memory) / $IMB_RMA: geometric mean over the sizes 8 B to 2^$LOG B of B/A per round"
  for f in "$work"/compare.*.txt; do
    awk '
      /^# [A-Za-z]/ && /: / { if (n) printf "%-60s %.2f\n", title, exp(s / n); title = substr($0, 3); sub(/;.*/, "", title); s = n = 0; next }
      /^[0-9]/ && $1 > 0 && $4 + 0 > 0 { s += log($4); n++ }
      END { if (n) printf "%-60s %.2f\n", title, exp(s / n) }' "$f"
    echo
  done
fi
