# Helpers the benchmark scripts share (sourced, not run).

# utime and stime (clock ticks) of the given pids, summed, from /proc; pids
# that are gone count nothing.
ticks_of_pids() {
        local p
        for p in "$@"; do
                cat "/proc/$p/stat" 2>/dev/null || true
        done | awk '{ sub(/.*\) /, ""); u += $12; s += $13 } END { printf "%d %d\n", u, s }'
}

# Nanoseconds on a CPU of the given pids, all their threads, from
# /proc/PID/task/TID/schedstat (finer than the clock ticks of
# /proc/PID/stat, which round a 100 ms producer to 10 %); pids that are
# gone count nothing. Ticks (as ticks_of_pids, times 10^9 / CLK_TCK) where
# the kernel keeps no schedstat.
ns_of_pids() {
        local p hz
        if [ -r /proc/self/schedstat ]; then
                for p in "$@"; do
                        cat /proc/"$p"/task/*/schedstat 2>/dev/null || true
                done | awk '{ s += $1 } END { printf "%.0f\n", s }'
        else
                hz=$(getconf CLK_TCK)
                ticks_of_pids "$@" | awk -v hz="$hz" '{ printf "%.0f\n", ($1 + $2) * 1e9 / hz }'
        fi
}

# CPU seconds (utime + stime) of the given pids, from /proc; pids that are
# gone count nothing.
cpu_of_pids() {
        echo "$(ticks_of_pids "$@") $(getconf CLK_TCK)" | awk '{ printf "%.3f\n", ($1 + $2) / $3 }'
}

# Before a run: the page cache written back and dropped, so that no run
# pays for the writeback of the one before it.
drop_caches() {
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# A column of numbers on stdin -> "min/median/max".
stats() {
        sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                             printf "%s/%s/%s\n", v[1], m, v[NR] }'
}

# ---- processes -----------------------------------------------------------
#
# A benchmark starts what runs in the background with spawn, so that no
# way out of it leaves anything running: each spawned command leads a
# session and process group of its own (setsid; a background job of a
# shell without job control leads no group, so setsid runs the command in
# place and $! is its pid), and stopping that group reaches what the
# command started in turn (traced's core and plugin hosts, the program
# under time(1) or timeout(1)). The script ends with
#     trap 'spawn_stop; ...' EXIT
#     trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM
# (sh runs the EXIT trap on exit, not when a signal kills it), and waits
# for what it spawned with spawn_wait, not wait.

spawned=""     # the spawned commands not reaped yet
spawned_pid="" # the last one

# spawn COMMAND...: runs it in the background, in a group of its own, with
# the caller's redirections (spawn cmd >log 2>&1); its pid in spawned_pid.
spawn() {
        setsid "$@" &
        spawned_pid=$!
        spawned="$spawned $spawned_pid"
}

spawn_forget() {
        local p rest=""
        for p in $spawned; do
                [ "$p" = "$1" ] || rest="$rest $p"
        done
        spawned=$rest
}

# spawn_wait PID: waits for a spawned command and returns its exit status;
# whatever of its group outlived it is stopped.
spawn_wait() {
        local st=0
        wait "$1" || st=$?
        spawn_forget "$1"
        kill -TERM -"$1" 2>/dev/null || true
        return "$st"
}

# groups_alive PGID...: whether a process of these groups still runs (a
# zombie only waits to be reaped).
groups_alive() {
        ps -e -o pgid=,stat= | awk -v l=" $* " '$2 !~ /^Z/ && index(l, " " $1 " ") { f = 1 } END { exit !f }'
}

# spawn_stop [PID...]: stops the groups of these spawned commands (all of
# them by default): SIGTERM, SIGKILL to what is left after 5 s; reaps them.
spawn_stop() {
        local p i=0
        # shellcheck disable=SC2086
        [ $# -gt 0 ] || set -- $spawned
        [ $# -gt 0 ] || return 0
        for p in "$@"; do
                kill -TERM -"$p" 2>/dev/null || true
        done
        while [ "$i" -lt 50 ] && groups_alive "$@"; do
                sleep 0.1
                i=$((i + 1))
        done
        for p in "$@"; do
                kill -KILL -"$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
                spawn_forget "$p"
        done
}

# build_program NAME: the path of the build's program NAME as it runs
# once installed. In the build tree a program linked with one of the
# build's shared libraries (traced, traced-plugin-host) is libtool's
# wrapper script, which runs a shell, sed and ls before it execs the
# program in .libs: about 0.1 s of CPU at each start here, that time(1)
# around traced would count as traced's, once for it and once more for
# each plugin host it starts. The program in .libs finds the build's
# libraries through LD_LIBRARY_PATH (build_libs).
# shellcheck disable=SC2154 # $build is the caller's
build_program() {
        if [ -x "$build/.libs/$1" ] && [ "$(head -c 2 "$build/$1")" = "#!" ]; then
                echo "$build/.libs/$1"
        else
                echo "$build/$1"
        fi
}

# build_libs: LD_LIBRARY_PATH with the build's libraries first.
build_libs() {
        echo "$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# traced_start DATA_SOURCE [WRAPPER...]: spawns this build's traced ($build)
# with its sockets and log in $work, after the wrapper command if any
# (/usr/bin/time ..., env VAR=...); its pid in tpid. Waits up to 10 s for
# the data source to be registered. TRACED_BENCH_LOG_LEVEL: its
# --log-level (warning).
# shellcheck disable=SC2154 # $work and $build are the caller's
# TRACED_BENCH_ARGS: more traced options (words split on blanks).
# service_pids PLUGIN: once a session runs (with hosts=lazy its plugin
# host starts for it), $core holds traced's pid ($tpid) and the service
# core's (a child of it), $host the pid of the host of PLUGIN (ftrace.so).
# The core's command line names the plugin host too (--plugin-host=):
# they are told apart by executable.
service_pids() {
        local p
        core=$tpid
        host=""
        for p in $(pgrep -P "$tpid"); do
                case $(readlink "/proc/$p/exe") in
                */traced-plugin-host)
                        tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "$1" && host=$p ;;
                *) core="$core $p" ;;
                esac
        done
        [ "$core" != "$tpid" ] || { echo "no service core under traced ($tpid)" >&2; exit 1; }
        [ -n "$host" ] || { echo "no plugin host runs $1" >&2; cat "$work/traced.log" >&2; exit 1; }
}

traced_start() {
        local ds=$1
        shift
        rm -f "$work"/*.sock
        # shellcheck disable=SC2086 # TRACED_BENCH_ARGS: words
        spawn "$@" env LD_LIBRARY_PATH="$(build_libs)" "$(build_program traced)" \
                --producer-socket="$work/p.sock" --consumer-socket="$work/c.sock" \
                --plugin-dir="$build/plugins/.libs" --plugin-host="$(build_program traced-plugin-host)" \
                --log-level="${TRACED_BENCH_LOG_LEVEL:-warning}" ${TRACED_BENCH_ARGS:-} 2>"$work/traced.log"
        tpid=$spawned_pid
        for _ in $(seq 100); do
                "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q "$ds" && break
                sleep 0.1
        done
}

# ---- a profile to report on --------------------------------------------
#
# perf_workload_script OUT DURATION FREQ FILE: samples, system-wide with
# callchains (perf record -a -g), a workload with deep kernel and user
# stacks (perf bench sched messaging, and gzip -9 over FILE) for DURATION
# seconds at FREQ Hz; OUT.data is the perf.data, OUT.txt its `perf script`
# in the fields bench/perf-script-to-trace.py reads.
perf_workload_script() {
        echo "== recording $2 s at $3 Hz (perf record -a -g)" >&2
        spawn perf bench sched messaging -t -g 2 -l 100000000 >/dev/null 2>&1
        spawn sh -c 'while :; do gzip -9 <"$1" >/dev/null; done' sh "$4"
        perf record -q -F "$3" -a -g -o "$1.data" -- sleep "$2" 2>/dev/null
        spawn_stop
        perf script -i "$1.data" -F comm,pid,tid,cpu,time,ip,sym,dso >"$1.txt" 2>/dev/null
}

# ---- load beside a measurement -----------------------------------------
#
# load_start KIND: work on every CPU but one, in the background, niced, its
# pids added to load_pids (the caller kills them when done): KIND compile
# is a compile's churn (a new cc1 and as for every file: every C file of
# lib/ and plugins/ over and over with gcc -O2), 1 busy loops, 0 nothing.
# shellcheck disable=SC2154 # $build is the caller's
load_start() {
        local src n
        src=$(cd "$(dirname "$0")/.." && pwd)
        n=$(($(nproc) > 1 ? $(nproc) - 1 : 1))
        case $1 in
        compile)
                for _ in $(seq "$n"); do
                        nice -n 19 sh -c 'while :; do for f in "$1"/lib/*/*.c "$1"/plugins/*/*.c; do
                                gcc -O2 -w -I"$2" -I"$1/lib" -I"$1/include" -I"$2/include" -I"$2/protos" \
                                        -I"$1/plugins" -I"$(dirname "$f")" -c "$f" -o /dev/null 2>/dev/null || :
                                done; done' sh "$src" "$build" &
                        load_pids="${load_pids:-} $!"
                done ;;
        1)
                for _ in $(seq "$n"); do
                        nice -n 19 sh -c 'while :; do :; done' &
                        load_pids="${load_pids:-} $!"
                done ;;
        esac
}

# ---- the steady state of a recording -----------------------------------
#
# A whole recording's CPU counts its start (the plugin host's start, its
# BPF program's load, tracectl's start) with its samples: on a machine
# where starting processes is dear that fixed part can outweigh what each
# sample costs. These read the CPU of process trees between two moments
# of a recording, for the samples taken between them.

# tree_pids PID...: these processes and all their descendants.
tree_pids() {
        ps -e -o pid=,ppid= | awk -v roots=" $* " '
                { parent[$1] = $2 }
                END {
                        for (p in parent)
                                for (q = p; q != "" && q != 0; q = parent[q])
                                        if (index(roots, " " q " ")) { print p; break }
                }'
}

# tree_read PID...: "BOOTTIME_S CPU_NS BPF_NS" now, for these processes and
# their descendants: the CPU time of each (/proc/PID/stat: its threads',
# the exited ones' too, and its children's that it reaped, so that what
# ends between two reads still counts; in clock ticks) and the run time of
# the BPF programs they hold (fdinfo's run_time_ns, counted with
# kernel.bpf_stats_enabled on), run in whatever thread the program's event
# fired in.
tree_read() {
        local p ticks=0 bpf=0 up
        up=$(cut -d' ' -f1 /proc/uptime)
        for p in $(tree_pids "$@"); do
                ticks=$(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null |
                        awk -v s="$ticks" '{ s += $12 + $13 + $14 + $15 } END { printf "%.0f", s }')
                bpf=$(grep -h '^run_time_ns:' /proc/"$p"/fdinfo/* 2>/dev/null |
                        awk -v s="$bpf" '{ s += $2 } END { printf "%.0f", s }')
        done
        echo "$up $ticks $(getconf CLK_TCK) $bpf" | awk '{ printf "%s %.0f %s\n", $1, $2 * 1e9 / $3, $4 }'
}

# plugin_host_read ROOT PLUGIN: "CPU_NS BPF_NS" of the plugin host under
# ROOT whose command line names PLUGIN (perf.so): its CPU time over its
# whole life so far (its threads', the exited ones' too, and its reaped
# children's) and the run time of the BPF programs it holds; "-" when no
# such host runs.
plugin_host_read() {
        local p ticks bpf
        for p in $(tree_pids "$1"); do
                case $(readlink "/proc/$p/exe" 2>/dev/null) in
                */traced-plugin-host) ;;
                *) continue ;;
                esac
                tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$2" || continue
                ticks=$(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 + $14 + $15 }')
                bpf=$(grep -h '^run_time_ns:' /proc/"$p"/fdinfo/* 2>/dev/null | awk '{ s += $2 } END { printf "%.0f", s }')
                echo "$ticks $(getconf CLK_TCK) $bpf" | awk '{ printf "%.0f %s\n", $1 * 1e9 / $2, $3 }'
                return
        done
        echo -
}

# tree_window FROM TO OUT PID...: (to be spawned) reads the trees at FROM
# and at TO seconds from now, and writes both reads to OUT.
tree_window() {
        local from=$1 to=$2 out=$3
        shift 3
        sleep "$from"
        tree_read "$@" >"$out.tmp"
        sleep "$((to - from))"
        tree_read "$@" >>"$out.tmp"
        mv "$out.tmp" "$out"
}

# window_us_per_sample WINDOW TRACE: CPU (threads and BPF) per perf sample
# of TRACE timestamped inside the window tree_window wrote (the trace's
# timestamps are the boot clock /proc/uptime reads); "-" without one.
window_us_per_sample() {
        [ -s "$1" ] || { echo -; return; }
        "$build/tracectl" print "$2" 2>/dev/null | awk -v w="$1" '
                BEGIN {
                        getline l <w; split(l, a, " ")
                        getline l <w; split(l, b, " ")
                        from = a[1] * 1e9; to = b[1] * 1e9
                        cost = (b[2] - a[2]) + (b[3] - a[3])
                }
                / perf_sample: / {
                        ts = $2; sub(/^ts=/, "", ts)
                        if (ts + 0 >= from && ts + 0 < to) n++
                }
                END { if (n) printf "%.2f\n", cost / 1e3 / n; else print "-" }'
}
