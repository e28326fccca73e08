#!/bin/sh
# What rotation costs: the same scheduling-heavy workload (perf bench
# sched pipe -l LOOPS) recorded by traced's ftrace plugin (compact sched)
# into one file, and with `tracectl record --rotate 1mb` into a directory
# (a file cut every MiB, each opening alone), in the same rounds (each
# round reverses the order of the one before). Per run: CPU time of all
# our processes while the workload runs and the recording ends (traced's
# supervisor, core and plugin hosts from a cgroup of their own, cgroup v2
# cpu.stat or v1 cpuacct, so that threads gone by then count too: each
# rotated file's writer thread ends with its file, and /proc/PID/task
# forgets it; the ftrace plugin host's part of it from its schedstat;
# tracectl by perf stat's task-clock); events recorded (over every file);
# events the kernel lost; files written; and apart, the service's CPU
# from the record command to the workload's start (the session's set-up
# and its first second: what it costs once, the second region of the
# rotated files' writer faulted in among it). Then min/median/max per way over
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
# The cgroup traced runs in. Without one (neither hierarchy writable) the
# service's CPU is its live threads' schedstat, and the rotated way's is
# short of its writer threads'.
cg=/sys/fs/cgroup/traced-bench-$$
cg_usage() { awk '$1 == "usage_usec" { printf "%.0f\n", $2 * 1000 }' "$cg/cpu.stat"; }
if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
        cg=/sys/fs/cgroup/cpuacct/traced-bench-$$
        cg_usage() { cat "$cg/cpuacct.usage"; }
fi
mkdir "$cg" 2>/dev/null || {
        echo "no cgroup for traced ($cg): the service's CPU leaves out the threads that ended" >&2
        cg=""
}
cleanup() {
        spawn_stop
        [ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
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

# CPU of all traced runs (ns): the supervisor, core and plugin hosts.
service_cpu() {
        if [ -n "$cg" ]; then
                cg_usage
        else
                # shellcheck disable=SC2046 # pids: words
                ns_of_pids "$tpid" $(pgrep -P "$tpid")
        fi
}

run() { # round way(plain|rotated)
        round=$1 way=$2
        rm -rf "$work/out" "$work/out.pftrace"
        if [ -n "$cg" ]; then
                # shellcheck disable=SC2016 # $$ and $0: the inner shell's
                traced_start linux.ftrace sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg"
        else
                traced_start linux.ftrace
        fi
        # The ftrace plugin's host starts with the session: what it used
        # before the workload counts whole.
        s0=$(service_cpu)
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
        t0=$(service_cpu)
        spawn perf bench sched pipe -l "$loops" >/dev/null 2>&1
        spawn_wait "$spawned_pid" || true
        sleep 0.5
        pkill -INT -P "$cpid" || true
        spawn_wait $cpid || true
        h1=$(ns_of_pids "$host")
        t1=$(service_cpu)
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
        # (the service's figures: the host's included, then taken out)
        echo "$round $way $ev $((h1 - h0)) $((t1 - t0 - (h1 - h0))) ${c:-0} $lost $files $((t0 - s0))" | awk '{
                all = ($4 + $5 + $6) / 1e9
                printf "%-6s %-8s %9d %8.3f %8.3f %8.3f %9.4f %6d %5d %7.3f %9.4f\n", $1, $2, $3, $4 / 1e9, $5 / 1e9,
                        $6 / 1e9, $3 ? all * 1e6 / $3 : 0, $7, $8, $9 / 1e9, $3 ? (all + $9 / 1e9) * 1e6 / $3 : 0 }' |
                tee -a "$work/rows"
}

echo "workload: perf bench sched pipe -l $loops; rotation every $size; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %-8s %9s %8s %8s %8s %9s %6s %5s %7s %9s\n" round way events producer service consumer "CPU-s/Mev" lost files \
        start "+start"
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
printf "%-8s %-26s %-26s %-8s %s\n" way "CPU-s per Mevent" events "lost" "start CPU-s"
for w in plain rotated; do
        printf "%-8s %-26s %-26s %-8s %s\n" "$w" \
                "$(awk -v w="$w" '$2 == w { print $7 }' "$work/rows" | stats)" \
                "$(awk -v w="$w" '$2 == w { print $3 }' "$work/rows" | stats)" \
                "$(awk -v w="$w" '$2 == w { print $8 }' "$work/rows" | stats)" \
                "$(awk -v w="$w" '$2 == w { print $10 }' "$work/rows" | stats)"
done
awk '$2 == "plain" { p[$1] = $7; pe[$1] = $3; ps[$1] = $11 } $2 == "rotated" { r[$1] = $7; re[$1] = $3; rs[$1] = $11 }
        END { for (k in p) if (k in r) printf "%.4f %d %.4f\n", r[k] / p[k], re[k] - pe[k], rs[k] / ps[k] }' \
        "$work/rows" >"$work/ratio"
echo "rotated/plain CPU per event, round by round, min/median/max: $(cut -d' ' -f1 "$work/ratio" | stats)"
echo "the same with the start counted: $(cut -d' ' -f3 "$work/ratio" | stats)"
echo "rotated - plain events, round by round, min/median/max: $(cut -d' ' -f2 "$work/ratio" | stats)"
if [ "$short_rounds" -gt 0 ]; then
        echo "rotation: $short_rounds run(s) recorded too few events: not a comparison" >&2
        exit 1
fi
