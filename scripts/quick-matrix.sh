#!/usr/bin/env bash
# The quick matrix: each scenario in each mode, small files, one table.
# Usage: scripts/quick-matrix.sh [SCRATCH_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dcload="$root/target/release/dcload"
scratch=${1:-/var/tmp/dontcache-quick}
size=${QUICK_SIZE:-512m}

mkdir -p "$scratch"
work=$(mktemp -d "$scratch/run.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

printf '%-11s %-9s %10s %10s %10s %10s %8s\n' scenario mode MB/s IOPS p50_us p99_us cached%
for scenario in seq-write rand-write seq-read rand-read; do
    case $scenario in
        seq-write)  args=(--rw=write --bs=1M --ioengine=io_uring --iodepth=16 --end_fsync=1) ;;
        rand-write) args=(--rw=randwrite --bs=4k --ioengine=io_uring --iodepth=16 --end_fsync=1) ;;
        seq-read)   args=(--rw=read --bs=1M --ioengine=io_uring --iodepth=16) ;;
        rand-read)  args=(--rw=randread --bs=4k --ioengine=io_uring --iodepth=16 --runtime=5) ;;
    esac
    dir=read; [[ $scenario == *write ]] && dir=write
    for mode in buffered uncached direct; do
        case $mode in
            buffered) m=() ;;
            uncached) m=(--uncached=1) ;;
            direct)   m=(--direct=1) ;;
        esac
        out="$work/$scenario-$mode.json"
        if ! "$dcload" --name="$scenario" --filename="$work/$scenario.dat" --size="$size" \
            "${args[@]}" "${m[@]}" --output-format=json --output="$out" 2>"$work/err"; then
            printf '%-11s %-9s %s\n' "$scenario" "$mode" "skipped: $(cat "$work/err")"
            continue
        fi
        jq -r --arg d "$dir" --arg s "$scenario" --arg m "$mode" '.jobs[0] as $j | $j[$d] as $x |
            [$s, $m, ($x.bw_bytes/1e6), $x.iops, ($x.clat_ns.percentile["50.000000"]/1000),
             ($x.clat_ns.percentile["99.000000"]/1000), ($j.dcload.files[0].cachestat.cached_percent)] |
            "\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])\t\(.[4])\t\(.[5])\t\(.[6])"' "$out" |
            awk -F'\t' '{printf "%-11s %-9s %10.1f %10.0f %10.1f %10.1f %8.1f\n", $1, $2, $3, $4, $5, $6, $7}'
        # Each write case starts from a new file: on ext4, RWF_DONTCACHE overwrites of
        # written blocks stay cached (6.18), which would make the modes incomparable.
        [[ $dir == write ]] && rm -f "$work/$scenario.dat"
    done
done
echo "(files of $size in $work, removed on exit; set QUICK_SIZE to change)"
