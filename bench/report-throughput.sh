#!/bin/sh
# `tracectl report` against `perf report --stdio` on the same samples.
#
# One run: a workload with deep kernel and user stacks (perf bench sched
# messaging and gzip) is sampled system-wide by `perf record -g`; its
# perf.data is what perf report reads. The same samples, through
# `perf script`, become a Perfetto trace of PerfSample packets with interned
# callstacks (bench/perf-script-to-trace.py), what traced's perf plugin and
# upstream traced_perf write; tracectl report reads that. A large trace is
# those samples repeated up to TARGET_MB, each copy starting with cleared
# incremental state (so it re-interns its callstacks, as after a producer's
# ClearIncrementalState), for throughput and memory on a big file.
#
# Every report is run ROUNDS times, alternating tools; the table gives
# min/median/max wall seconds, throughput at the median, peak RSS, and the
# ratio of samples per second to perf report's. The files are read once
# before timing, so both tools read from the page cache.
#
# Run as root from a build directory:   ../bench/report-throughput.sh
# Environment: ROUNDS (5), DURATION (seconds sampled, 10), FREQ (Hz, 2999),
# TARGET_MB (size of the large trace, 1024). Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)
[ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian: time)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }
rounds=${ROUNDS:-5}
duration=${DURATION:-10}
freq=${FREQ:-2999}
target_mb=${TARGET_MB:-1024}
work=$(mktemp -d /tmp/report-bench-XXXXXX)
# shellcheck source=bench/lib.sh
. "$src/lib.sh"
# A signal exits through the EXIT trap (it used to run the cleanup and let
# the script go on).
trap 'spawn_stop; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# The workload runs in process groups of its own (spawn), stopped whole:
# messaging as threads of one process, two groups of 20 senders/receivers.
perf_workload_script "$work/perf" "$duration" "$freq" "$build/tracectl"
mv "$work/perf.txt" "$work/script.txt"
python3 "$src/perf-script-to-trace.py" "$work/same.pftrace" <"$work/script.txt" 2>"$work/convert.txt"
copy_bytes=$(stat -c %s "$work/same.pftrace")
copies=$(( (target_mb * 1024 * 1024 + copy_bytes - 1) / copy_bytes ))
python3 "$src/perf-script-to-trace.py" "$work/large.pftrace" --repeat "$copies" <"$work/script.txt" 2>/dev/null
rm -f "$work/script.txt"
samples=$(sed -n 's/^\([0-9]*\) samples.*/\1/p' "$work/convert.txt")
cat "$work/perf.data" "$work/same.pftrace" "$work/large.pftrace" >/dev/null

run() { # name cmd... ; appends "wall_s maxrss_kB cpu_s" to $work/$name
        name=$1
        shift
        /usr/bin/time -f "%e %M %U %S" -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || {
                echo "failed: $*" >&2
                cat "$work/err.txt" >&2
                exit 1
        }
        tail -n 1 "$work/time.txt" | awk '{ print $1, $2, $3 + $4 }' >>"$work/$name"
}

r=1
while [ "$r" -le "$rounds" ]; do
        echo "== round $r of $rounds" >&2
        run perf perf report -i "$work/perf.data" --stdio
        run same "$build/tracectl" report "$work/same.pftrace"
        run large "$build/tracectl" report "$work/large.pftrace"
        run folded "$build/tracectl" report --folded "$work/large.pftrace"
        r=$((r + 1))
done

stats() { # file -> "min median max maxrss cpu_median" (wall seconds; CPU seconds user+sys)
        wall=$(sort -n "$1" | awk '{ t[NR] = $1; if ($2 > m) m = $2 }
                END { printf "%.3f %.3f %.3f %d", t[1], t[int((NR + 1) / 2)], t[NR], m }')
        cpu=$(awk '{ print $3 }' "$1" | sort -n | awk '{ c[NR] = $1 } END { printf "%.3f", c[int((NR + 1) / 2)] }')
        echo "$wall $cpu"
}

perf_bytes=$(stat -c %s "$work/perf.data")
large_bytes=$(stat -c %s "$work/large.pftrace")
set -- $(stats "$work/perf")
perf_med=$2
echo
echo "Workload: $(cat "$work/convert.txt"); the large trace is $copies copies; rounds: $rounds"
echo "Wall seconds min/median/max; MB/s and samples/s at the median wall time; CPU: median user+sys seconds"
echo "and MB/s per CPU second; ratio: samples/s at the median against perf report's."
printf '%-34s %9s %10s %7s %7s %7s %8s %11s %7s %8s %8s %7s\n' tool input-MB samples min-s med-s max-s MB/s samples/s cpu-s MB/cpu-s RSS-MB ratio
line() { # label bytes samples statsfile
        set -- "$1" "$2" "$3" $(stats "$4")
        awk -v l="$1" -v b="$2" -v n="$3" -v mn="$4" -v md="$5" -v mx="$6" -v rss="$7" -v cpu="$8" -v pm="$perf_med" -v ps="$samples" \
                'BEGIN { printf "%-34s %9.1f %10d %7.3f %7.3f %7.3f %8.1f %11.0f %7.3f %8.1f %8.1f %6.1fx\n",
                         l, b / 1048576, n, mn, md, mx, b / 1048576 / md, n / md, cpu, b / 1048576 / (cpu > 0 ? cpu : 0.001),
                         rss / 1024, (n / md) / (ps / pm) }'
}
line "perf report --stdio (perf.data)" "$perf_bytes" "$samples" "$work/perf"
line "tracectl report (same samples)" "$copy_bytes" "$samples" "$work/same"
line "tracectl report (large trace)" "$large_bytes" $((samples * copies)) "$work/large"
line "tracectl report --folded (large)" "$large_bytes" $((samples * copies)) "$work/folded"
