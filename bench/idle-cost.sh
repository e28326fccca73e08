#!/bin/bash
# What an always-on recording costs a machine: a flight-recorder config
# (sched_switch and sched_waking in compact form, the process tree polled,
# sys_stats each second, a ring buffer) recorded in the background, with
# no consumer attached, by this build's traced and plugins and by
# upstream's traced + traced_probes (a detached `perfetto` session), in
# the same rounds (each round reverses the order of the one before). Per
# run, over SECONDS once the session runs: CPU time of every process of
# the service (/proc/PID/task/*/schedstat), context switches per second
# (voluntary and not, every thread), and at the end RSS and PSS summed
# over the processes (smaps_rollup). Then min/median/max per side over the
# rounds, and ours/upstream round by round. Issue #49 asks for CPU at most
# 0.5x upstream's, and switches, RSS and PSS at most upstream's, on an
# idle machine and with a compile beside (LOAD=compile compiles the tree's
# C files over and over with `nice -n 19 gcc`, a process per file as a
# build has, on every CPU but one; LOAD=1 runs busy loops there instead).
# Run as root from a build directory:
#   PERFETTO_BIN_DIR=/path/to/upstream/bin ../bench/idle-cost.sh [ROUNDS] [SECONDS]
# (default 3 rounds of 60 s). Without PERFETTO_BIN_DIR only ours is
# measured. PERPROC=1 also prints each process's share (pid, name, CPU ms
# per minute, switches per second, RSS and PSS KiB), measured just after
# the totals. HOSTS="eager lazy" measures ours once per plugin host mode
# in each round (sides ours-eager and ours-lazy, --plugin-hosts=), HOSTS=lazy
# one (default: traced.conf's, else lazy). Ours records the config as a
# resident session (--sessions-dir), which is how the shipped flight
# recorder runs; OURS_AS=detached records it with `tracectl record --detach
# -o FILE` instead, which also streams the buffer into the file every
# second (write_into_file). CONFIG=FILE measures that config (text format,
# upstream's fields only) instead of the built-in one, e.g.
# CONFIG=../sessions.d/flight-recorder.cfg, the shipped flight recorder.
# Not part of make check.
set -eu

build=$(pwd)
# shellcheck source=bench/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
[ -x "$build/traced" ] && [ -x "$build/tracectl" ] || { echo "run from the build directory" >&2; exit 2; }
rounds=${1:-3}
seconds=${2:-60}
BIN=${PERFETTO_BIN_DIR:-}
upstream=false
if [ -n "$BIN" ] && [ -x "$BIN/traced" ] && [ -x "$BIN/traced_probes" ] && [ -x "$BIN/perfetto" ]; then
        upstream=true
elif [ -n "$BIN" ]; then
        echo "PERFETTO_BIN_DIR names no upstream traced, traced_probes and perfetto: upstream is not measured" >&2
fi
# As installed, traced finds its users (traced, traced-plugin) in
# /etc/passwd. Without them each name lookup falls through to the next NSS
# module (libnss_systemd here), which then stays loaded in the supervisor:
# about 0.6 MB more RSS and PSS than a real install has.
for u in traced traced-plugin; do
        getent passwd "$u" >/dev/null ||
                echo "no user $u: the README's setup adds it (systemd-sysusers units/sysusers.d/traced.conf); without it ours carries NSS modules an install does not" >&2
done
work=$(mktemp -d /tmp/traced-bench-XXXXXX)
chmod 0755 "$work"
load_pids=""
cleanup() {
        [ -z "$load_pids" ] || kill $load_pids 2>/dev/null || true
        spawn_stop
        rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

# Upstream's names and fields only: both services take it unchanged.
# CONFIG=FILE records that text config instead (both sides), e.g. the
# shipped ../sessions.d/flight-recorder.cfg, which is what issue #49 asks
# to measure.
if [ -n "${CONFIG:-}" ]; then
        [ -r "$CONFIG" ] || { echo "CONFIG=$CONFIG: no such file" >&2; exit 2; }
        { cat "$CONFIG"; echo; echo 'unique_session_name: "idle_cost"'; } >"$work/flight.cfg"
else
cat >"$work/flight.cfg" <<'EOF'
buffers { size_kb: 65536 fill_policy: RING_BUFFER }
data_sources { config { name: "linux.ftrace" ftrace_config {
  ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking"
  ftrace_events: "sched/sched_process_exit" ftrace_events: "task/task_newtask" ftrace_events: "task/task_rename"
  compact_sched { enabled: true } } } }
data_sources { config { name: "linux.process_stats" process_stats_config {
  scan_all_processes_on_start: true proc_stats_poll_ms: 1000 } } }
data_sources { config { name: "linux.sys_stats" sys_stats_config {
  meminfo_period_ms: 1000 vmstat_period_ms: 1000 stat_period_ms: 1000 stat_counters: STAT_CPU_TIMES } } }
duration_ms: 3600000
unique_session_name: "idle_cost"
EOF
fi

# The pids of the process trees under these pids.
tree() {
        local p
        for p in "$@"; do
                echo "$p"
                # shellcheck disable=SC2046
                [ -r "/proc/$p/task/$p/children" ] && tree $(cat "/proc/$p/task/$p/children")
        done
}

switches_of_pids() {
        local p
        for p in "$@"; do
                cat /proc/"$p"/task/*/status 2>/dev/null || true
        done | awk '/^(voluntary|nonvoluntary)_ctxt_switches/ { s += $2 } END { printf "%d\n", s }'
}

memory_of_pids() { # -> "RSS_KiB PSS_KiB"
        local p
        for p in "$@"; do
                cat "/proc/$p/smaps_rollup" 2>/dev/null || true
        done | awk '/^Rss:/ { r += $2 } /^Pss:/ { p += $2 } END { printf "%d %d\n", r, p }'
}

# run ROUND SIDE(ours|up): starts the service, the detached session, and
# measures; appends "cpu_ms_per_min switches_per_s rss_kib pss_kib nproc"
# to $work/SIDE.
run() {
        local roots pids cpu0 cpu1 sw0 sw1 mem
        rm -f "$work"/*.sock
        local hosts=
        case $2 in ours-*) hosts=${2#ours-} ;; ours) hosts=${HOSTS:-} ;; esac
        if [ "$2" = up ]; then
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/p.sock" PERFETTO_CONSUMER_SOCK_NAME="$work/c.sock" \
                        "$BIN/traced" >"$work/up-traced.log" 2>&1
                roots=$spawned_pid
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$work/p.sock" "$BIN/traced_probes" >"$work/up-probes.log" 2>&1
                roots="$roots $spawned_pid"
                sleep 2
                env PERFETTO_CONSUMER_SOCK_NAME="$work/c.sock" "$BIN/perfetto" --background --txt \
                        -c "$work/flight.cfg" -o "$work/up.pftrace" >"$work/up-cli.log" 2>&1 ||
                        { cat "$work/up-cli.log" >&2; exit 1; }
                # The detached CLI waits to write the file at the end: it
                # is the consumer's, not the service's.
        else
                if [ "${OURS_AS:-resident}" = detached ]; then
                        TRACED_BENCH_ARGS=${hosts:+--plugin-hosts=$hosts} traced_start linux.sys_stats
                        roots=$tpid
                        "$build/tracectl" --socket "$work/c.sock" record --txt -c "$work/flight.cfg" --detach idle_cost \
                                -o "$work/ours.pftrace" >"$work/ours-rec.log" 2>&1 || { cat "$work/ours-rec.log" >&2; exit 1; }
                else
                        # As the shipped flight recorder runs: a resident
                        # session, its ring buffer kept in memory as
                        # upstream's detached session keeps its own.
                        rm -rf "$work/sessions"
                        mkdir "$work/sessions"
                        # Named by its file and running until it is removed.
                        grep -v '^duration_ms\|^unique_session_name' "$work/flight.cfg" >"$work/sessions/idle_cost.cfg"
                        TRACED_BENCH_ARGS="${hosts:+--plugin-hosts=$hosts} --sessions-dir=$work/sessions" \
                                traced_start linux.sys_stats
                        roots=$tpid
                        for _ in $(seq 100); do
                                "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q idle_cost && break
                                sleep 0.1
                        done
                        "$build/tracectl" --socket "$work/c.sock" query 2>/dev/null | grep -q idle_cost ||
                                { echo "the resident session idle_cost did not start:" >&2; cat "$work/traced.log" >&2; exit 1; }
                fi
        fi
        # Settled: the start's scan of every process is done.
        sleep 5
        # shellcheck disable=SC2086
        pids=$(tree $roots)
        if [ "${PERPROC:-0}" = 1 ]; then
                for p in $pids; do
                        echo "$p $(ns_of_pids "$p") $(switches_of_pids "$p")"
                done >"$work/perproc0"
        fi
        # shellcheck disable=SC2086
        cpu0=$(ns_of_pids $pids)
        # shellcheck disable=SC2086
        sw0=$(switches_of_pids $pids)
        sleep "$seconds"
        # shellcheck disable=SC2086
        cpu1=$(ns_of_pids $pids)
        # shellcheck disable=SC2086
        sw1=$(switches_of_pids $pids)
        # shellcheck disable=SC2086
        mem=$(memory_of_pids $pids)
        echo "$cpu0 $cpu1 $sw0 $sw1 $mem $(echo $pids | wc -w)" |
                awk -v s="$seconds" '{ printf "%.1f %.2f %d %d %d\n", ($2 - $1) / 1e6 * 60 / s, ($4 - $3) / s, $5, $6, $7 }' \
                        >>"$work/$2"
        printf 'round %d %-4s: %s\n' "$1" "$2" "$(tail -n 1 "$work/$2")" >&2
        if [ "${PERPROC:-0}" = 1 ]; then
                # Each process: CPU ms per minute, switches per second, RSS, PSS.
                while read -r p c0 s0; do
                        printf '  %-7s %-16s %8.1f %7.2f %s\n' "$p" "$(tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null | awk "{ print \$NF }" | sed "s,.*/,," | cut -c1-16)" \
                                "$(( ($(ns_of_pids "$p") - c0) * 60 / seconds ))e-6" \
                                "$(( ($(switches_of_pids "$p") - s0) * 100 / seconds ))e-2" "$(memory_of_pids "$p")" >&2
                done <"$work/perproc0"
        fi
        spawn_stop
        pkill -f "$work/up.pftrace" 2>/dev/null || true
        rm -f "$work/up.pftrace"
}

load_start "${LOAD:-0}"

ours="ours"
# shellcheck disable=SC2086 # HOSTS: words
[ "$(echo ${HOSTS:-} | wc -w)" -le 1 ] || ours=$(for h in $HOSTS; do printf 'ours-%s ' "$h"; done)
sides=$ours
! $upstream || sides="$ours up"
for r in $(seq "$rounds"); do
        order=$sides
        [ $((r % 2)) = 0 ] && [ "$upstream" = true ] && order="up $ours"
        for side in $order; do
                run "$r" "$side"
        done
done

echo "per run (min/median/max over $rounds rounds of ${seconds} s; CPU ms per minute, switches per second, RSS and PSS KiB summed over the processes)"
for side in $sides; do
        printf '%-9s cpu %s  switches %s  rss %s  pss %s  processes %s\n' "$side" \
                "$(cut -d' ' -f1 "$work/$side" | stats)" "$(cut -d' ' -f2 "$work/$side" | stats)" \
                "$(cut -d' ' -f3 "$work/$side" | stats)" "$(cut -d' ' -f4 "$work/$side" | stats)" \
                "$(cut -d' ' -f5 "$work/$side" | stats)"
done
if $upstream; then
        for side in $ours; do
                paste -d' ' "$work/$side" "$work/up" | awk '{ printf "%.3f %.3f %.3f %.3f\n", $1 / ($6 > 0 ? $6 : 1),
                        $2 / ($7 > 0 ? $7 : 1), $3 / $8, $4 / $9 }' >"$work/ratio"
                printf '%s/up cpu %s  switches %s  rss %s  pss %s\n' "$side" "$(cut -d' ' -f1 "$work/ratio" | stats)" \
                        "$(cut -d' ' -f2 "$work/ratio" | stats)" "$(cut -d' ' -f3 "$work/ratio" | stats)" \
                        "$(cut -d' ' -f4 "$work/ratio" | stats)"
        done
fi
