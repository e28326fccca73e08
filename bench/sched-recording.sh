#!/bin/sh
# Records the same scheduling-heavy workload (perf bench sched pipe) with
# traced's ftrace plugin and with `perf record` on the same tracepoints, in
# the same run, and prints for each: events, CPU seconds of the recording
# processes, CPU seconds per million events, bytes per event, and the
# ratios traced/perf. Run as root from a build directory:
#   ../bench/sched-recording.sh [LOOPS...]
# (default loop counts: 20000 100000). Not part of make check.
set -eu

build=$(pwd)
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
loops=${*:-20000 100000}
work=$(mktemp -d /tmp/traced-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

cpu_of() { # utime+stime (s) of a finished process tree, from /usr/bin/time -f
        tail -n 1 "$1" | awk '{ print $1 + $2 }'
}

printf "%-8s %-7s %10s %8s %12s %9s\n" loops tool events cpu_s cpu_s/Mev bytes/ev
for n in $loops; do
        # traced + the ftrace plugin, recording through tracectl.
        rm -f "$work"/*.sock
        /usr/bin/time -f "%U %S" -o "$work/traced.time" \
                "$build/traced" --producer-socket="$work/p.sock" --consumer-socket="$work/c.sock" \
                --plugin-dir="$build/plugins/.libs" --plugin-host="$build/traced-plugin-host" \
                --log-level=warning 2>"$work/traced.log" &
        tpid=$!
        for _ in $(seq 100); do
                "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q linux.ftrace && break
                sleep 0.1
        done
        /usr/bin/time -f "%U %S" -o "$work/tracectl.time" \
                "$build/tracectl" --socket "$work/c.sock" record -t 600s -b 256mb --no-process-stats --no-summary \
                sched/sched_switch sched/sched_waking -o "$work/t.pftrace" >/dev/null 2>&1 &
        cpid=$!
        sleep 1
        perf bench sched pipe -l "$n" >/dev/null 2>&1
        sleep 0.3
        pkill -INT -P $cpid
        wait $cpid || true
        # traced's children (the plugin host) are counted with it.
        pkill -TERM -P $tpid
        wait $tpid || true
        ev=$("$build/tracectl" summary "$work/t.pftrace" | sed -n 's/^Ftrace events: *\([0-9]*\).*/\1/p')
        cpu=$(echo "$(cpu_of "$work/traced.time") $(cpu_of "$work/tracectl.time")" | awk '{ print $1 + $2 }')
        size=$(stat -c %s "$work/t.pftrace")
        t_ev=$ev t_cpu=$cpu t_bytes=$size
        printf "%-8s %-7s %10s %8.3f %12.3f %9.2f\n" "$n" traced "$ev" "$cpu" \
                "$(echo "$cpu $ev" | awk '{ print $2 ? $1 * 1e6 / $2 : 0 }')" "$(echo "$size $ev" | awk '{ print $2 ? $1 / $2 : 0 }')"

        # perf record on the same tracepoints, system-wide.
        /usr/bin/time -f "%U %S" -o "$work/perf.time" \
                perf record -q -a -e sched:sched_switch -e sched:sched_waking -o "$work/perf.data" \
                >/dev/null 2>"$work/perf.log" &
        ppid=$!
        sleep 1
        perf bench sched pipe -l "$n" >/dev/null 2>&1
        sleep 0.3
        pkill -INT -P $ppid
        wait $ppid || true
        pev=$(perf report -i "$work/perf.data" --stdio --sort dso 2>/dev/null | sed -n 's/^# Samples: *\([0-9.]*\)\([KM]*\).*/\1 \2/p' |
              awk '{ m = ($2 == "K") ? 1e3 : ($2 == "M") ? 1e6 : 1; s += $1 * m } END { printf "%d", s }')
        pcpu=$(cpu_of "$work/perf.time")
        psize=$(stat -c %s "$work/perf.data")
        printf "%-8s %-7s %10s %8.3f %12.3f %9.2f\n" "$n" perf "$pev" "$pcpu" \
                "$(echo "$pcpu $pev" | awk '{ print $2 ? $1 * 1e6 / $2 : 0 }')" "$(echo "$psize $pev" | awk '{ print $2 ? $1 / $2 : 0 }')"
        echo "$n $t_ev $t_cpu $t_bytes $pev $pcpu $psize" | awk '{
                tc = $2 ? $3 * 1e6 / $2 : 0; pc = $5 ? $6 * 1e6 / $5 : 0;
                tb = $2 ? $4 / $2 : 0; pb = $5 ? $7 / $5 : 0;
                printf "%-8s ratio   traced/perf: cpu per event %.2f, bytes per event %.2f\n", $1,
                        pc ? tc / pc : 0, pb ? tb / pb : 0 }'
done
