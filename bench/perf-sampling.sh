#!/bin/sh
# CPU profiling, system-wide, against perf on the same workload in the same
# run: two busy python3 processes started through an exec shim (as pyenv's
# shims do) and the known-chain test program, sampled on every CPU at each
# rate for DURATION seconds with kernel and user stacks.
#
#   traced: tracectl record --perf HZ (linux.perf: DWARF unwinding and
#           symbolization on the machine, while recording)
#   perf:   perf record -a --call-graph dwarf -F HZ, then perf report
#           (perf unwinds and symbolizes in the report)
#
# For each tool and rate, over ROUNDS rounds (min / median / max):
#   kept%    samples in the output of the expected CPUs x HZ x DURATION
#   uerr%    samples of the workload's three processes with an unwind
#            error (traced: PerfSample.unwind_error; perf reports none,
#            shown as -). Other processes of the machine are sampled too
#            (and count in kept% and us/smp) but not here: a deep stack
#            (a compiler's) outgrows any stack copy.
#   us/smp   CPU time of the whole tool (traced with its plugin host and
#            tracectl, and the run time of linux.perf's BPF walk of the
#            Python frames in the sampled threads; perf record + perf
#            report) per sample kept
#   steady   traced only: the same CPU (traced, its plugin host, tracectl
#            and the BPF walk) from STEADY_FROM seconds into the recording
#            to a second before its end, per sample taken then: without
#            the start of the plugin host and tracectl, which the whole
#            figure counts (on a machine where processes start slowly it
#            can be most of that figure)
#   plugin   the profiler itself, per sample kept, over the whole
#            recording: traced's linux.perf plugin host (read when the
#            recording ended: from its start for the session, with the
#            BPF walk's run time) or upstream's traced_perf (its whole
#            run); not traced's service core, tracectl, or perfetto
# and the ratio of traced's median us/smp to perf's.
#
# With PERFETTO_BIN_DIR naming a directory with upstream's traced,
# traced_perf and perfetto, upstream is a third tool in the same rounds:
#
#   traced_perf: upstream traced + traced_perf, the same config as ours
#           (tracectl record --perf HZ --dry-run prints it) given to a
#           `perfetto` consumer, with ring_buffer_pages: 2048: its default
#           ring (1 MiB a CPU, read every 100 ms) holds 16 of its 64 KiB
#           stack copies, and at 999 Hz it lost 84 % of the samples to the
#           kernel (ours sizes its ring, 4 MiB, and drains it when
#           half full); CPU of traced, traced_perf and perfetto.
#           RING_PAGES=N gives both tools ring_buffer_pages: N (the same
#           config in full; ours runs with its default otherwise).
#
# with the ratio of traced's median us/smp to traced_perf's.
#
# CPython frames (WHAT=python): two python3.11 running
# tests/data/pyframes-busy.py (one of them with a second thread), sampled
# system-wide by linux.perf with DWARF stacks, with its Python frames (the
# default) and with callstack_sampling.traced_python_frames: false, ROUNDS
# rounds each: samples kept, samples of the two with Python frames, and
# the CPU of traced, its plugin host and tracectl per sample kept, whole
# and in the steady state, with the ratios of the medians (target: at
# most 1.5).
#
# Run as root from a build directory (after make check, which builds the
# test program):
#   ../bench/perf-sampling.sh [HZ...]          (default: 99 999)
# Environment: DURATION (default 10), ROUNDS (default 3), WHAT (default
# "peers": against perf; or "python"), PYTHON (default /usr/bin/python3.11),
# STEADY_FROM (default 3), SHIM (default 1; 0: no exec shim), PRESTART
# (default 0; 1: the workload runs from before the recording to after it),
# PERFETTO_BIN_DIR (upstream's binaries), RING_PAGES (see traced_perf
# above), LOAD (compile: a build beside, on all CPUs but one, niced,
# sampled with the rest; 1: busy loops; default 0: nothing).
# Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$src/bench/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
chain="$build/tests/perf/chain-O2-nofp"
[ -x "$chain" ] || { echo "build the test program first: make tests/perf/chain-O2-nofp" >&2; exit 2; }
[ "${WHAT:-peers}" = python ] || command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }
rates=${*:-99 999}
duration=${DURATION:-10}
rounds=${ROUNDS:-3}
# The steady state: from STEADY_FROM seconds after tracectl starts to a
# second before the recording ends.
steady_from=${STEADY_FROM:-3}
[ "$duration" -ge "$((steady_from + 2))" ] || { echo "DURATION must be at least STEADY_FROM + 2" >&2; exit 2; }
cpus=$(nproc)
work=$(mktemp -d /tmp/traced-perf-bench-XXXXXX)
old_stats=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
load_pids=""
# shellcheck disable=SC2086 # load_pids: words
trap '[ -z "$load_pids" ] || kill $load_pids 2>/dev/null; spawn_stop; sysctl -q -w kernel.bpf_stats_enabled="$old_stats" 2>/dev/null || true; rm -rf "$work"' EXIT
# The kernel counts the run time of BPF programs only with this on.
sysctl -q -w kernel.bpf_stats_enabled=1 2>/dev/null || echo "kernel.bpf_stats_enabled cannot be set: BPF run time not counted" >&2
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# SHIM=0: the python3 processes are started directly. traced_perf keeps
# the memory map it read of a process before its exec (the shim's): it
# then unwinds none of that process's samples (invalid_map), which makes
# its samples cheaper than they would be.
shim="$src/tests/perf/exec-shim.sh"
[ "${SHIM:-1}" = 1 ] || shim=

# PRESTART=1: the workload starts (and execs) before the recording and
# outlives it: what traced_perf needs to unwind it (see SHIM).
extra=0
[ "${PRESTART:-0}" = 0 ] || extra=3

workload_start() { # the three processes, for $duration seconds; their pids in $work/pids
        spawn timeout "$((duration + extra))" $shim python3 -c 'while True: sum(range(1000))'
        t1=$spawned_pid
        spawn timeout "$((duration + extra))" $shim python3 -c 'while True: sorted(range(500), key=lambda x: -x)'
        t2=$spawned_pid
        spawn "$chain" "$((duration + extra))" >/dev/null
        t3=$spawned_pid
        echo $t3 >"$work/pids"
        sleep 0.5
        # timeout's child is the shim, which becomes python3 (same pid), or
        # python3 itself.
        pgrep -P $t1 >>"$work/pids" || true
        pgrep -P $t2 >>"$work/pids" || true
}

workload_wait() {
        for t in $t1 $t2 $t3; do
                spawn_wait "$t" || true
        done
}

# Around a tool's recording (spawned between the two): the workload.
workload_before() {
        [ "$extra" = 0 ] || workload_start
}
workload_during() {
        [ "$extra" != 0 ] || { workload_start; workload_wait; }
}
workload_after() {
        [ "$extra" = 0 ] || workload_wait
}

BIN=${PERFETTO_BIN_DIR:-}
upstream=false
if [ -n "$BIN" ] && [ -x "$BIN/traced" ] && [ -x "$BIN/traced_perf" ] && [ -x "$BIN/perfetto" ]; then
        upstream=true
elif [ -n "$BIN" ]; then
        echo "PERFETTO_BIN_DIR names no upstream traced, traced_perf and perfetto: upstream is not measured" >&2
fi

cpu_of() { # utime+stime (s) from bench/cputime.py
        tail -n 1 "$1" | awk '{ print $1 + $2 }'
}

# The seconds linux.perf's BPF program (the walk of the Python frames, at
# each sample) ran, from traced's log (its plugin logs what the kernel
# counted at the stop, with kernel.bpf_stats_enabled on): time spent in
# the sampled threads, not in traced's processes, counted with them here.
bpf_of() {
        sed -n 's/.*the BPF walk of the Python frames ran [0-9]* times for \([0-9.]*\) ms in all.*/\1/p' \
                "$work/traced.log" | awk '{ s += $1 } END { printf "%.6f\n", s / 1000 }'
}

# perf_config HZ PAGES FILE: the config tracectl record --perf HZ makes
# (for DURATION, 256 MiB, no process stats), with ring_buffer_pages: PAGES.
perf_config() {
        "$build/tracectl" record --perf "$1" -t "${duration}s" -b 256mb --no-process-stats --dry-run \
                -o "$work/unused.pftrace" 2>/dev/null |
                sed "s/^    perf_event_config {\$/&\n      ring_buffer_pages: $2/" >"$3"
        grep -q "ring_buffer_pages: $2" "$3" || { echo "cannot make the config of ring_buffer_pages: $2" >&2; exit 1; }
}

run_traced() { # hz -> "kept uerr us steady plugin"
        rm -f "$work/t.pftrace"
        TRACED_BENCH_LOG_LEVEL=info traced_start linux.perf "$src/bench/cputime.py" "$work/traced.time"
        workload_before
        if [ -n "${RING_PAGES:-}" ]; then
                perf_config "$1" "$RING_PAGES" "$work/ours.cfg"
                spawn "$src/bench/cputime.py" "$work/tracectl.time" \
                        "$build/tracectl" --socket "$work/c.sock" record --txt -c "$work/ours.cfg" \
                        --no-summary -o "$work/t.pftrace" >/dev/null 2>&1
        else
                spawn "$src/bench/cputime.py" "$work/tracectl.time" \
                        "$build/tracectl" --socket "$work/c.sock" record -t "${duration}s" -b 256mb \
                        --no-process-stats --no-summary --perf "$1" -o "$work/t.pftrace" >/dev/null 2>&1
        fi
        cpid=$spawned_pid
        rm -f "$work/window"
        (tree_window "$steady_from" "$((duration - 1))" "$work/window" "$tpid" "$cpid") &
        wpid=$!
        workload_during
        spawn_wait $cpid || true
        wait $wpid || true
        host=$(plugin_host_read "$tpid" perf.so)
        workload_after
        # traced's children (the plugin host) are counted with it.
        pkill -TERM -P $tpid
        spawn_wait $tpid || true
        cpu=$(echo "$(cpu_of "$work/traced.time") $(cpu_of "$work/tracectl.time") $(bpf_of)" |
                awk '{ print $1 + $2 + $3 }')
        echo "$(sample_row "$1" "$work/t.pftrace" "$cpu") $(window_us_per_sample "$work/window" "$work/t.pftrace")" \
                "$(echo "$host" | awk '$1 != "-" { print ($1 + $2) / 1e9 }' | us_per_sample "$work/t.pftrace")"
}

# us_per_sample TRACE: CPU seconds (on standard input, "-" or nothing:
# none) per perf sample of TRACE, in us; "-" without either.
us_per_sample() {
        us_cpu=$(cat)
        us_n=$("$build/tracectl" summary "$1" 2>/dev/null | sed -n 's/^Perf samples: *\([0-9]*\) .*/\1/p')
        echo "${us_cpu:--} ${us_n:-0}" | awk '{ if ($1 != "-" && $2 > 0) printf "%.2f\n", $1 * 1e6 / $2; else print "-" }'
}

# Samples kept and the workload's unwind errors, from tracectl summary of
# a trace (ours or upstream's: the same PerfSample packets), with CPU
# seconds -> "kept uerr us".
sample_row() { # hz trace cpu
        "$build/tracectl" summary "$2" >"$work/summary.txt"
        line=$(grep '^Perf samples:' "$work/summary.txt" || echo "Perf samples: 0 (0 with callstacks, 0 unwind errors)")
        n=$(echo "$line" | sed -n 's/^Perf samples: *\([0-9]*\) .*/\1/p')
        # Unwind errors of the workload's processes (the per-process lines).
        we=$(for p in $(cat "$work/pids"); do
                sed -n "s/^  pid $p  *[^ ]*  *\([0-9]*\) samples, \([0-9]*\) unwind errors/\1 \2/p" "$work/summary.txt"
        done | awk '{ n += $1; e += $2 } END { printf "%d %d", n, e }')
        echo "${n:-0} $we $3" | awk -v want="$((cpus * $1 * duration))" \
                '{ printf "%.2f %.3f %.2f\n", 100 * $1 / want, $2 ? 100 * $3 / $2 : 0, $1 ? $4 * 1e6 / $1 : 0 }'
}

run_upstream() { # hz -> "kept uerr us - plugin"
        rm -f "$work/u.pftrace" "$work"/up-*.sock
        perf_config "$1" "${RING_PAGES:-2048}" "$work/up.cfg"
        spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/up-p.sock" PERFETTO_CONSUMER_SOCK_NAME="$work/up-c.sock" \
                "$src/bench/cputime.py" "$work/up-traced.time" "$BIN/traced" >"$work/up-traced.log" 2>&1
        upid=$spawned_pid
        sleep 0.5
        spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/up-p.sock" \
                "$src/bench/cputime.py" "$work/up-perf.time" "$BIN/traced_perf" >"$work/up-perf.log" 2>&1
        uperf=$spawned_pid
        sleep 1
        workload_before
        spawn env PERFETTO_CONSUMER_SOCK_NAME="$work/up-c.sock" "$src/bench/cputime.py" "$work/up-cli.time" \
                "$BIN/perfetto" --txt -c "$work/up.cfg" -o "$work/u.pftrace" >"$work/up-cli.log" 2>&1
        cpid=$spawned_pid
        workload_during
        spawn_wait $cpid || { cat "$work/up-cli.log" >&2; }
        workload_after
        pkill -TERM -P $uperf || true
        spawn_wait $uperf || true
        pkill -TERM -P $upid || true
        spawn_wait $upid || true
        cpu=$(echo "$(cpu_of "$work/up-traced.time") $(cpu_of "$work/up-perf.time") $(cpu_of "$work/up-cli.time")" |
                awk '{ print $1 + $2 + $3 }')
        echo "$(sample_row "$1" "$work/u.pftrace" "$cpu") - $(cpu_of "$work/up-perf.time" | us_per_sample "$work/u.pftrace")"
}

run_perf() { # hz -> "kept - us - -"
        rm -f "$work/perf.data"
        workload_before
        spawn "$src/bench/cputime.py" "$work/perf.time" \
                perf record -q -a --call-graph dwarf -F "$1" -o "$work/perf.data" -- sleep "$duration" \
                >/dev/null 2>"$work/perf.log"
        ppid=$spawned_pid
        workload_during
        spawn_wait $ppid || true
        workload_after
        "$src/bench/cputime.py" "$work/report.time" \
                perf report -i "$work/perf.data" --stdio >/dev/null 2>&1 || true
        perf report -i "$work/perf.data" --stats >"$work/perf.stats" 2>/dev/null || true
        n=$(sed -n 's/^ *SAMPLE events: *\([0-9]*\).*/\1/p' "$work/perf.stats" | head -n 1)
        cpu=$(echo "$(cpu_of "$work/perf.time") $(cpu_of "$work/report.time")" | awk '{ print $1 + $2 }')
        echo "${n:-0} $cpu" | awk -v want="$((cpus * $1 * duration))" \
                '{ printf "%.2f - %.2f - -\n", 100 * $1 / want, $1 ? $2 * 1e6 / $1 : 0 }'
}

stats() { # column of numbers ("-": none) -> "min median max"
        grep -v '^-$' | sort -g | awk '{ v[NR] = $1 } END {
                if (NR == 0) { print "- - -"; exit }
                m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                printf "%s %s %s\n", v[1], m, v[NR] }'
}

run_python() { # hz "callstack_sampling fields" -> "kept% with_py us"
        rm -f "$work/t.pftrace"
        TRACED_BENCH_LOG_LEVEL=info traced_start linux.perf "$src/bench/cputime.py" "$work/traced.time"
        printf 'buffers { size_kb: 262144 }\ndata_sources { config { name: "linux.perf" perf_event_config {
  timebase { frequency: %s counter: SW_CPU_CLOCK } callstack_sampling { user_frames: UNWIND_DWARF %s } } } }
duration_ms: %s\n' "$1" "$2" "$((duration * 1000))" >"$work/cfg.pbtxt"
        spawn "$src/bench/cputime.py" "$work/tracectl.time" \
                "$build/tracectl" --socket "$work/c.sock" record -c "$work/cfg.pbtxt" --txt --no-summary \
                -o "$work/t.pftrace" >/dev/null 2>&1
        cpid=$spawned_pid
        rm -f "$work/window"
        (tree_window "$steady_from" "$((duration - 1))" "$work/window" "$tpid" "$cpid") &
        wpid=$!
        spawn timeout "$duration" "$python" "$src/tests/data/pyframes-busy.py"
        p1=$spawned_pid
        spawn timeout "$duration" "$python" "$src/tests/data/pyframes-busy.py" -1 threads
        p2=$spawned_pid
        spawn_wait $p1 || true
        spawn_wait $p2 || true
        spawn_wait $cpid || true
        wait $wpid || true
        pkill -TERM -P $tpid
        spawn_wait $tpid || true
        "$build/tracectl" summary "$work/t.pftrace" >"$work/summary.txt"
        n=$(sed -n 's/^Perf samples: *\([0-9]*\) .*/\1/p' "$work/summary.txt")
        # Samples with a Python frame of the script (its path in a frame's name).
        py=$("$build/tracectl" report --folded "$work/t.pftrace" 2>/dev/null |
                awk -v f="pyframes-busy.py:" 'index($0, f) { n += $NF } END { print n + 0 }')
        cpu=$(echo "$(cpu_of "$work/traced.time") $(cpu_of "$work/tracectl.time") $(bpf_of)" |
                awk '{ print $1 + $2 + $3 }')
        steady=$(window_us_per_sample "$work/window" "$work/t.pftrace")
        echo "${n:-0} $py $cpu $steady" | awk -v want="$((cpus * $1 * duration))" \
                '{ printf "%.2f %d %.2f %s\n", 100 * $1 / want, $2, $1 ? $3 * 1e6 / $1 : 0, $4 }'
}

# A build beside (LOAD=compile), sampled with the rest.
load_start "${LOAD:-0}"

if [ "${WHAT:-peers}" = python ]; then
        python=${PYTHON:-/usr/bin/python3.11}
        [ -x "$python" ] || { echo "needs $python (Debian: python3.11)" >&2; exit 2; }
        echo "workload: 2 $python running pyframes-busy.py (one with two threads) for ${duration}s; $cpus CPUs;" \
                "$rounds rounds"
        printf "%-5s %-10s %-22s %-22s %-24s %-24s\n" hz frames "kept% min/med/max" "with Python min/med/max" \
                "us/sample min/med/max" "steady us/smp min/med/max"
        for hz in $rates; do
                : >"$work/on.rows"
                : >"$work/off.rows"
                r=0
                while [ $r -lt "$rounds" ]; do
                        run_python "$hz" "" >>"$work/on.rows"
                        run_python "$hz" "traced_python_frames: false" >>"$work/off.rows"
                        r=$((r + 1))
                done
                for f in on off; do
                        printf "%-5s %-10s %-22s %-22s %-24s %-24s\n" "$hz" "$f" \
                                "$(cut -d' ' -f1 "$work/$f.rows" | stats | tr ' ' /)" \
                                "$(cut -d' ' -f2 "$work/$f.rows" | stats | tr ' ' /)" \
                                "$(cut -d' ' -f3 "$work/$f.rows" | stats | tr ' ' /)" \
                                "$(cut -d' ' -f4 "$work/$f.rows" | stats | tr ' ' /)"
                done
                on=$(cut -d' ' -f3 "$work/on.rows" | stats | cut -d' ' -f2)
                off=$(cut -d' ' -f3 "$work/off.rows" | stats | cut -d' ' -f2)
                echo "$on $off" | awk -v hz="$hz" '{ if ($2 > 0) printf "%-5s CPU per sample, frames on / off (medians): %.3f\n", hz, $1 / $2 }'
                on=$(cut -d' ' -f4 "$work/on.rows" | stats | cut -d' ' -f2)
                off=$(cut -d' ' -f4 "$work/off.rows" | stats | cut -d' ' -f2)
                echo "$on $off" | awk -v hz="$hz" '{ if ($2 > 0) printf "%-5s CPU per sample in the steady state, frames on / off (medians): %.3f\n", hz, $1 / $2 }'
        done
        exit 0
fi

how="started directly"
[ -z "$shim" ] || how="through an exec shim"
echo "workload: 2 python3 ($how) + chain-O2-nofp for ${duration}s$([ "$extra" = 0 ] || echo ", started before the recording"); $cpus CPUs; $rounds rounds"
printf "%-5s %-11s %-22s %-22s %-24s %-24s %-24s\n" hz tool "kept% min/med/max" "uerr% min/med/max" \
        "us/sample min/med/max" "steady us/smp min/med/max" "plugin us/smp min/med/max"
tools="traced perf"
! $upstream || tools="traced perf traced_perf"
for hz in $rates; do
        r=0
        for tool in $tools; do : >"$work/$tool.rows"; done
        while [ $r -lt "$rounds" ]; do
                run_traced "$hz" >>"$work/traced.rows"
                run_perf "$hz" >>"$work/perf.rows"
                ! $upstream || run_upstream "$hz" >>"$work/traced_perf.rows"
                r=$((r + 1))
        done
        for tool in $tools; do
                k=$(cut -d' ' -f1 "$work/$tool.rows" | stats)
                if [ "$tool" = perf ]; then e="- - -"; else e=$(cut -d' ' -f2 "$work/$tool.rows" | stats); fi
                u=$(cut -d' ' -f3 "$work/$tool.rows" | stats)
                w=$(cut -d' ' -f4 "$work/$tool.rows" | stats)
                g=$(cut -d' ' -f5 "$work/$tool.rows" | stats)
                printf "%-5s %-11s %-22s %-22s %-24s %-24s %-24s\n" "$hz" "$tool" "$(echo $k | tr ' ' /)" \
                        "$(echo $e | tr ' ' /)" "$(echo $u | tr ' ' /)" "$(echo $w | tr ' ' /)" "$(echo $g | tr ' ' /)"
        done
        ours=$(cut -d' ' -f3 "$work/traced.rows" | stats | cut -d' ' -f2)
        theirs=$(cut -d' ' -f3 "$work/perf.rows" | stats | cut -d' ' -f2)
        echo "$ours $theirs" | awk -v hz="$hz" '{ if ($2 > 0) printf "%-5s CPU per sample, traced / perf (medians): %.3f\n", hz, $1 / $2 }'
        if $upstream; then
                up=$(cut -d' ' -f3 "$work/traced_perf.rows" | stats | cut -d' ' -f2)
                echo "$ours $up" | awk -v hz="$hz" '{ if ($2 > 0) printf "%-5s CPU per sample, traced / traced_perf (medians): %.3f\n", hz, $1 / $2 }'
                ours=$(cut -d' ' -f5 "$work/traced.rows" | stats | cut -d' ' -f2)
                up=$(cut -d' ' -f5 "$work/traced_perf.rows" | stats | cut -d' ' -f2)
                echo "$ours $up" | awk -v hz="$hz" '{ if ($1 != "-" && $2 != "-" && $2 > 0) printf "%-5s CPU per sample of the profiler, traced'"'"'s linux.perf host / traced_perf (medians): %.3f\n", hz, $1 / $2 }'
        fi
done
