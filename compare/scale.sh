#!/usr/bin/env bash
# Windows at scale: `onesided bench window_scale` (COUNT windows alive at once: time to create
# and free one, memory as proportional set size, /dev/shm and file descriptors per window and
# rank) for each shape of SHAPES over each transport of TRANSPORTS, then `onesided bench
# shared_alloc` (allocate_shared of 1, 8 and 16 GiB over 4 ranks: time, memory before use).
# Afterwards it checks that /dev/shm holds no more onesided segments than before.
#
# usage: compare/scale.sh      (SHAPES, default "4:10000 16:1000" as RANKS:COUNT; TRANSPORTS,
#                               default "shm fabric_tcp", on an RDMA host also "verbs
#                               fabric_verbs"; SHARED=0 skips shared_alloc)
#   over software RoCE: rxe/run.sh -m 8G -e BIN=$PWD/target/rxe 'TRANSPORTS="verbs fabric_verbs" compare/scale.sh'
# needs: cargo build --release -p onesided-cli (BIN, default target/release)
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
SHAPES=${SHAPES:-4:10000 16:1000}
TRANSPORTS=${TRANSPORTS:-shm fabric_tcp}
[[ -x $BIN/onesided ]] || { echo "scale: build $BIN/onesided first" >&2; exit 1; }
segments() { ls /dev/shm 2>/dev/null | grep -c onesided || true; }
before=$(segments)

echo "window_scale: per window and rank; memory is the largest rank's proportional set size"
printf '%-14s %-6s %-7s %-12s %-12s %-12s %-10s %-6s %s\n' transport ranks windows \
  'create(us)' 'free(us)' 'memory(KiB)' 'shm(KiB)' fds wall
for shape in $SHAPES; do
  n=${shape%%:*} count=${shape##*:}
  for name in $TRANSPORTS; do
    case $name in
      shm) env=(ONESIDED_TRANSPORT=auto) ;;
      fabric_tcp) env=(ONESIDED_TRANSPORT=fabric FI_PROVIDER=tcp) ;;
      fabric_shm) env=(ONESIDED_TRANSPORT=fabric FI_PROVIDER=shm) ;;
      fabric_verbs) env=(ONESIDED_TRANSPORT=fabric "FI_PROVIDER=verbs;ofi_rxm") ;;
      verbs) env=(ONESIDED_TRANSPORT=verbs) ;;
      *) echo "scale: unknown transport $name" >&2; exit 1 ;;
    esac
    start=$(date +%s%N)
    row=$(env "${env[@]}" "$BIN/onesided" bench window_scale -n "$n" -W "$count" | tail -1)
    wall=$((($(date +%s%N) - start) / 100000000))
    read -r _ create free memory shm fds <<< "$row"
    printf '%-14s %-6s %-7s %-12s %-12s %-12s %-10s %-6s %d.%d s\n' "$name" "$n" "$count" \
      "$create" "$free" "$memory" "$shm" "$fds" $((wall / 10)) $((wall % 10))
  done
done

if [[ ${SHARED:-1} != 0 ]]; then
  echo
  echo "shared_alloc: 4 ranks, the size split evenly; memory added per rank before use"
  "$BIN/onesided" bench shared_alloc -n 4 | grep -v '^#' |
    awk '{ printf "%6.0f GiB  allocate %9.1f us  free %9.1f us  memory %8.2f KiB\n", $1 / 2^30, $2, $3, $4 }'
fi

after=$(segments)
echo
echo "onesided segments in /dev/shm: $before before, $after after"
[[ $after -le $before ]]
