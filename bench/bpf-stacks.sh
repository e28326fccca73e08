#!/bin/sh
# Stack sampling by BPF, system-wide, against bpftrace and bcc on the same
# workload in the same run, with kernel.bpf_stats_enabled on so the kernel
# counts each program's run time.
#
# On-CPU, at each rate, two busy python3 processes for DURATION seconds:
#   traced:   tracectl record with linux.bpf_stack (on-CPU only, every
#             process, kernel and user stacks)
#   bpftrace: profile:hz:N { @[kstack, ustack] = count(); }
#   bcc:      profile -F N (kernel and user stacks, counted in BPF)
# Off-CPU, `perf bench sched pipe` (two tasks ping-ponging over pipes):
#   traced:   linux.bpf_stack with on_cpu: false
#   bcc:      offcputime
#   bpftrace: offcputime's method on the sched_switch tracepoint (kernel
#             and user stacks taken at switch-out, the blocked time summed
#             per stack pair and command in BPF at switch-in), for
#             machines where bcc cannot run (offcputime needs kernel
#             headers and a kprobe on finish_task_switch)
#
# For each tool, over ROUNDS rounds (min / median / max):
#   bpf_ns/run  the tool's BPF programs' run time per run (bpftool prog
#               show: run_time_ns / run_cnt of the programs the tool
#               loaded), i.e. per sample or per context switch
#   cpu_us/run  the whole tool's CPU time (user + system of all its
#               processes, from /usr/bin/time, plus the BPF run time) per
#               program run
#   cpu%        that CPU time as a share of one CPU over the run
# and, for traced, its steady state: the CPU of its processes and tracectl
# from 2 s into the workload to 1 s before its end (start-up, the BPF
# programs' loading and shut-down left out), plus the BPF run time, as a
# share of one CPU;
# and the ratio of traced's median to each peer's.
#
# User stacks without frame pointers (WHAT=unwind), at each rate: one
# Debian python3 (built without frame pointers) in a busy loop, sampled on
# CPU for DURATION seconds, user stacks only, by
#   traced:    linux.bpf_stack, user_unwind: DWARF_TABLES (unwind tables
#              walked in BPF)
#   traced-fp: the same with user_unwind: FRAME_POINTER
#   bpftrace:  profile:hz:N /pid == P/ { @[ustack] = count(); }
#   perf:      perf record --call-graph dwarf (8 KiB of stack copied per
#              sample, unwound afterwards by perf script)
# and for each, over ROUNDS rounds (min / median / max): the share of
# samples whose user stack reaches main or _start, the median number of
# user frames per sample, the BPF run time per sample, the tool's CPU
# and BPF programs in the steady state (from 2 s into the run to 1 s
# before its end) as a share of one CPU (perf: perf record; the unwinding
# it leaves to perf script is given apart, in CPU seconds), and memory:
# for traced the unwind tables in use (KiB, from its log) and the BPF maps
# holding them (memlock KiB, allocated whole at start); for perf the size
# of perf.data (KiB).
#
# System-wide among a crowd (WHAT=crowd): a build beside (BUILD_JOBS
# loops, 2 by default, compiling this project's library sources with
# cc -O2 over and over), SLEEPERS processes (100 by default) that sleep
# half a second at a time, and one busy python3 (no frame pointers: only
# unwind tables walk it to main), running before the recording starts;
# traced with a table cache ($CACHE_DIRECTORY under $work), and the
# command a user types, `tracectl record -t DURATIONs --bpf-stacks -o F`
# (on-CPU at 99 Hz and off-CPU, with its summary). Each of ROUNDS rounds
# records twice: uncached (the cache emptied first), then cached. For
# each, min / median / max over the rounds of:
#   wall         the command's wall time, s (target: DURATION + 0.5)
#   1st s %      of the python3's on-CPU samples in the recording's first
#                second (from the file's first sample), the share whose
#                user stack reaches main or _start: walked by tables
#                (target: 90)
#   main %       the same over the whole recording
#   compile ms   table compile time of the recording (the instance's stop
#                line), files compiled, and files read from the cache
# and the cached recording's compile time as a share of the uncached one's
# in the same round (target: 10 %).
#
# CPython frames (WHAT=python), at each rate: two python3 running
# tests/data/pyframes-busy.py (fib under main -> loop -> work; one of
# them with a second thread), sampled on CPU by linux.bpf_stack with its
# Python frames (the default) and with python_frames: false, ROUNDS
# rounds each: the BPF run time per sample and the CPU per sample of
# both, and their ratio (target: at most 1.5).
#
# bcc compiles its programs against the running kernel's headers; on a
# kernel without them set BCC_KERNEL_SOURCE to the closest headers (the
# numbers are then indicative: offcputime reads task_struct fields at the
# headers' offsets). A peer that cannot run is reported as such.
#
# Run as root from a build directory:
#   ../bench/bpf-stacks.sh [HZ...]          (default: 99 999)
# Environment: DURATION (default 10, at least 5), ROUNDS (default 3),
#              PIPE_LOOPS (default 2000000), WHAT (default "on off unwind
#              crowd python": which of the on-CPU, off-CPU, unwinding,
#              crowd and CPython runs to make), SLEEPERS (100), BUILD_JOBS (2).
# Not part of make check.
set -eu

build=$(pwd)
# shellcheck source=bench/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
rates=${*:-99 999}
what=${WHAT:-on off unwind crowd python}
src=$(cd "$(dirname "$0")/.." && pwd)
# The peers for on, off and unwind; the crowd needs a compiler.
tools="python3"
case " $what " in *" on "* | *" off "* | *" unwind "*) tools="$tools bpftool bpftrace perf" ;; esac
case " $what " in *" crowd "*) tools="$tools cc" ;; esac
case " $what " in *" python "*) tools="$tools bpftool" ;; esac
for t in $tools; do
        command -v $t >/dev/null || { echo "needs $t (Debian: bpftool bpftrace python3 linux-perf gcc)" >&2; exit 2; }
done
profile=$(command -v profile-bpfcc || true)
offcputime=$(command -v offcputime-bpfcc || true)
duration=${DURATION:-10}
[ "$duration" -ge 5 ] || { echo "DURATION must be at least 5 (seconds)" >&2; exit 2; }
rounds=${ROUNDS:-3}
pipe_loops=${PIPE_LOOPS:-2000000}
work=$(mktemp -d /tmp/traced-bpf-bench-XXXXXX)
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
trap 'spawn_stop; sysctl -q -w kernel.bpf_stats_enabled="$old_stats"; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
sysctl -q -w kernel.bpf_stats_enabled=1

# The workloads: NAME_start starts one (its pids in workload_pids),
# workload_wait waits for it to end, NAME does both.
workload_pids=""
workload_wait() {
        for w in $workload_pids; do
                spawn_wait "$w" || true
        done
        workload_pids=""
}

busy_start() { # two busy python3 processes for $duration seconds
        spawn timeout "$duration" python3 -c 'while True: sum(range(1000))'
        workload_pids=$spawned_pid
        spawn timeout "$duration" python3 -c 'while True: sorted(range(500), key=lambda x: -x)'
        workload_pids="$workload_pids $spawned_pid"
}

pipes_start() { # the off-CPU workload: until done, at most $duration seconds
        spawn timeout "$duration" perf bench sched pipe -l "$pipe_loops" >/dev/null 2>&1
        workload_pids=$spawned_pid
}

busy() {
        busy_start
        workload_wait
}

py_samples() { # "samples lost" of the last recording, from tracectl report
        "$build/tracectl" report "$work/t.pftrace" 2>/dev/null | awk '
                /^# Samples:/ { n = $3 } /^# Lost:/ { l = $3 } END { print n + 0, l + 0 }'
}

pyframes_start() { # two python3 running pyframes-busy.py, one with two threads, for $duration seconds
        spawn timeout "$duration" python3 "$src/tests/data/pyframes-busy.py"
        workload_pids=$spawned_pid
        spawn timeout "$duration" python3 "$src/tests/data/pyframes-busy.py" -1 threads
        workload_pids="$workload_pids $spawned_pid"
}

pipes() {
        pipes_start
        workload_wait
}

# Debian's bpftool does not say which process holds a program, so a tool's
# programs are those loaded since it started ($work/before lists the ids
# there were) whose names are in $names: linux.bpf_stack's on_cpu and
# switch_btf/switch_raw, bpftrace's profile probe (named after its rate),
# bcc profile's do_perf_event, bcc offcputime's oncpu, and bpftrace's
# sched_switch tracepoint program.
programs_before() {
        bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))' >"$work/before"
}

# "run_time_ns run_cnt count" summed over the tool's programs.
bpf_snapshot() {
        bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
before = set(int(x) for x in open(sys.argv[1]).read().split())
names = set(sys.argv[2].split())
t = n = c = 0
for p in json.load(sys.stdin):
    if p["id"] not in before and p.get("name") in names:
        t += p.get("run_time_ns", 0); n += p.get("run_cnt", 0); c += 1
print(t, n, c)' "$work/before" "$names"
}

desc() { # a pid and all its descendants
        echo "$1"
        for c in $(pgrep -P "$1" 2>/dev/null); do desc "$c"; done
}

tree_ns() { # CPU time (ns) of the given processes and their descendants, every thread
        for p in "$@"; do desc "$p"; done | sort -u | while read -r p; do
                cat /proc/"$p"/task/*/schedstat 2>/dev/null
        done | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

cpu_of() { # utime+stime (s) from /usr/bin/time -f "%U %S"
        tail -n 1 "$1" | awk '{ print $1 + $2 }'
}

result() { # "bpf_ns runs progs cpu_s" -> "bpf_ns/run cpu_us/run cpu%"
        echo "$1" | awk -v d="$duration" '{
                if ($2 == 0) { print "failed"; exit }
                c = $4 + $1 / 1e9
                printf "%.0f %.2f %.3f\n", $1 / $2, c * 1e6 / $2, 100 * c / d }'
}

start_traced() {
        rm -f "$work"/*.sock
        spawn /usr/bin/time -f "%U %S" -o "$work/traced.time" env LD_LIBRARY_PATH="$(build_libs)" \
                "$(build_program traced)" --producer-socket="$work/p.sock" --consumer-socket="$work/c.sock" \
                --plugin-dir="$build/plugins/.libs" --plugin-host="$(build_program traced-plugin-host)" \
                --log-level="${traced_log_level:-warning}" 2>"$work/traced.log"
        tpid=$spawned_pid
        for _ in $(seq 100); do
                "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q linux.bpf_stack && break
                sleep 0.1
        done
}

run_traced() { # "config text" workload (busy or pipes) -> result
        names="on_cpu switch_btf switch_raw"
        programs_before
        start_traced
        printf 'buffers { size_kb: 262144 }\ndata_sources { config { name: "linux.bpf_stack" bpf_stack_config { %s } } }\nduration_ms: %s\n' \
                "$1" "$((duration * 1000 + 1000))" >"$work/cfg.pbtxt"
        spawn /usr/bin/time -f "%U %S" -o "$work/tracectl.time" \
                "$build/tracectl" --socket "$work/c.sock" record -c "$work/cfg.pbtxt" --txt --no-summary \
                -o "$work/t.pftrace" >/dev/null 2>&1
        cpid=$spawned_pid
        sleep 0.5
        # Steady state: the CPU of traced's processes and tracectl over the
        # middle of the workload (from 2 s in to 1 s before its end), with
        # start-up and shut-down left out, plus the BPF programs' share.
        "${2}_start"
        sleep 2
        a=$(tree_ns $tpid $cpid)
        ta=$(date +%s%N)
        sleep $((duration - 3))
        b=$(tree_ns $tpid $cpid)
        tb=$(date +%s%N)
        workload_wait
        snap=$(bpf_snapshot | cut -d' ' -f1,2,3)
        echo "$a $b $ta $tb $snap" | awk -v d="$duration" \
                '{ printf "%.3f\n", 100 * ($2 - $1) / ($4 - $3) + 100 * $5 / (d * 1e9) }' >>"$work/steady.rows"
        spawn_wait $cpid || true
        # traced's children (the plugin host) are counted with it.
        pkill -TERM -P $tpid || true
        spawn_wait $tpid || true
        cpu=$(echo "$(cpu_of "$work/traced.time") $(cpu_of "$work/tracectl.time")" | awk '{ print $1 + $2 }')
        result "$snap $cpu"
}

run_peer() { # "command..." "prog names" workload -> result (the command runs until SIGINT)
        cmd=$1
        names=$2
        programs_before
        # A background job of this shell starts with SIGINT ignored, and
        # bcc's Python tools then never see Ctrl-C: give it back first.
        spawn /usr/bin/time -f "%U %S" -o "$work/peer.time" python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp("sh", ["sh", "-c", "exec " + sys.argv[1]])' "$cmd" >"$work/peer.out" 2>&1
        ppid=$spawned_pid
        for _ in $(seq 600); do # attached: its programs are loaded
                [ "$(bpf_snapshot | cut -d' ' -f3)" -gt 0 ] && break
                kill -0 $ppid 2>/dev/null || break
                sleep 0.1
        done
        if ! kill -0 $ppid 2>/dev/null; then
                spawn_wait $ppid || true
                echo "failed"
                return
        fi
        $3
        snap=$(bpf_snapshot)
        kill -INT $(pgrep -P $ppid) $ppid 2>/dev/null || true
        spawn_wait $ppid || true
        result "$snap $(cpu_of "$work/peer.time")"
}

stats() { # column of numbers -> "min median max"
        sort -g | awk '{ v[NR] = $1 } END {
                if (NR == 0) { print "- - -"; exit }
                m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                printf "%s %s %s\n", v[1], m, v[NR] }'
}

table() { # label tools...
        label=$1
        shift
        for tool in "$@"; do
                if grep -q failed "$work/$tool.rows" 2>/dev/null || [ ! -s "$work/$tool.rows" ]; then
                        printf "%-14s %-9s %s\n" "$label" "$tool" "could not run (see its output: $(tail -n 1 "$work/peer.out" 2>/dev/null))"
                        continue
                fi
                b=$(cut -d' ' -f1 "$work/$tool.rows" | stats | tr ' ' /)
                c=$(cut -d' ' -f2 "$work/$tool.rows" | stats | tr ' ' /)
                p=$(cut -d' ' -f3 "$work/$tool.rows" | stats | tr ' ' /)
                printf "%-14s %-9s %-24s %-24s %-24s\n" "$label" "$tool" "$b" "$c" "$p"
        done
        if [ -s "$work/steady.rows" ]; then
                printf "%-14s %-9s steady state, cpu%% of one CPU (min/med/max): %s\n" "$label" traced \
                        "$(stats <"$work/steady.rows" | tr ' ' /)"
                : >"$work/steady.rows"
        fi
        for tool in "$@"; do
                [ "$tool" = traced ] && continue
                grep -q failed "$work/$tool.rows" 2>/dev/null && continue
                [ -s "$work/$tool.rows" ] || continue
                for col in 1 2; do
                        o=$(cut -d' ' -f$col "$work/traced.rows" | stats | cut -d' ' -f2)
                        t=$(cut -d' ' -f$col "$work/$tool.rows" | stats | cut -d' ' -f2)
                        echo "$o $t" | awk -v l="$label" -v tool="$tool" -v col=$col '{ if ($2 > 0)
                                printf "%-14s traced / %s, %s (medians): %.3f\n", l, tool,
                                        col == 1 ? "BPF ns per run" : "CPU per run", $1 / $2 }'
                done
        done
}

echo "$(nproc) CPUs, ${duration}s per run, $rounds rounds; kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
all_rates=$rates
case " $what " in
*" on "*)
        printf "%-14s %-9s %-24s %-24s %-24s\n" run tool "bpf_ns/run min/med/max" "cpu_us/run min/med/max" \
                "cpu% min/med/max"
        ;;
*) rates="" ;;
esac
for hz in $rates; do
        : >"$work/traced.rows"
        : >"$work/bpftrace.rows"
        : >"$work/bcc.rows"
        r=0
        while [ $r -lt "$rounds" ]; do
                run_traced "frequency: $hz off_cpu: false" busy >>"$work/traced.rows"
                run_peer "bpftrace -e 'profile:hz:$hz { @[kstack, ustack] = count(); }'" "$hz" busy >>"$work/bpftrace.rows"
                if [ -n "$profile" ]; then
                        run_peer "$profile -F $hz" do_perf_event busy >>"$work/bcc.rows"
                fi
                r=$((r + 1))
        done
        table "on-CPU ${hz}Hz" traced bpftrace bcc
done
case " $what " in
*" python "*)
        printf "%-14s %-9s %-24s %-24s %-24s\n" run tool "bpf_ns/run min/med/max" "cpu_us/run min/med/max" \
                "cpu% min/med/max"
        for hz in $all_rates; do
                : >"$work/traced.rows"
                : >"$work/no-py.rows"
                r=0
                : >"$work/traced.samples"
                : >"$work/no-py.samples"
                while [ $r -lt "$rounds" ]; do
                        run_traced "frequency: $hz off_cpu: false" pyframes >>"$work/traced.rows"
                        py_samples >>"$work/traced.samples"
                        run_traced "frequency: $hz off_cpu: false python_frames: false" pyframes >>"$work/no-py.rows"
                        py_samples >>"$work/no-py.samples"
                        r=$((r + 1))
                done
                table "python ${hz}Hz" traced no-py
                for tool in traced no-py; do
                        printf "%-14s %-9s samples kept, records lost in the ring (min/med/max): %s, %s\n" \
                                "python ${hz}Hz" $tool "$(cut -d' ' -f1 "$work/$tool.samples" | stats | tr ' ' /)" \
                                "$(cut -d' ' -f2 "$work/$tool.samples" | stats | tr ' ' /)"
                done
        done
        ;;
esac
unwind_runs() {
        [ -x "$build/tracectl" ] || return 0
        # Each tool's stacks, parsed: "share_to_main_or_start median_frames samples".
        cat >"$work/stacks.py" <<'PY'
import sys
kind, path = sys.argv[1], sys.argv[2]
stacks = []  # (frames, count), leaf first
def reaches(fr):
    return any(f == "main" or f == "_start" for f in fr)
if kind == "folded":  # comm;root;...;leaf count
    for line in open(path, errors="replace"):
        body, _, n = line.rstrip("\n").rpartition(" ")
        if body:
            stacks.append((body.split(";")[1:][::-1], int(n)))
elif kind == "bpftrace":  # @[\n  frame+off\n ...\n]: count
    cur = None
    for line in open(path, errors="replace"):
        t = line.strip()
        if t.startswith("@["):
            cur = []
        elif t.startswith("]:") and cur is not None:
            stacks.append((cur, int(t[2:])))
            cur = None
        elif cur is not None and t:
            cur.append(t.split("+")[0])
else:  # perf script -F ip,sym: frames "addr sym+off", samples apart by blank lines
    cur = []
    for line in open(path, errors="replace"):
        t = line.split()
        if not t:
            if cur:
                stacks.append((cur, 1))
            cur = []
        elif len(t) >= 2:
            cur.append(t[1].split("+")[0])
    if cur:
        stacks.append((cur, 1))
total = sum(n for _, n in stacks)
if total == 0:
    print("0 0 0")
    sys.exit()
good = sum(n for fr, n in stacks if reaches(fr))
depths = sorted((len(fr), n) for fr, n in stacks)
acc, median = 0, 0
for d, n in depths:
    acc += n
    if 2 * acc >= total:
        median = d
        break
print("%.1f %d %d" % (100.0 * good / total, median, total))
PY
        traced_log_level=info
        for hz in $all_rates; do
                for tool in traced traced-fp bpftrace perf; do : >"$work/u-$tool.rows"; done
                r=0
                while [ $r -lt "$rounds" ]; do
                        for tool in traced traced-fp bpftrace perf; do
                                unwind_one "$tool" "$hz" >>"$work/u-$tool.rows"
                        done
                        r=$((r + 1))
                done
                for tool in traced traced-fp bpftrace perf; do
                        printf "%-14s %-9s" "unwind ${hz}Hz" "$tool"
                        for col in 1 2 3 4 5 6 7; do
                                printf " %-20s" "$(cut -d' ' -f$col "$work/u-$tool.rows" | grep -v '^-$' | stats | tr ' ' /)"
                        done
                        echo
                done
                for tool in traced-fp bpftrace; do
                        o=$(cut -d' ' -f3 "$work/u-traced.rows" | stats | cut -d' ' -f2)
                        t=$(cut -d' ' -f3 "$work/u-$tool.rows" | stats | cut -d' ' -f2)
                        echo "$o $t" | awk -v l="unwind ${hz}Hz" -v tool="$tool" '{ if ($2 > 0)
                                printf "%-14s traced / %s, BPF ns per sample (medians): %.3f\n", l, tool, $1 / $2 }'
                done
        done
}

# The steady state of a recording: CPU of the processes $* and their
# descendants plus the BPF run time of the tool's programs ($names) from
# 2 s into the run to 1 s before its end. Prints "cpu% bpf_ns/sample".
steady() {
        sleep 2
        a=$(tree_ns "$@")
        s1=$(bpf_snapshot)
        ta=$(date +%s%N)
        sleep $((duration - 3))
        b=$(tree_ns "$@")
        s2=$(bpf_snapshot)
        tb=$(date +%s%N)
        echo "$a $b $ta $tb $s1 $s2" | awk '{
                bpf = $8 - $5; runs = $9 - $6; per = "-"
                if (runs > 0) per = sprintf("%.0f", bpf / runs)
                printf "%.3f %s\n", 100 * ($2 - $1 + bpf) / ($4 - $3), per }'
}

# One run: "share% median_frames bpf_ns/sample cpu% memory_kib memlock_kib post_cpu_s" ("-" where it
# does not apply); cpu% is the steady state.
unwind_one() {
        tool=$1
        hz=$2
        spawn python3 -c 'import sys, time
end = time.time() + float(sys.argv[1])
def f(n): return sum(range(n))
while time.time() < end: f(1000)' $((duration + 3))
        py=$spawned_pid
        sleep 0.5
        case $tool in
        traced | traced-fp)
                mode=DWARF_TABLES
                [ "$tool" = traced-fp ] && mode=FRAME_POINTER
                names="on_cpu"
                programs_before
                start_traced
                printf 'buffers { size_kb: 65536 }\ndata_sources { config { name: "linux.bpf_stack" bpf_stack_config { frequency: %s off_cpu: false kernel_frames: false user_unwind: %s filter: "pid=%s" } } }\nduration_ms: %s\n' \
                        "$hz" "$mode" "$py" "$((duration * 1000))" >"$work/cfg.pbtxt"
                spawn "$build/tracectl" --socket "$work/c.sock" record -c "$work/cfg.pbtxt" --txt --no-summary \
                        -o "$work/u.pftrace" >/dev/null 2>&1
                cpid=$spawned_pid
                st=$(steady $tpid $cpid)
                memlock=$(bpftool map show --json 2>/dev/null | python3 -c '
import json, sys
print(sum(m.get("bytes_memlock", 0) for m in json.load(sys.stdin)
          if m.get("name") in ("unwind_rows", "unwind_procs", "out_ustack")) // 1024)')
                spawn_wait $cpid || true
                pkill -TERM -P $tpid || true
                spawn_wait $tpid || true
                kill $py 2>/dev/null || true
                spawn_wait $py 2>/dev/null || true
                "$build/tracectl" report --folded --user --pid "$py" "$work/u.pftrace" >"$work/u.folded" 2>/dev/null || true
                set -- $(python3 "$work/stacks.py" folded "$work/u.folded")
                tables=$(sed -n 's/.*rows (\([0-9]*\) KiB).*/\1/p' "$work/traced.log" | tail -n 1)
                echo "$1 $2 $st ${tables:-0} $memlock" | awk '{ printf "%s %s %s %s %s %s -\n", $1, $2, $4, $3, $5, $6 }'
                ;;
        bpftrace)
                names="$hz"
                programs_before
                spawn python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp("sh", ["sh", "-c", "exec " + sys.argv[1]])' "bpftrace -e 'profile:hz:$hz /pid == $py/ { @[ustack] = count(); }'" \
                        >"$work/peer.out" 2>&1
                bt=$spawned_pid
                for _ in $(seq 600); do # attached: its programs are loaded
                        [ "$(bpf_snapshot | cut -d' ' -f3)" -gt 0 ] && break
                        sleep 0.1
                done
                st=$(steady $bt)
                kill -INT $(pgrep -P $bt) $bt 2>/dev/null || true
                spawn_wait $bt || true
                kill $py 2>/dev/null || true
                spawn_wait $py 2>/dev/null || true
                set -- $(python3 "$work/stacks.py" bpftrace "$work/peer.out")
                echo "$1 $2 $st" | awk '{ printf "%s %s %s %s - - -\n", $1, $2, $4, $3 }'
                ;;
        perf)
                names=none
                programs_before
                spawn perf record -q -F "$hz" --call-graph dwarf -p "$py" -o "$work/perf.data" -- sleep "$duration" \
                        >/dev/null 2>&1
                pp=$spawned_pid
                st=$(steady $pp)
                spawn_wait $pp || true
                kill $py 2>/dev/null || true
                spawn_wait $py 2>/dev/null || true
                /usr/bin/time -f "%U %S" -o "$work/script.time" perf script -F ip,sym -i "$work/perf.data" \
                        >"$work/perf.txt" 2>/dev/null || true
                set -- $(python3 "$work/stacks.py" perf "$work/perf.txt")
                size=$(($(stat -c %s "$work/perf.data") / 1024))
                echo "$1 $2 $st $size $(cpu_of "$work/script.time")" | awk '{
                        printf "%s %s - %s %s - %.2f\n", $1, $2, $3, $5, $6 }'
                ;;
        esac
}

case " $what " in *" unwind "*)
        echo
        printf "%-14s %-9s %-20s %-20s %-20s %-20s %-20s %-20s %-20s\n" run tool "to main/_start %" "median frames" \
                "bpf_ns/sample" "cpu% steady" "tables|perf.data KiB" "BPF maps KiB" "post-processing s"
        unwind_runs
        ;;
esac
# One recording among the crowd: "wall first_s_% main_% compile_ms compiled cached".
crowd_one() {
        [ "$1" = cached ] || rm -rf "$work/cache/bpfstack-unwind"
        mkdir -p "$work/cache"
        spawn python3 -c 'def f(n): return sum(range(n))
while True: f(1000)'
        py=$spawned_pid
        sleep 0.5
        TRACED_BENCH_LOG_LEVEL=info traced_start linux.bpf_stack env CACHE_DIRECTORY="$work/cache"
        # --bpf-stacks records linux.process_stats too: its plugin host
        # registered as well, or the wall time includes waiting for it.
        for _ in $(seq 100); do
                "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q linux.process_stats && break
                sleep 0.1
        done
        t0=$(date +%s%N)
        "$build/tracectl" --socket "$work/c.sock" record -t "${duration}s" --bpf-stacks -o "$work/crowd.pftrace" \
                >"$work/crowd.out" 2>&1 || echo "tracectl record failed: $(tail -n 3 "$work/crowd.out")" >&2
        t1=$(date +%s%N)
        spawn_stop "$tpid" "$py"
        share() { # folded stacks on stdin -> share reaching main or _start, %
                awk '{ n = $NF; t += n; if ($0 ~ /(^|;)(main|_start)(;| )/) g += n }
                     END { printf "%.1f\n", t ? 100 * g / t : 0 }'
        }
        first=$("$build/tracectl" report --folded --user --on-cpu --pid "$py" --until 1 "$work/crowd.pftrace" 2>/dev/null | share)
        all=$("$build/tracectl" report --folded --user --on-cpu --pid "$py" "$work/crowd.pftrace" 2>/dev/null | share)
        line=$(grep -o '[0-9]* files compiled in [0-9]* ms.* read from the cache' "$work/traced.log" | tail -n 1)
        echo "$t0 $t1 $first $all $line" | awk '{ printf "%.3f %s %s %s %s %s\n", ($2 - $1) / 1e9, $3, $4, $9, $5, $18 }'
}

crowd_runs() {
        src=$(cd "$(dirname "$0")/.." && pwd)
        crowd=""
        j=0
        while [ $j -lt "${BUILD_JOBS:-2}" ]; do
                spawn sh -c 'while :; do for f in "$1"/lib/basic/*.c "$1"/lib/profiling/*.c "$1"/lib/pbtxt/*.c; do
                        cc -O2 -D_GNU_SOURCE -I"$1" -I"$1/lib" -c -o "$2" "$f" 2>/dev/null; done; done' sh "$src" \
                        "$work/build$j.o"
                crowd="$crowd $spawned_pid"
                j=$((j + 1))
        done
        j=0
        while [ $j -lt "${SLEEPERS:-100}" ]; do
                spawn sh -c 'while :; do sleep 0.5; done'
                crowd="$crowd $spawned_pid"
                j=$((j + 1))
        done
        : >"$work/crowd-uncached.rows"
        : >"$work/crowd-cached.rows"
        r=0
        while [ $r -lt "$rounds" ]; do
                crowd_one uncached >>"$work/crowd-uncached.rows"
                crowd_one cached >>"$work/crowd-cached.rows"
                r=$((r + 1))
        done
        # shellcheck disable=SC2086
        spawn_stop $crowd
        for kind in uncached cached; do
                printf "%-14s %-9s" "crowd 99Hz" "$kind"
                for col in 1 2 3 4 5 6; do
                        printf " %-20s" "$(cut -d' ' -f$col "$work/crowd-$kind.rows" | stats | tr ' ' /)"
                done
                echo
        done
        paste -d' ' "$work/crowd-uncached.rows" "$work/crowd-cached.rows" | awk '{ if ($4 > 0) printf "%.1f\n", 100 * $10 / $4 }' |
                stats | awk '{ printf "%-14s cached compile time / uncached, same round (min/med/max): %s%% / %s%% / %s%%\n",
                        "crowd 99Hz", $1, $2, $3 }'
}

case " $what " in *" crowd "*)
        echo
        echo "system-wide, ${SLEEPERS:-100} sleepers, ${BUILD_JOBS:-2} compile loops and a busy python3 beside:"
        printf "%-14s %-9s %-20s %-20s %-20s %-20s %-20s %-20s\n" run cache "wall s" "python3 1st s %" \
                "python3 main %" "compile ms" "files compiled" "files from cache"
        crowd_runs
        ;;
esac
case " $what " in *" off "*) ;; *) exit 0 ;; esac
cat >"$work/offcpu.bt" <<'BT'
tracepoint:sched:sched_switch
{
        @start[args->prev_pid] = nsecs;
        @kst[args->prev_pid] = kstack;
        @ust[args->prev_pid] = ustack;
        $s = @start[args->next_pid];
        if ($s) {
                @off[@kst[args->next_pid], @ust[args->next_pid], args->next_comm] = sum(nsecs - $s);
                delete(@start[args->next_pid]);
        }
}
END
{
        clear(@start);
        clear(@kst);
        clear(@ust);
}
BT
: >"$work/traced.rows"
: >"$work/bcc.rows"
: >"$work/bpftrace.rows"
r=0
while [ $r -lt "$rounds" ]; do
        run_traced "on_cpu: false off_cpu: true" pipes >>"$work/traced.rows"
        run_peer "bpftrace $work/offcpu.bt" sched_switch pipes >>"$work/bpftrace.rows"
        if [ -n "$offcputime" ]; then
                run_peer "$offcputime" oncpu pipes >>"$work/bcc.rows"
        fi
        r=$((r + 1))
done
table "off-CPU pipe" traced bpftrace bcc
