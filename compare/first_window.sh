#!/usr/bin/env bash
# The job's first window over libfabric's tcp provider and later ones, at N ranks, beside what
# loading libfabric costs N processes started together (`fi_info -p tcp`, which loads it and
# initializes its providers as a rank's first window does, where `World::init` has not begun
# it): libfabric's own start-up. Prints one line per N: N, the floor, the first window and a
# later one (seconds, milliseconds), from `onesided bench window_create`, and the whole job
# (seconds, from the launch until every rank has left). Then, from `examples/wireup` (the slowest
# rank), `World::init` (milliseconds) and all of a rank's start, from before `World::init` until
# its first window is freed, where it computes for 300 ms between the two (seconds), as a program
# that prepares its data first does.
#
# usage: compare/first_window.sh [N...]        (default 2 4 8 16; BIN, default target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
[[ -x $BIN/onesided && -x $BIN/examples/wireup ]] || {
  echo "first_window: build $BIN/onesided and $BIN/examples/wireup first" >&2
  exit 1
}
command -v fi_info > /dev/null || { echo "first_window: needs fi_info (libfabric-bin)" >&2; exit 1; }
printf '%-6s %-22s %-20s %-16s %-12s %-20s %-20s\n' ranks "libfabric load (s)" \
  "first window (s)" "later (ms)" "job (s)" "World::init (ms)" "300 ms work, all (s)"
for n in "${@:-2 4 8 16}"; do
  for k in $n; do
    start=$(date +%s%N)
    for ((i = 0; i < k; i++)); do FI_PROVIDER=tcp fi_info -p tcp > /dev/null 2>&1 & done
    wait
    floor=$(( ($(date +%s%N) - start) / 1000000 ))
    start=$(date +%s%N)
    row=$(ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp "$BIN/onesided" bench window_create -n "$k" \
      -i 20 -x 2 | grep -vE '^#|^$' | tail -1)
    job=$(( ($(date +%s%N) - start) / 1000000 ))
    read -r _ first later <<< "$row"
    # "wireup: N ranks: World::init X ms (median ..), ..., all of it Y ms (median ..)": X, Y.
    slowest() {
      ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp "$BIN/onesided" run -n "$k" -- \
        "$BIN/examples/wireup" "$@" | sed -E 's/.*World::init ([0-9.]+) ms.*all of it ([0-9.]+) ms.*/\1 \2/'
    }
    read -r init _ <<< "$(slowest)"
    read -r _ whole <<< "$(slowest 300)"
    awk -v n="$k" -v f="$floor" -v a="$first" -v b="$later" -v j="$job" -v i="$init" -v w="$whole" \
      'BEGIN { printf "%-6s %-22.2f %-20.2f %-16.1f %-12.2f %-20.1f %-20.2f\n", n, f / 1000, a / 1e6, b / 1000, j / 1000, i, w / 1000 }'
  done
done
