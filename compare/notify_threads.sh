#!/usr/bin/env bash
# Threads of a shared window making notified calls and accumulates of several elements
# themselves, against a build where the window's thread made them: over shared memory
# `onesided bench notify_rate` with -t 1, 2 and 4 and `acc_rate` with -t 1 and 2 (rank 0's threads to rank 1,
# each call flushed), and `notify_latency -m 8:8` with -t 0 (the ranks' own threads) and -t 1 (a
# thread of each rank bounces through the shared window), over shared memory and libfabric's
# tcp and shm providers. Every run of BIN and BEFORE in turns in each round; prints every run's
# figure, lowest first, per build. BEFORE must have these tests and options (build the library
# before with this cli).
#
# usage: BEFORE=<dir of the build before> compare/notify_threads.sh [ROUNDS]   (default 5;
#        BIN, default target/release; without BEFORE only BIN runs)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
BEFORE=${BEFORE:-}
ROUNDS=${1:-5}
[[ -x $BIN/onesided ]] || { echo "notify_threads: build $BIN/onesided first" >&2; exit 1; }
builds="$BIN"
[[ -n $BEFORE ]] && builds="$BEFORE $BIN"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME BUILD ENV... -- ARGS...: one job of `onesided bench ARGS`; appends its first figure
# (messages/s, or the put_notify column in us) to $work/NAME.<build index>
run() {
  local name=$1 build=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$build/onesided" bench "$@" | awk '!/^#/ { print $2 }' >> "$work/$name.$(index "$build")"
}

index() { [[ $1 == "$BIN" ]] && echo new || echo before; }

for ((round = 1; round <= ROUNDS; round++)); do
  for build in $builds; do
    for t in 1 2 4; do
      run "shm.notify_rate.t$t" "$build" ONESIDED_TRANSPORT=auto -- notify_rate -t "$t" -i 200000
    done
    for t in 1 2; do
      run "shm.acc_rate.t$t" "$build" ONESIDED_TRANSPORT=auto -- acc_rate -t "$t" -i 200000
    done
    for t in 0 1; do
      run "shm.notify_latency.t$t" "$build" ONESIDED_TRANSPORT=auto -- notify_latency -t "$t" -m 8:8 -i 20000
      run "fabric_tcp.notify_latency.t$t" "$build" ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp -- notify_latency -t "$t" -m 8:8 -i 2000
      run "fabric_shm.notify_latency.t$t" "$build" ONESIDED_TRANSPORT=fabric FI_PROVIDER=shm -- notify_latency -t "$t" -m 8:8 -i 20000
    done
  done
done

echo "$ROUNDS rounds; rates in messages/s, notify_latency in us (put_notify column); runs lowest first"
for f in $(cd "$work" && ls | sort); do
  printf '%-34s %s\n' "$f" "$(sort -g "$work/$f" | tr '\n' ' ')"
done
