#!/bin/sh
# CPU cost of linux.sys_stats polling /proc/meminfo, /proc/vmstat and
# /proc/stat every PERIOD ms (all counters), against upstream Perfetto's
# traced_probes on the same config in the same run.
#
#   traced:   this build's traced with the sysstats plugin alone (a plugin
#             directory holding only sysstats.so); measured: its plugin
#             host
#   upstream: PERFETTO_BIN_DIR's traced and traced_probes (skipped with a
#             note when unset); measured: traced_probes
#   floor:    bench/sys-stats-floor.c, which only wakes every PERIOD ms and
#             reads the three files, doing nothing with them: what the
#             kernel charges any poller for producing their text
#
# Both are recorded by this build's tracectl. CPU is utime + stime from
# /proc of the measured process, between the start and the end of the
# recording, in ms of CPU per second recorded (the floor's from its own
# getrusage); over ROUNDS rounds, each round running the tools in another
# order (min / median / max), then the ratios of the medians.
#
# Run as root from a build directory:
#   [PERFETTO_BIN_DIR=DIR] ../bench/sys-stats.sh
# Environment: PERIOD (ms, default 10), DURATION (s, default 10), ROUNDS
# (default 3). Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$src/bench/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] && [ -f "$build/plugins/.libs/sysstats.so" ] ||
        { echo "run from the build directory (traced, tracectl and plugins/.libs/sysstats.so built)" >&2; exit 2; }
period=${PERIOD:-10}
duration=${DURATION:-10}
rounds=${ROUNDS:-3}
BIN=${PERFETTO_BIN_DIR:-}
work=$(mktemp -d /tmp/traced-sysstats-bench-XXXXXX)
trap 'spawn_stop; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$work/plugins"
ln -s "$build/plugins/.libs/sysstats.so" "$work/plugins/sysstats.so"
cat >"$work/cfg" <<CFG
buffers { size_kb: 65536 }
duration_ms: $((duration * 1000))
data_sources { config { name: "linux.sys_stats" sys_stats_config {
  meminfo_period_ms: $period vmstat_period_ms: $period stat_period_ms: $period } } }
CFG

make -C "$build" bench/sys-stats-floor >/dev/null || { echo "cannot build bench/sys-stats-floor" >&2; exit 2; }
peers="traced floor"
if [ -n "$BIN" ] && [ -x "$BIN/traced" ] && [ -x "$BIN/traced_probes" ]; then
        peers="traced upstream floor"
elif [ -n "$BIN" ]; then
        echo "PERFETTO_BIN_DIR holds no traced and traced_probes: upstream is not measured"
else
        echo "PERFETTO_BIN_DIR is not set: upstream traced_probes is not measured"
fi

# Waits up to 10 s for linux.sys_stats on the consumer socket $1.
wait_ds() {
        for _ in $(seq 100); do
                "$build/tracectl" --socket "$1" query 2>/dev/null | grep -q linux.sys_stats && return 0
                sleep 0.1
        done
        echo "linux.sys_stats never registered" >&2
        return 1
}

# One recording: prints the measured process's CPU ms per second and the
# number of SysStats packets.
run() {
        local which=$1 d="$work/$1" measured
        rm -rf "$d"
        mkdir "$d"
        if [ "$which" = floor ]; then
                echo "$("$build/bench/sys-stats-floor" "$period" "$duration") $((duration * 1000 / period))"
                return
        fi
        if [ "$which" = traced ]; then
                spawn "$build/traced" --producer-socket="$d/p" --consumer-socket="$d/c" --plugin-dir="$work/plugins" \
                        --plugin-host="$build/traced-plugin-host" --log-level=warning 2>"$d/traced.log"
                wait_ds "$d/c"
                measured=$(pgrep -f "traced-plugin-host .*$work/plugins/sysstats.so" | head -n 1)
        else
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced" \
                        >"$d/traced.log" 2>&1
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$d/p" "$BIN/traced_probes" >"$d/probes.log" 2>&1
                measured=$spawned_pid
                wait_ds "$d/c"
        fi
        [ -n "$measured" ] || { echo "$which: no process to measure" >&2; exit 1; }
        local t0 t1
        t0=$(ticks_of_pids "$measured")
        "$build/tracectl" --socket "$d/c" record -c "$work/cfg" --txt -o "$d/t.pftrace" --no-summary >"$d/tracectl.log" 2>&1 ||
                { echo "$which: tracectl failed: $(tail -n 2 "$d/tracectl.log")" >&2; exit 1; }
        t1=$(ticks_of_pids "$measured")
        local n
        n=$("$build/tracectl" summary "$d/t.pftrace" | awk '$1 == "sys_stats" { print $2 }')
        spawn_stop
        echo "$t0 $t1 $(getconf CLK_TCK) $duration ${n:-0}" |
                awk '{ printf "%.3f %d\n", (($3 + $4) - ($1 + $2)) * 1000 / $5 / $6, $7 }'
}

echo "sys_stats: meminfo, vmstat, stat (all counters) every $period ms for ${duration}s; $rounds rounds; $(nproc) CPUs"
for p in $peers; do : >"$work/$p.rows"; done
r=0
order=$peers
while [ $r -lt "$rounds" ]; do
        for p in $order; do
                run "$p" >>"$work/$p.rows"
        done
        # The next round starts with the tool this one started second.
        order="$(echo "$order" | cut -d' ' -f2-) $(echo "$order" | cut -d' ' -f1)"
        r=$((r + 1))
done
printf "%-9s %-28s %s\n" tool "CPU ms/s min/median/max" "SysStats packets min/median/max"
for p in $peers; do
        printf "%-9s %-28s %s\n" "$p" "$(cut -d' ' -f1 "$work/$p.rows" | stats)" "$(cut -d' ' -f2 "$work/$p.rows" | stats)"
done
median() { cut -d' ' -f1 "$work/$1.rows" | stats | cut -d/ -f2; }
ratio() { echo "$1 $2" | awk -v t="$3" '{ if ($2 > 0) printf "%s: %.2f\n", t, $1 / $2 }'; }
ratio "$(median traced)" "$(median floor)" "CPU, traced / floor (medians)"
if [ "$peers" = "traced upstream floor" ]; then
        ratio "$(median traced)" "$(median upstream)" "CPU, traced / upstream traced_probes (medians)"
        ratio "$(median floor)" "$(median upstream)" "CPU, floor / upstream traced_probes (medians): the least any poller could reach"
fi
