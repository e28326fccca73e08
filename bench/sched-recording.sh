#!/bin/sh
# Records the same scheduling-heavy workload (perf bench sched pipe) at
# several event rates with traced's ftrace plugin (compact sched), with
# `perf record -a` on the same tracepoints and, where it can run, with
# `trace-cmd record`, in the same run. For each tool and rate it prints:
# events recorded, event rate, CPU seconds of the recording processes (and
# per million events), bytes per event in the output, events lost.
#
# The rate is set by running the workload in a CPU cgroup limited to a
# share of one CPU (cgroup v2 cpu.max or v1 cfs quota); "max" is unlimited.
# Run as root from a build directory:
#   ../bench/sched-recording.sh [SHARE...]        (default: 5 25 max)
# Environment: DURATION (seconds of workload per run, default 3).
#
#   ../bench/sched-recording.sh --readers [ROUNDS] (default: 3)
# compares instead the ftrace plugin's three readers of the kernel's ring
# buffers (TRACED_FTRACE_READ=splice, the default: full sub-buffers by
# splice(); =read: read() only; =mmap: the kernel's mapping) and, when
# PERFETTO_BIN_DIR names upstream Perfetto's binaries, upstream's traced +
# traced_probes + perfetto CLI, in the same rounds (each round reverses the
# order of the one before): `perf bench sched pipe -l LOOPS` (1000000),
# recorded with compact sched, 8 MiB per CPU, into a 256 MiB DISCARD
# buffer. Per run: the producer's CPU time while the workload runs and its
# events drain (our plugin host, or traced_probes), the service's until the
# consumer has read the trace and left (traced's supervisor and core, or
# upstream's traced), both in nanoseconds from /proc/PID/task/*/schedstat;
# the consumer's whole life (tracectl or perfetto, task-clock by perf
# stat); per million events, the producer alone and all three; bytes per
# event; events the kernel lost. A trace with fewer than 2 events per loop
# fails the benchmark. Then min/median/max per reader over the rounds, and
# ours against upstream round by round. Environment: LOOPS; SHARE (percent
# of one CPU for the workload, e.g. 10 for an idle-ish rate; default
# unlimited); READERS (a subset of "splice read mmap up"); PROFILE_HOST=DIR
# (a `perf record -g` of each producer during the workload, its report in
# DIR/profile-READER.txt).
# Not part of make check.
set -eu

build=$(pwd)
# shellcheck source=bench/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
shares=${*:-5 25 max}
duration=${DURATION:-3}
work=$(mktemp -d /tmp/traced-bench-XXXXXX)
cg=""
cleanup() {
        spawn_stop
        [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
        rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

# The text config every reader records: the one of issue #39, which
# upstream's perfetto CLI takes as it is.
readers_config() {
        printf '%s\n' 'buffers { size_kb: 262144 fill_policy: DISCARD }' \
                'data_sources { config { name: "linux.ftrace" ftrace_config {' \
                '  ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking"' \
                '  compact_sched { enabled: true } buffer_size_kb: 8192 } } }' \
                'duration_ms: 600000' >"$work/readers.cfg"
}

# The workload of one --readers run: perf bench sched pipe -l $loops, in
# the CPU cgroup when a share is set (the idle-ish rate).
readers_workload() {
        # shellcheck disable=SC2016 # expanded by that sh
        spawn sh -c '[ -n "$1" ] && echo $$ >"$1/cgroup.procs"; exec perf bench sched pipe -l "$2"' \
                sh "$cg" "$loops" >/dev/null 2>&1
        spawn_wait "$spawned_pid" || true
}

run_reader() { # round reader(mmap|read|up)
        rm -f "$work/r.pftrace"
        host=""
        core=""
        if [ "$2" = up ]; then
                # Upstream: traced (service), traced_probes (producer), perfetto (consumer).
                rm -f "$work"/*.sock
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/p.sock" PERFETTO_CONSUMER_SOCK_NAME="$work/c.sock" \
                        "$BIN/traced" >"$work/up-traced.log" 2>&1
                tpid=$spawned_pid
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/p.sock" "$BIN/traced_probes" >"$work/up-probes.log" 2>&1
                ppid_=$spawned_pid
                sleep 1
                core=$tpid
                host=$ppid_
                spawn perf stat -x, -e task-clock -o "$work/consumer.time" \
                        env PERFETTO_CONSUMER_SOCK_NAME="$work/c.sock" "$BIN/perfetto" --txt -c "$work/readers.cfg" \
                        -o "$work/r.pftrace" >"$work/up-cli.log" 2>&1
        else
                TRACED_BENCH_LOG_LEVEL=info traced_start linux.ftrace env TRACED_FTRACE_READ="$2"
                spawn perf stat -x, -e task-clock -o "$work/consumer.time" \
                        "$build/tracectl" --socket "$work/c.sock" record --txt -c "$work/readers.cfg" \
                        -o "$work/r.pftrace" --no-summary >/dev/null 2>&1
        fi
        cpid=$spawned_pid
        sleep 1
        [ "$2" = up ] || service_pids ftrace.so
        h0=$(ns_of_pids "$host")
        t0=$(ns_of_pids $core)
        [ -n "${PROFILE_HOST:-}" ] && spawn perf record -g -q -o "$work/profile-$2.data" -p "$host" >/dev/null 2>&1 &&
                prof=$spawned_pid
        readers_workload
        sleep 0.5 # a drain period and more
        h1=$(ns_of_pids "$host")
        if [ -n "${PROFILE_HOST:-}" ]; then
                kill -INT "$prof"
                spawn_wait "$prof" || true
                perf report -i "$work/profile-$2.data" --no-children 2>/dev/null | grep -v '^$' | head -60 \
                        >"$PROFILE_HOST/profile-$2.txt"
        fi
        # The consumer ends the session and reads the buffer: the service's
        # part of that is counted (t1 after the consumer is gone).
        # (perf stat ignores SIGINT while its child runs: the consumer is
        # that child.)
        pkill -INT -P "$cpid" || true
        spawn_wait $cpid || true
        t1=$(ns_of_pids $core)
        # task-clock in milliseconds, as nanoseconds.
        c=$(awk -F, '$3 == "task-clock" || $3 ~ /^task-clock/ { printf "%.0f", $1 * 1e6 }' "$work/consumer.time")
        spawn_stop
        "$build/tracectl" summary "$work/r.pftrace" >"$work/summary.txt" 2>&1 || true
        ev=$(sed -n 's/^Ftrace events: *\([0-9]*\).*/\1/p' "$work/summary.txt")
        lost=$(sed -n 's/^Kernel buffer: *\([0-9]*\) events overwritten.*/\1/p' "$work/summary.txt")
        grep -q "kernel reported lost events" "$work/summary.txt" && lost="${lost:-0}+"
        # perf bench sched pipe -l N switches at least twice a loop: a
        # trace with fewer events lost some or ran short, and its round is
        # not a measure.
        if [ "${ev:-0}" -lt $((loops * 2)) ]; then
                echo "round $1 $2: only ${ev:-0} events in the trace (at least $((loops * 2)) expected)" >&2
                short_rounds=$((short_rounds + 1))
        fi
        paths=$(sed -n 's/^ *cpu[0-9]* .*(buffer \(.*\))$/\1/p' "$work/summary.txt" | sort | uniq -c | tr -s ' \n' ' ')
        # round path events, producer, service before and after (ns),
        # consumer (ns), bytes, lost, readers...
        echo "$1 $2 ${ev:-0} $h0 $h1 $t0 $t1 ${c:-0} $(stat -c %s "$work/r.pftrace") ${lost:-0} $paths" |
                awk '{
                prod = ($5 - $4) / 1e9; t = ($7 - $6) / 1e9; cons = $8 / 1e9
                printf "%-6s %-6s %9d %8.3f %8.3f %8.3f %9.4f %9.4f %8.2f %6s  ", $1, $2, $3, prod, t, cons,
                        $3 ? prod * 1e6 / $3 : 0, $3 ? (prod + t + cons) * 1e6 / $3 : 0, $3 ? $9 / $3 : 0, $10
                for (i = 11; i <= NF; i++) printf "%s ", $i
                printf "\n" }' | tee -a "$work/rows"
}

# A cgroup whose CPU share the runs set.
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
        cg=/sys/fs/cgroup/traced-bench-$$
        mkdir "$cg" 2>/dev/null && [ -f "$cg/cpu.max" ] || cg=""
        cgv=2
elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
        cg=/sys/fs/cgroup/cpu/traced-bench-$$
        mkdir "$cg" 2>/dev/null || cg=""
        cgv=1
fi
[ -n "$cg" ] || { echo "note: no writable CPU cgroup; every run is unlimited" >&2; shares=max; }

set_share() { # percent of one CPU, or max
        [ -n "$cg" ] || return 0
        if [ "$cgv" = 2 ]; then
                if [ "$1" = max ]; then echo "max 100000" >"$cg/cpu.max"; else echo "$(($1 * 1000)) 100000" >"$cg/cpu.max"; fi
        else
                echo 100000 >"$cg/cpu.cfs_period_us"
                if [ "$1" = max ]; then echo -1 >"$cg/cpu.cfs_quota_us"; else echo $(($1 * 1000)) >"$cg/cpu.cfs_quota_us"; fi
        fi
}

if [ "${1:-}" = --readers ]; then
        rounds=${2:-3}
        loops=${LOOPS:-1000000}
        BIN=${PERFETTO_BIN_DIR:-}
        readers=${READERS:-splice read mmap}
        if [ -n "${READERS:-}" ]; then
                :
        elif [ -n "$BIN" ] && [ -x "$BIN/traced" ] && [ -x "$BIN/traced_probes" ] && [ -x "$BIN/perfetto" ]; then
                readers="$readers up"
        else
                echo "PERFETTO_BIN_DIR names no upstream traced, traced_probes and perfetto: upstream is not measured" >&2
        fi
        set_share "${SHARE:-max}"
        readers_config
        echo "workload: perf bench sched pipe -l $loops, CPU share ${SHARE:-max} (% of one CPU); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
        printf "%-6s %-6s %9s %8s %8s %8s %9s %9s %8s %6s  %s\n" round path events producer service consumer \
                prod/Mev all/Mev bytes/ev lost "readers per CPU (tracectl summary)"
        short_rounds=0
        : >"$work/rows"
        for round in $(seq "$rounds"); do
                # Rounds alternate the order of the readers.
                order=$readers
                [ $((round % 2)) -eq 0 ] && order=$(echo "$readers" | tr ' ' '\n' | tac | tr '\n' ' ')
                for r in $order; do
                        run_reader "$round" "$r"
                done
        done
        echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "min/median/max over $rounds rounds:"
        printf "%-5s %-24s %-24s %-20s %s\n" path "prod CPU-s/Mev" "all CPU-s/Mev" bytes/ev events
        for r in $readers; do
                printf "%-5s %-24s %-24s %-20s %s\n" "$r" \
                        "$(awk -v r="$r" '$2 == r { print $7 }' "$work/rows" | stats)" \
                        "$(awk -v r="$r" '$2 == r { print $8 }' "$work/rows" | stats)" \
                        "$(awk -v r="$r" '$2 == r { print $9 }' "$work/rows" | stats)" \
                        "$(awk -v r="$r" '$2 == r { print $3 }' "$work/rows" | stats)"
        done
        if echo " $readers " | grep -q " up "; then
                for r in $readers; do
                        [ "$r" != up ] || continue
                        awk -v r="$r" '$2 == r { o[$1] = $8; p[$1] = $7 } $2 == "up" { u[$1] = $8; q[$1] = $7 }
                                END { for (k in o) if (k in u) printf "%s %.3f %.3f\n", r, o[k] / u[k], p[k] / q[k] }' \
                                "$work/rows" >"$work/ratio-$r"
                        printf "ours(%s)/upstream, round by round, min/median/max: all %s, producer %s\n" "$r" \
                                "$(cut -d' ' -f2 "$work/ratio-$r" | stats)" "$(cut -d' ' -f3 "$work/ratio-$r" | stats)"
                done
        fi
        if [ "$short_rounds" -gt 0 ]; then
                echo "sched-recording: $short_rounds run(s) recorded too few events: not a comparison" >&2
                exit 1
        fi
        exit 0
fi

workload() { # perf bench sched pipe in the cgroup for $duration seconds
        # shellcheck disable=SC2016 # expanded by that sh
        spawn sh -c '[ -n "$1" ] && echo $$ >"$1/cgroup.procs"; exec timeout -s INT "$2" perf bench sched pipe -l 2000000000' \
                sh "$cg" "$duration" >/dev/null 2>&1
        spawn_wait "$spawned_pid" || true
}

cpu_of() { # utime+stime (s) of a finished process tree, from /usr/bin/time -f
        tail -n 1 "$1" | awk '{ print $1 + $2 }'
}

row() { # share tool events cpu bytes lost
        echo "$@" | awk -v d="$duration" '{
                printf "%-6s %-9s %10d %9.0f %8.3f %10.3f %9.2f %8s\n", $1, $2, $3, $3 / d, $4,
                        $3 ? $4 * 1e6 / $3 : 0, $3 ? $5 / $3 : 0, $6 }'
}

run_traced() {
        rm -f "$work/t.pftrace"
        traced_start linux.ftrace /usr/bin/time -f "%U %S" -o "$work/traced.time"
        spawn /usr/bin/time -f "%U %S" -o "$work/tracectl.time" \
                "$build/tracectl" --socket "$work/c.sock" record -t 600s -b 256mb --no-process-stats --no-summary \
                sched/sched_switch sched/sched_waking -o "$work/t.pftrace" >/dev/null 2>&1
        cpid=$spawned_pid
        sleep 1
        workload
        sleep 0.3
        pkill -INT -P $cpid
        spawn_wait $cpid || true
        # traced's children (the plugin host) are counted with it.
        pkill -TERM -P $tpid
        spawn_wait $tpid || true
        "$build/tracectl" summary "$work/t.pftrace" >"$work/summary.txt"
        ev=$(sed -n 's/^Ftrace events: *\([0-9]*\).*/\1/p' "$work/summary.txt")
        lost=$(sed -n 's/^Kernel buffer: *\([0-9]*\) events overwritten.*/\1/p' "$work/summary.txt")
        grep -q "kernel reported lost events" "$work/summary.txt" && lost="${lost:-0}+"
        cpu=$(echo "$(cpu_of "$work/traced.time") $(cpu_of "$work/tracectl.time")" | awk '{ print $1 + $2 }')
        row "$1" traced "${ev:-0}" "$cpu" "$(stat -c %s "$work/t.pftrace")" "${lost:-?}"
}

run_perf() {
        spawn /usr/bin/time -f "%U %S" -o "$work/perf.time" \
                perf record -q -a -e sched:sched_switch -e sched:sched_waking -o "$work/perf.data" \
                >/dev/null 2>"$work/perf.log"
        ppid=$spawned_pid
        sleep 1
        workload
        sleep 0.3
        pkill -INT -P $ppid
        spawn_wait $ppid || true
        # Exact counts: SAMPLE records, and LOST / LOST_SAMPLES records
        # (each reports samples perf could not keep).
        perf report -i "$work/perf.data" --stats >"$work/perf.stats" 2>/dev/null || true
        pev=$(sed -n 's/^ *SAMPLE events: *\([0-9]*\).*/\1/p' "$work/perf.stats" | head -n 1)
        plost=$(sed -n 's/^ *LOST\(_SAMPLES\)\{0,1\} events: *\([0-9]*\).*/\2/p' "$work/perf.stats" | head -n 2 |
                awk '{ s += $1 } END { printf "%d", s }')
        row "$1" perf "${pev:-0}" "$(cpu_of "$work/perf.time")" "$(stat -c %s "$work/perf.data")" "${plost:-?}"
        rm -f "$work/perf.data"
}

tracecmd_reason=""
if ! command -v trace-cmd >/dev/null; then
        tracecmd_reason="not installed (Debian: trace-cmd)"
fi
ftrace_enabled_note=""
if ! (cat /proc/sys/kernel/ftrace_enabled >/proc/sys/kernel/ftrace_enabled) 2>/dev/null; then
        ftrace_enabled_note=" (/proc/sys/kernel/ftrace_enabled is not writable here; trace-cmd record writes it)"
fi

run_tracecmd() {
        rm -f "$work/tc.dat"
        spawn /usr/bin/time -f "%U %S" -o "$work/tc.time" \
                trace-cmd record -e sched:sched_switch -e sched:sched_waking -o "$work/tc.dat" \
                >"$work/tc.log" 2>&1
        tcpid=$spawned_pid
        sleep 1
        if ! kill -0 $tcpid 2>/dev/null; then
                spawn_wait $tcpid || true
                echo "$1 trace-cmd cannot run: $(tr '\n' ' ' <"$work/tc.log" | sed 's/  */ /g')$ftrace_enabled_note"
                return 0
        fi
        workload
        sleep 0.3
        pkill -INT -P $tcpid
        spawn_wait $tcpid || true
        tev=$(trace-cmd report -i "$work/tc.dat" 2>/dev/null | grep -c 'sched_switch:\|sched_waking:' || true)
        tlost=$(trace-cmd report -i "$work/tc.dat" 2>/dev/null | sed -n 's/.*\[LOST \([0-9]*\) EVENTS\].*/\1/p' |
                awk '{ s += $1 } END { printf "%d", s }')
        row "$1" trace-cmd "${tev:-0}" "$(cpu_of "$work/tc.time")" "$(stat -c %s "$work/tc.dat")" "${tlost:-?}"
}

echo "workload: perf bench sched pipe for ${duration}s per run, CPU share of the workload as given"
printf "%-6s %-9s %10s %9s %8s %10s %9s %8s\n" share tool events ev/s cpu_s cpu_s/Mev bytes/ev lost
for share in $shares; do
        set_share "$share"
        run_traced "$share"
        run_perf "$share"
        if [ -n "$tracecmd_reason" ]; then
                echo "$share trace-cmd skipped: $tracecmd_reason"
        else
                run_tracecmd "$share"
        fi
done
