#!/bin/sh
# JIT-compiled functions named in the stacks: how many of a JIT runtime's
# samples name its hot function, for linux.perf and linux.bpf_stack.
#
#   node: node --perf-basic-prof running tests/data/jit-busy.js (busyLoop,
#         called by outer), which writes /tmp/perf-PID.map as V8 compiles;
#   java: JDK 17 running tests/perf/JitBusy.java (JitBusy.busyLoop), its
#         map written by `jcmd PID Compiler.perfmap` once the method is
#         compiled, and again each second of the recording.
#
# Each runtime is recorded for DURATION seconds (after its warm-up) at 999
# Hz, its process alone (linux.perf: scope by name, frame pointers, as V8
# and HotSpot keep them; linux.bpf_stack: filter by comm, on-CPU, unwind
# tables where there are some, frame pointers elsewhere), and the trace is
# read back with `tracectl report --folded --pid`. For each runtime and
# plugin, over ROUNDS rounds (min / median / max):
#   samples  the process's samples in the trace (all of them on-CPU)
#   named%   share of them whose stack names the hot function
#
# Run as root from a build directory:
#   ../bench/jit-names.sh [node] [java]     (default: both)
# Environment: DURATION (default 5), ROUNDS (default 3). Not part of
# make check. A runtime that is not installed is said and skipped.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$src/bench/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
runtimes=${*:-node java}
duration=${DURATION:-5}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/traced-jit-bench-XXXXXX)
trap 'spawn_stop; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

config() { # plugin comm -> the config on stdout
        case $1 in
        perf)
                printf 'buffers { size_kb: 65536 }\ndata_sources { config { name: "linux.perf" perf_event_config {
  timebase { frequency: 999 counter: SW_CPU_CLOCK }
  callstack_sampling { scope { target_cmdline: "%s" } kernel_frames: false user_frames: UNWIND_FRAME_POINTER } } } }
duration_ms: %s\n' "$2" "$((duration * 1000))" ;;
        bpf)
                printf 'buffers { size_kb: 65536 }\ndata_sources { config { name: "linux.bpf_stack" bpf_stack_config {
  frequency: 999 off_cpu: false kernel_frames: false user_unwind: DWARF_TABLES drain_period_ms: 20
  filter: "comm=%s" } } }
duration_ms: %s\n' "$2" "$((duration * 1000))" ;;
        esac
}

# start_runtime RUNTIME: starts it, warmed up and mapped; its pid in rpid.
start_runtime() {
        case $1 in
        node)
                spawn node --perf-basic-prof "$src/tests/data/jit-busy.js" "$(((duration + 20) * 1000))" >/dev/null 2>&1
                rpid=$spawned_pid
                for _ in $(seq 50); do
                        grep -q busyLoop "/tmp/perf-$rpid.map" 2>/dev/null && return 0
                        sleep 0.2
                done ;;
        java)
                spawn java "$src/tests/perf/JitBusy.java" "$(((duration + 60) * 1000))" >/dev/null 2>&1
                rpid=$spawned_pid
                for _ in $(seq 120); do
                        sleep 0.5
                        jcmd "$rpid" Compiler.perfmap >/dev/null 2>&1 || continue
                        grep -q JitBusy.busyLoop "/tmp/perf-$rpid.map" 2>/dev/null && return 0
                done ;;
        esac
        echo "$1 (pid $rpid) never named its hot function in /tmp/perf-$rpid.map" >&2
        exit 1
}

stop_runtime() {
        kill -TERM "$rpid" 2>/dev/null || true
        # (the shell would say "Terminated" of it)
        { spawn_wait "$rpid" || true; } 2>/dev/null
        rm -f "/tmp/perf-$rpid.map"
}

# one RUNTIME PLUGIN -> "samples named%"
one() {
        case $1 in node) comm=node fn=busyLoop ;; java) comm=java fn=JitBusy.busyLoop ;; esac
        case $2 in perf) ds=linux.perf ;; bpf) ds=linux.bpf_stack ;; esac
        traced_start "$ds"
        start_runtime "$1"
        config "$2" "$comm" >"$work/cfg.pbtxt"
        spawn "$build/tracectl" --socket "$work/c.sock" record -c "$work/cfg.pbtxt" --txt --no-summary \
                -o "$work/t.pftrace" >"$work/record.log" 2>&1
        cpid=$spawned_pid
        # The JVM writes its map anew when asked: asked each second, for
        # what it compiles meanwhile.
        if [ "$1" = java ]; then
                for _ in $(seq "$duration"); do
                        sleep 1
                        jcmd "$rpid" Compiler.perfmap >/dev/null 2>&1 || true
                done
        fi
        spawn_wait "$cpid" || { echo "tracectl record failed ($1, $2):" >&2; cat "$work/record.log" >&2; exit 1; }
        stop_runtime
        pkill -TERM -P "$tpid" || true
        spawn_wait "$tpid" || true
        [ -z "${KEEP:-}" ] || { cp "$work/t.pftrace" "$KEEP-$1-$2.pftrace"; cp "$work/traced.log" "$KEEP-$1-$2.log"; }
        "$build/tracectl" report --folded --pid "$rpid" "$work/t.pftrace" 2>/dev/null |
                awk -v f="$fn" '{ n += $NF; if (index($0, f)) k += $NF }
                        END { printf "%d %.1f\n", n, n ? 100 * k / n : 0 }'
}

stats() { # column of numbers -> "min/median/max"
        sort -g | awk '{ v[NR] = $1 } END {
                if (NR == 0) { print "-/-/-"; exit }
                m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                printf "%s/%s/%s\n", v[1], m, v[NR] }'
}

echo "each runtime recorded ${duration}s at 999 Hz after its warm-up; $rounds rounds"
printf "%-7s %-16s %-22s %-22s\n" runtime plugin "samples min/med/max" "named% min/med/max"
for rt in $runtimes; do
        case $rt in
        node) command -v node >/dev/null || { echo "node: not installed (Debian: nodejs), skipped"; continue; } ;;
        java) command -v java >/dev/null && command -v jcmd >/dev/null ||
                { echo "java: no JDK (Debian: openjdk-17-jdk-headless), skipped"; continue; } ;;
        *) echo "unknown runtime: $rt (node, java)" >&2; exit 2 ;;
        esac
        for plugin in perf bpf; do
                : >"$work/rows"
                r=0
                while [ $r -lt "$rounds" ]; do
                        one "$rt" "$plugin" >>"$work/rows"
                        r=$((r + 1))
                done
                printf "%-7s %-16s %-22s %-22s\n" "$rt" "$([ $plugin = perf ] && echo linux.perf || echo linux.bpf_stack)" "$(cut -d' ' -f1 "$work/rows" | stats)" \
                        "$(cut -d' ' -f2 "$work/rows" | stats)"
        done
done
