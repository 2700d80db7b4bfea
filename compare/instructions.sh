#!/usr/bin/env bash
# Instructions per operation at the origin over shared memory, 2 ranks, 8 bytes, the target
# passive: what an intra-node RMA call costs, in a unit that does not move with the machine's
# load. Counted by callgrind: rank 0 of `onesided bench TEST -x 0` runs under valgrind twice, with
# LOW and HIGH iterations, and the difference of its totals over HIGH - LOW is one iteration
# (start-up, wire-up and teardown cancel out); the fewest of REPEAT such measurements is kept,
# since a rank waiting for the other only ever adds instructions. Where Open MPI's mpicc is
# installed, the same rows for its osc/sm (`compare/osc_rma.c`), counted inside its RMA calls
# only (callgrind's --toggle-collect on the MPI calls of the loop), the same way.
#
# usage: compare/instructions.sh                     print the table
#        compare/instructions.sh --check FILE        also fail where onesided's count is more than
#                                                    5% above FILE's budget for the row
# FILE: one `row budget` line per row (# starts a comment), rows named as the table names them.
# environment: BIN (default target/release), LOW (default 2000), HIGH (default 12000),
#              REPEAT (default 3: each row is the fewest instructions of REPEAT measurements),
#              OMPI=0 to leave Open MPI out, ONLY=REGEX for the rows whose name matches
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
LOW=${LOW:-2000}
HIGH=${HIGH:-12000}
REPEAT=${REPEAT:-3}
budget=
if [[ ${1:-} == --check ]]; then
  budget=${2:?"--check needs a budget file"}
  [[ -r $budget ]] || { echo "instructions: cannot read $budget" >&2; exit 1; }
fi
command -v valgrind > /dev/null || { echo "instructions: needs valgrind" >&2; exit 1; }
[[ -x $BIN/onesided ]] || { echo "instructions: build $BIN/onesided first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# rank 0 under callgrind, the other as it is
cat > "$work/rank.sh" <<'WRAP'
#!/usr/bin/env bash
set -f
if [[ ${ONESIDED_RANK:-${OMPI_COMM_WORLD_RANK:-0}} == 0 ]]; then
  exec valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" $CG_ARGS "$@"
fi
exec "$@"
WRAP
chmod +x "$work/rank.sh"

# onesided_total N TEST ARGS...: rank 0's instruction count for N iterations
onesided_total() {
  local n=$1 test=$2
  shift 2
  local out=$work/cg.os.$test.$n.$RANDOM
  ONESIDED_TRANSPORT=auto CG_OUT="$out" CG_ARGS= timeout 600 "$BIN/onesided" run -n 2 -- \
    "$work/rank.sh" "$BIN/onesided" bench "$test" -i "$n" -x 0 "$@" > /dev/null 2> "$out.err" \
    || { echo "instructions: onesided $test failed: $(tail -3 "$out.err")" >&2; return 1; }
  awk '/^summary:/ { print $2 }' "$out"
}

# ompi_total N TEST CALLS: rank 0's instructions inside the MPI calls CALLS (comma-separated)
ompi_total() {
  local n=$1 test=$2 calls=$3 args=(--collect-atstart=no)
  local out=$work/cg.ompi.$test.$n.$RANDOM
  IFS=, read -ra fns <<< "$calls"
  for f in "${fns[@]}"; do args+=("--toggle-collect=*$f"); done
  CG_OUT="$out" CG_ARGS="${args[*]}" timeout 600 mpirun.openmpi --oversubscribe --allow-run-as-root \
    -np 2 --mca osc sm --mca btl self,vader -x CG_OUT -x CG_ARGS "$work/rank.sh" \
    "$work/osc_rma" "$test" "$n" 0 > /dev/null 2> "$out.err" \
    || { echo "instructions: osc_rma $test failed: $(tail -3 "$out.err")" >&2; return 1; }
  awk '/^summary:/ { print $2 }' "$out"
}

ompi=
if [[ ${OMPI:-1} != 0 ]] && command -v mpicc.openmpi > /dev/null \
  && mpicc.openmpi -O2 -o "$work/osc_rma" compare/osc_rma.c 2> "$work/mpicc.err"; then
  ompi=1
fi

# per FN N-ARGS...: instructions per iteration, or - where a run failed
# The fewest over REPEAT measurements: a rank that waits for the other (fence, PSCW, a flush
# the target must answer) spins while the other is slow to wake, which only adds instructions
# (one fence counted 1535 against 322 in a run where rank 1 was late).
per() {
  local fn=$1 lo hi n best=
  shift
  for ((n = 0; n < REPEAT; n++)); do
    lo=$("$fn" "$LOW" "$@") && hi=$("$fn" "$HIGH" "$@") && [[ -n $lo && -n $hi ]] \
      || { echo -; return; }
    local n_per=$(( (hi - lo) / (HIGH - LOW) ))
    [[ -z $best ]] || (( n_per < best )) && best=$n_per
  done
  echo "$best"
}

# row | onesided bench arguments | osc_rma test | the MPI calls it times
rows=(
  "put+flush|put_latency -m 8:8 -s flush|flush|MPI_Put,MPI_Win_flush"
  "get+flush|get_latency -m 8:8 -s flush|get|MPI_Get,MPI_Win_flush"
  "lock+put+unlock|put_latency -m 8:8 -s lock|lock|MPI_Win_lock,MPI_Put,MPI_Win_unlock"
  "lock_all+put+unlock_all|put_latency -m 8:8 -s lock_all|lock_all|MPI_Win_lock_all,MPI_Put,MPI_Win_unlock_all"
  "compare_and_swap|cas_latency -T long|cas|MPI_Compare_and_swap,MPI_Win_flush"
  "fetch_and_op|fop_latency -T long|fop|MPI_Fetch_and_op,MPI_Win_flush"
  "accumulate|acc_latency -T long -m 8:8 -s flush|acc|MPI_Accumulate,MPI_Win_flush"
  "accumulate 4KiB|acc_latency -T int -m 4K:4K -s flush|acc4k|MPI_Accumulate,MPI_Win_flush"
  "put+flush 4KiB|put_latency -m 4K:4K -s flush|flush4k|MPI_Put,MPI_Win_flush"
  "get+flush 4KiB|get_latency -m 4K:4K -s flush|get4k|MPI_Get,MPI_Win_flush"
  "fence|fence_latency -n 2|fence|MPI_Win_fence"
  "pscw|put_latency -m 8:8 -s pscw|pscw|MPI_Win_post,MPI_Win_start,MPI_Put,MPI_Win_complete,MPI_Win_wait"
)

printf '%-24s %10s %10s %7s\n' operation onesided osc/sm ratio
failed=0
for row in "${rows[@]}"; do
  IFS='|' read -r name cmd otest calls <<< "$row"
  [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && continue
  # shellcheck disable=SC2086  # the command's words
  os=$(per onesided_total $cmd)
  om=-
  [[ -n $ompi ]] && om=$(per ompi_total "$otest" "$calls")
  ratio=-
  [[ $os != - && $om != - && $om -gt 0 ]] && ratio=$(awk -v a="$os" -v b="$om" 'BEGIN { printf "%.2f", a / b }')
  note=
  if [[ -n $budget ]]; then
    limit=$(awk -v r="$name" '!/^#/ && NF >= 2 { n = $NF; $NF = ""; sub(/ +$/, ""); if ($0 == r) print n }' "$budget")
    if [[ -z $limit ]]; then
      note="  (no budget)"
    elif [[ $os == - ]] || (( os * 100 > limit * 105 )); then
      note="  OVER the budget of $limit (+5%)"
      failed=1
    else
      note="  (budget $limit)"
    fi
  fi
  printf '%-24s %10s %10s %7s%s\n' "$name" "$os" "$om" "$ratio" "$note"
done
exit "$failed"
