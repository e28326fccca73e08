#!/bin/sh
# What rotation costs: the same scheduling-heavy workload (perf bench
# sched pipe -l LOOPS) recorded by traced's ftrace plugin (compact sched)
# into one file, and with `tracectl record --rotate 1mb` into a directory
# (a file cut every MiB, each opening alone), in the same rounds (each
# round reverses the order of the one before). Per run: CPU time of all
# our processes (the ftrace plugin host, traced's supervisor and core from
# /proc/PID/task/*/schedstat, tracectl by perf stat's task-clock) while the
# workload runs and the recording ends; events recorded (over every file);
# events the kernel lost; files written. Then min/median/max per way over
# the rounds, and rotated/unrotated CPU per event round by round: issue
# #49 asks for a median at most 1.05, with no event lost that the
# unrotated recording keeps.
# Run as root from a build directory:
#   ../bench/rotation.sh [ROUNDS]                  (default: 5)
# Environment: LOOPS (default 500000); SIZE (the rotation, default 1mb).
# Not part of make check.
set -eu

build=$(pwd)
# shellcheck source=bench/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
rounds=${1:-5}
loops=${LOOPS:-500000}
size=${SIZE:-1mb}
work=$(mktemp -d /tmp/traced-bench-XXXXXX)
chmod 0755 "$work"
cleanup() {
        spawn_stop
        rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

printf '%s\n' 'buffers { size_kb: 65536 fill_policy: DISCARD }' \
        'data_sources { config { name: "linux.ftrace" ftrace_config {' \
        '  ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking"' \
        '  compact_sched { enabled: true } buffer_size_kb: 8192 } } }' \
        'duration_ms: 600000' >"$work/config.txt"

# The service core runs as traced, else nobody: the directory lets its
# group in, as tracectl(1) says.
core_group=$(id -gn traced 2>/dev/null || id -gn nobody)

run() { # round way(plain|rotated)
        round=$1 way=$2
        rm -rf "$work/out" "$work/out.pftrace"
        traced_start linux.ftrace
        if [ "$way" = rotated ]; then
                mkdir "$work/out"
                chgrp "$core_group" "$work/out"
                chmod 2770 "$work/out"
                set -- --rotate "$size" -o "$work/out/"
        else
                set -- -o "$work/out.pftrace"
        fi
        spawn perf stat -x, -e task-clock -o "$work/consumer.time" \
                "$build/tracectl" --socket "$work/c.sock" record --txt -c "$work/config.txt" --no-summary "$@" \
                >"$work/tracectl.log" 2>&1
        cpid=$spawned_pid
        sleep 1
        service_pids ftrace.so
        h0=$(ns_of_pids "$host")
        t0=$(ns_of_pids $core)
        spawn perf bench sched pipe -l "$loops" >/dev/null 2>&1
        spawn_wait "$spawned_pid" || true
        sleep 0.5
        pkill -INT -P "$cpid" || true
        spawn_wait $cpid || true
        h1=$(ns_of_pids "$host")
        t1=$(ns_of_pids $core)
        c=$(awk -F, '$3 ~ /^task-clock/ { printf "%.0f", $1 * 1e6 }' "$work/consumer.time")
        spawn_stop
        ev=0 lost=0 files=0
        for f in "$work"/out.pftrace "$work"/out/*.pftrace; do
                [ -f "$f" ] || continue
                files=$((files + 1))
                "$build/tracectl" summary "$f" >"$work/summary.txt" 2>&1 || true
                e=$(sed -n 's/^Ftrace events: *\([0-9]*\).*/\1/p' "$work/summary.txt")
                l=$(sed -n 's/^Kernel buffer: *\([0-9]*\) events overwritten.*/\1/p' "$work/summary.txt")
                ev=$((ev + ${e:-0}))
                lost=$((lost + ${l:-0}))
        done
        if [ "$ev" -lt $((loops * 2)) ]; then
                echo "round $round $way: only $ev events in the trace (at least $((loops * 2)) expected)" >&2
                short_rounds=$((short_rounds + 1))
        fi
        # round way events cpu(ns: host, service, consumer) lost files
        echo "$round $way $ev $((h1 - h0)) $((t1 - t0)) ${c:-0} $lost $files" | awk '{
                all = ($4 + $5 + $6) / 1e9
                printf "%-6s %-8s %9d %8.3f %8.3f %8.3f %9.4f %6d %5d\n", $1, $2, $3, $4 / 1e9, $5 / 1e9, $6 / 1e9,
                        $3 ? all * 1e6 / $3 : 0, $7, $8 }' | tee -a "$work/rows"
}

echo "workload: perf bench sched pipe -l $loops; rotation every $size; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %-8s %9s %8s %8s %8s %9s %6s %5s\n" round way events producer service consumer "CPU-s/Mev" lost files
short_rounds=0
: >"$work/rows"
for round in $(seq "$rounds"); do
        order="plain rotated"
        [ $((round % 2)) -eq 0 ] && order="rotated plain"
        for w in $order; do
                run "$round" "$w"
        done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "min/median/max over $rounds rounds:"
printf "%-8s %-26s %-26s %s\n" way "CPU-s per Mevent" events "lost"
for w in plain rotated; do
        printf "%-8s %-26s %-26s %s\n" "$w" \
                "$(awk -v w="$w" '$2 == w { print $7 }' "$work/rows" | stats)" \
                "$(awk -v w="$w" '$2 == w { print $3 }' "$work/rows" | stats)" \
                "$(awk -v w="$w" '$2 == w { print $8 }' "$work/rows" | stats)"
done
awk '$2 == "plain" { p[$1] = $7; pe[$1] = $3 } $2 == "rotated" { r[$1] = $7; re[$1] = $3 }
        END { for (k in p) if (k in r) printf "%.4f %d\n", r[k] / p[k], re[k] - pe[k] }' "$work/rows" >"$work/ratio"
echo "rotated/plain CPU per event, round by round, min/median/max: $(cut -d' ' -f1 "$work/ratio" | stats)"
echo "rotated - plain events, round by round, min/median/max: $(cut -d' ' -f2 "$work/ratio" | stats)"
if [ "$short_rounds" -gt 0 ]; then
        echo "rotation: $short_rounds run(s) recorded too few events: not a comparison" >&2
        exit 1
fi
