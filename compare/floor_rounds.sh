#!/bin/bash
# Rounds of the fabric transport against the C floor (../shared/floor/rmaprobe.c) and Open MPI's
# TCP path: the figures of issue 8's done list. Every comparison is a quad, reference, onesided,
# onesided, reference, so that drift within a round and the order of jobs weigh on both sides
# alike; the ratio of a quad is onesided's two runs over the reference's two. Two rows compare
# onesided with itself: 4096 doubles accumulated against one, 64 rgets against one get.
#
#   cargo build --release --bin onesided --example request_overlap
#   compare/floor_rounds.sh [ROUNDS]        # 6 by default; FLOOR=dir for another floor
#
# The floor's 1 MiB rows are changed to OSU's working set (64 slots of 1 MiB on both sides, as
# `put_bw` and `get_bw` use), and its two ranks are bound to the first two CPUs this script may
# use, as `onesided run` binds ranks (`--bind-to auto`). Open MPI's row needs mpicc.openmpi
# (libopenmpi-dev) and is left out, with a line saying so, without it.
set -u

rounds=${1:-6}
root=$(cd "$(dirname "$0")/.." && pwd)
floor_src=${FLOOR:-$root/../shared/floor}
onesided=$root/target/release/onesided
overlap=$root/target/release/examples/request_overlap
for f in "$onesided" "$overlap" "$floor_src/rmaprobe.c"; do
  [ -e "$f" ] || { echo "floor_rounds: $f is missing (see the usage above)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

slot='(i % 64) * sz'
sed -e 's|^#define WIN (4UL << 20).*|#define WIN (68UL << 20)|' \
  -e 's|^#define BUFLEN (8UL << 20).*|#define BUFLEN (136UL << 20)|' \
  -e "s|put(0, (i % 4) \\* sz, sz)|put($slot, $slot, sz)|" \
  -e "s|get(0, (i % 4) \\* sz, sz)|get($slot, $slot, sz)|" \
  "$floor_src/rmaprobe.c" > "$work/rmaprobe.c"
changed=$(grep -c -F -e 'WIN (68UL' -e 'BUFLEN (136UL' -e "put($slot" "$work/rmaprobe.c")
if [ "$changed" != 3 ]; then
  echo "floor_rounds: $floor_src/rmaprobe.c is not the floor this script knows how to change" >&2
  exit 2
fi
cc -O2 -o "$work/rmaprobe" "$work/rmaprobe.c" -lfabric || exit 2
ompi=no
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$work/osc_rma" "$root/compare/osc_rma.c" && ompi=yes
fi
[ $ompi = yes ] || echo "# no mpicc.openmpi/mpirun.openmpi: the row against Open MPI is left out"

cpus=($(grep Cpus_allowed_list /proc/self/status | cut -f2 | tr ',' '\n' |
  awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c}'))
[ ${#cpus[@]} -ge 2 ] || { echo "floor_rounds: needs two CPUs" >&2; exit 2; }
export FI_OFI_RXM_BUFFER_SIZE=33792 FI_OFI_RXM_MSG_RX_SIZE=128

# The floor's bench phase over provider $1 (more settings in the environment), its ranks bound.
floor() {
  local port=$((20000 + RANDOM % 20000))
  FI_PROVIDER=$1 taskset -c "${cpus[1]}" "$work/rmaprobe" 1 $port bench > "$work/rank1.log" \
    2>&1 &
  FI_PROVIDER=$1 taskset -c "${cpus[0]}" "$work/rmaprobe" 0 $port bench
  wait $!
}
# put, get and compare-and-swap of 8 bytes, in us.
floor_lat() {
  ITERS=5000 RUNS=3 WINDOW=64 floor $1 2>&1 | awk '/FI_DELIVERY_COMPLETE/ {p = $5}
    /get 8B/ {g = $5} /CAS u64/ {c = $5} END {print p, g, c}'
}
bench() {
  "$onesided" bench "$@" --transport fabric 2>&1 | grep -v '^#' | tail -1 | awk '{print $2}'
}
onesided_lat() {
  echo "$(FI_PROVIDER=$1 bench put_latency -m 8:8 --per-op)" \
    "$(FI_PROVIDER=$1 bench get_latency -m 8:8 --per-op)" \
    "$(FI_PROVIDER=$1 bench cas_latency -T long --per-op)"
}
# 1 MiB bandwidth of $2 (put or get) over $1, in MB/s: 6400 operations, 64 in flight.
floor_bw() {
  WINDOW=64 BWITERS=6400 RUNS=1 BENCH="$2 1MiB" floor $1 2>&1 |
    awk -v op="$2" '$0 ~ op " 1MiB bandwidth" {print $(NF - 6)}'
}
onesided_bw() { FI_PROVIDER=$1 bench ${2}_bw -m 1M:1M -i 100; }
open_mpi() {
  mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp --mca osc pt2pt \
    "$work/osc_rma" flush 20000 1000 2>&1 | tail -1 | awk '{print $NF}'
}
acc() { FI_PROVIDER=tcp bench acc_latency -T double -m $1:$1 --per-op; }
# Records the quad $1: reference $2, onesided $3 and $4, reference $5; a run that printed no
# number leaves the quad out, with a line saying so.
quad() {
  local v
  for v in "$2" "$3" "$4" "$5"; do
    [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$1: a run failed, left out"; return; }
  done
  echo "$1 $2 $3 $4 $5" >> "$work/quads"
  echo "$1: $2 | $3 $4 | $5"
}

for r in $(seq 1 "$rounds"); do
  echo "# round $r $(date +%T): reference | onesided onesided | reference"
  for prov in tcp shm; do
    a=($(floor_lat $prov)); b=($(onesided_lat $prov)); c=($(onesided_lat $prov))
    d=($(floor_lat $prov))
    for k in 0 1 2; do
      n=(put get cas)
      quad "$prov-${n[$k]}" "${a[$k]:-}" "${b[$k]:-}" "${c[$k]:-}" "${d[$k]:-}"
    done
    for op in put get; do
      quad "$prov-${op}-1MiB" "$(floor_bw $prov $op)" "$(onesided_bw $prov $op)" \
        "$(onesided_bw $prov $op)" "$(floor_bw $prov $op)"
    done
  done
  if [ $ompi = yes ]; then
    quad "openmpi-put" "$(open_mpi)" "$(FI_PROVIDER=tcp bench put_latency -m 8:8 --per-op)" \
      "$(FI_PROVIDER=tcp bench put_latency -m 8:8 --per-op)" "$(open_mpi)"
  fi
  quad "acc4096-vs-acc1" "$(acc 8)" "$(acc 32K)" "$(acc 32K)" "$(acc 8)"
  o=$(FI_PROVIDER=tcp ONESIDED_TRANSPORT=fabric "$onesided" run -n 2 -- "$overlap" 2>&1 | tail -1)
  echo "$o"
  echo "$o" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) ~ /^us;?$/) t[++n] = $i}
    n >= 2 {print "rgets-vs-get", t[1], t[2], t[2], t[1]}' >> "$work/quads"
done

# The bound of each figure (issue 8): onesided over the reference at most (le), below (lt) or at
# least (ge).
bound() {
  case $1 in
    *-1MiB) echo "ge 0.9" ;;
    openmpi-put) echo "lt 1.0" ;;
    acc4096-vs-acc1) echo "le 3.0" ;;
    rgets-vs-get) echo "le 2.0" ;;
    *) echo "le 1.1" ;;
  esac
}
echo "# figure: median of the rounds' ratios (range), bound, verdict"
[ -s "$work/quads" ] || { echo "floor_rounds: no quad was measured" >&2; exit 1; }
for fig in $(awk '{print $1}' "$work/quads" | awk '!seen[$0]++'); do
  ratios=$(awk -v f="$fig" '$1 == f {printf "%.3f\n", ($3 + $4) / ($2 + $5)}' "$work/quads" |
    sort -n)
  read -r how limit <<< "$(bound "$fig")"
  echo "$ratios" | awk -v f="$fig" -v how="$how" -v lim="$limit" '{v[NR] = $1}
    END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      ok = how == "le" ? m <= lim : how == "lt" ? m < lim : m >= lim
      sign = how == "le" ? "<=" : how == "lt" ? "<" : ">="
      printf "%-16s %.3f (%.3f-%.3f)  %s %s  %s\n", f, m, v[1], v[NR], sign, lim,
        ok ? "holds" : "misses"}'
done
