#!/bin/sh
# `tracectl report --pprof` against plain `tracectl report` on the same
# trace of about a million samples: the pprof file must cost at most 1.5x
# the report's time and peak memory (issue #46), medians over rounds.
#
# The samples: a workload with deep kernel and user stacks (perf bench sched
# messaging and gzip) sampled system-wide by `perf record -g`, turned into
# PerfSample packets with interned callstacks by bench/perf-script-to-trace.py
# (what traced's perf plugin writes), repeated until the trace holds SAMPLES
# samples (each copy re-interning its callstacks, as after a producer's
# ClearIncrementalState). Both commands run with --no-debuginfod (local
# files only), alternating, ROUNDS times; the file is read once before
# timing, so both read from the page cache.
#
# Run as root from a build directory:   ../bench/report-pprof.sh
# Environment: ROUNDS (5), DURATION (seconds sampled, 5), FREQ (Hz, 2999),
# SAMPLES (1000000). Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)
[ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian: time)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }
rounds=${ROUNDS:-5}
duration=${DURATION:-5}
freq=${FREQ:-2999}
want=${SAMPLES:-1000000}
work=$(mktemp -d /tmp/report-pprof-bench-XXXXXX)
# shellcheck source=bench/lib.sh
. "$src/lib.sh"
trap 'spawn_stop; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

perf_workload_script "$work/perf" "$duration" "$freq" "$build/tracectl"
python3 "$src/perf-script-to-trace.py" "$work/one.pftrace" <"$work/perf.txt" 2>"$work/convert.txt"
per_copy=$(sed -n 's/^\([0-9]*\) samples.*/\1/p' "$work/convert.txt")
[ "${per_copy:-0}" -gt 0 ] || { echo "no samples recorded" >&2; cat "$work/convert.txt" >&2; exit 1; }
copies=$(( (want + per_copy - 1) / per_copy ))
python3 "$src/perf-script-to-trace.py" "$work/trace.pftrace" --repeat "$copies" <"$work/perf.txt" 2>/dev/null
rm -f "$work/perf.txt" "$work/one.pftrace"
samples=$((per_copy * copies))
cat "$work/trace.pftrace" >/dev/null

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
        run report "$build/tracectl" report --no-debuginfod "$work/trace.pftrace"
        run pprof "$build/tracectl" report --no-debuginfod --pprof "$work/out.pb.gz" "$work/trace.pftrace"
        r=$((r + 1))
done

col() { # file column -> "min median max"
        awk -v c="$2" '{ print $c }' "$1" | sort -n |
                awk '{ v[NR] = $1 } END { printf "%s %s %s", v[1], v[int((NR + 1) / 2)], v[NR] }'
}
set -- $(col "$work/report" 1) $(col "$work/pprof" 1) $(col "$work/report" 2) $(col "$work/pprof" 2) \
        $(col "$work/report" 3) $(col "$work/pprof" 3)
echo
echo "Trace: $samples samples ($copies copies of $per_copy), $(($(stat -c %s "$work/trace.pftrace") / 1048576)) MB;" \
        "pprof file $(($(stat -c %s "$work/out.pb.gz") / 1024)) kB; rounds: $rounds"
echo "Wall and CPU (user+sys) seconds and peak RSS: min/median/max over the rounds"
printf '%-26s %-24s %-24s %-24s\n' command wall-s cpu-s RSS-MB
awk -v a="$1" -v b="$2" -v c="$3" -v d="$7" -v e="$8" -v f="$9" -v g="${13}" -v h="${14}" -v i="${15}" \
        'BEGIN { printf "%-26s %.2f/%.2f/%.2f %12.2f/%.2f/%.2f %12.1f/%.1f/%.1f\n", "tracectl report", a, b, c, g, h, i,
                 d/1024, e/1024, f/1024 }'
awk -v a="$4" -v b="$5" -v c="$6" -v d="${10}" -v e="${11}" -v f="${12}" -v g="${16}" -v h="${17}" -v i="${18}" \
        'BEGIN { printf "%-26s %.2f/%.2f/%.2f %12.2f/%.2f/%.2f %12.1f/%.1f/%.1f\n", "tracectl report --pprof", a, b, c, g, h, i,
                 d/1024, e/1024, f/1024 }'
awk -v t="$5" -v T="$2" -v c="${17}" -v C="${14}" -v m="${11}" -v M="$8" \
        'BEGIN { printf "--pprof / report at the medians: wall %.2fx, CPU %.2fx, memory %.2fx (target: at most 1.5x)\n",
                 t / T, c / C, m / M }'
