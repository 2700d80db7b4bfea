#!/usr/bin/env bash
# Instructions per operation at the origin, direct verbs against libfabric's verbs;ofi_rxm, on
# the same device: what decides which verbs path windows between nodes take (docs/transports.md,
# "Which verbs path"). Counted by callgrind, so an emulated CPU (software RoCE in the guest of
# rxe/run.sh) counts what a real one would: rank 0 of `onesided bench TEST -x 0` (8 bytes) runs under
# valgrind twice, with LOW and HIGH iterations, and the difference of its totals over
# HIGH - LOW is one operation's cost (start-up, wire-up and teardown cancel out).
#
# usage: compare/verbs_instructions.sh                 (on a host with an RDMA device)
#        rxe/run.sh -e BIN=$PWD/target/release 'compare/verbs_instructions.sh'
# environment: BIN (default target/release), LOW (default 200), HIGH (default 1200)
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
LOW=${LOW:-200}
HIGH=${HIGH:-1200}
command -v valgrind > /dev/null || { echo "verbs_instructions: needs valgrind" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# rank 0 under callgrind, the others as they are
cat > "$work/rank.sh" <<'WRAP'
#!/usr/bin/env bash
if [[ ${ONESIDED_RANK:-0} == 0 ]]; then
  exec valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" "$@"
fi
exec "$@"
WRAP
chmod +x "$work/rank.sh"

# total N TRANSPORT TEST ARGS...: rank 0's instruction count for N iterations
total() {
  local n=$1 transport=$2 test=$3
  shift 3
  local out=$work/cg.$transport.$test.$n
  local env=(ONESIDED_TRANSPORT=verbs)
  [[ $transport == rxm ]] && env=(ONESIDED_TRANSPORT=fabric "FI_PROVIDER=verbs;ofi_rxm")
  env "${env[@]}" CG_OUT="$out" timeout 900 "$BIN/onesided" run -n 2 -- "$work/rank.sh" \
    "$BIN/onesided" bench "$test" -i "$n" -x 0 "$@" > /dev/null 2> "$out.err" \
    || { echo "verbs_instructions: $transport $test failed: $(tail -3 "$out.err")" >&2; return 1; }
  awk '/^summary:/ { print $2 }' "$out"
}

printf '%-18s %12s %12s %8s\n' operation verbs rxm rxm/verbs
for row in "put+flush|put_latency -m 8:8 -s flush" "get|get_latency -m 8:8 -s flush" \
           "fetch_and_op|fop_latency -T long" "compare_and_swap|cas_latency -T long"; do
  IFS='|' read -r name cmd <<< "$row"
  per=()
  for transport in verbs rxm; do
    # shellcheck disable=SC2086  # the command's words
    lo=$(total "$LOW" "$transport" $cmd) && hi=$(total "$HIGH" "$transport" $cmd) \
      || { per+=(-); continue; }
    per+=($(( (hi - lo) / (HIGH - LOW) )))
  done
  ratio=-
  [[ ${per[0]} != - && ${per[1]} != - ]] && ratio=$(awk -v a="${per[0]}" -v b="${per[1]}" 'BEGIN { printf "%.2f", b / a }')
  printf '%-18s %12s %12s %8s\n' "$name" "${per[0]}" "${per[1]}" "$ratio"
done
