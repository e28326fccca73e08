#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Interoperability of traced with upstream Perfetto's own programs: every
# pairing of a producer, a service and a consumer where one side is ours and
# the other upstream's, with the traces checked by upstream's
# trace_processor_shell. Run by `make check-interop` (not part of
# `make check`):
#
#   make check-interop PERFETTO_BIN_DIR=/path/to/upstream/binaries
#
# PERFETTO_BIN_DIR names a directory holding upstream Perfetto's traced,
# traced_probes, perfetto and trace_processor_shell (v58 or later; traced_perf
# and traced_relay for the pairings that use them). A pairing whose binaries
# are missing is skipped with the list of what it needs. Each pairing prints
# one PASS/FAIL/SKIP line; a failure says which side and what differs. Exit
# status: 1 when a pairing failed, 77 when every pairing was skipped, else 0.
#
# Environment: TOP_BUILDDIR (this project's build directory; default: the
# current directory), INTEROP_KEEP=1 keeps the work directory with every log
# and trace, INTEROP_ONLY=REGEX runs only the pairings whose name matches.
#
# Needs root for ftrace (tracefs instances of its own, named with this
# script's pid; the global tracing state is left alone).
#
# Every process a pairing starts runs in a session and process group of
# its own (setsid), so that stopping it reaches what it started in turn;
# each pairing ends by stopping them all (TERM, KILL 5 s later) and reaping
# them, on success, failure or timeout alike, and so does the script when
# it exits or is interrupted. What left its group (upstream's perfetto
# --background daemonizes) is found by the work directory in its command
# line or environment, and stopped too.

set -u

TOP_BUILDDIR=${TOP_BUILDDIR:-$PWD}
BIN=${PERFETTO_BIN_DIR:-}
ONLY=${INTEROP_ONLY:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/traced-interop.XXXXXX") || exit 1
TRACEFS=/sys/kernel/tracing
[ -d "$TRACEFS/instances" ] || TRACEFS=/sys/kernel/debug/tracing
INSTANCE="traced-interop-$$"

# The daemons as make check starts them (tests/bin: the programs, not
# libtool's wrapper scripts, whose start-up cost made a session of the
# first second miss its data sources).
OURS_TRACED="$TOP_BUILDDIR/tests/bin/traced"
OURS_HOST="$TOP_BUILDDIR/tests/bin/traced-plugin-host"
OURS_PLUGINS="$TOP_BUILDDIR/plugins/.libs"
OURS_TRACECTL="$TOP_BUILDDIR/tracectl"
OURS_PRODUCER="$TOP_BUILDDIR/example-producer"
# Our .proto files, for configs that use our own fields (protoc encodes
# them for upstream's perfetto, whose text parser does not know them).
TOP_SRCDIR=${TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}

PIDS=() # what the running pairing started: each a process group's leader
NAMES=()
RESULTS=()
DETAILS=()
n_pass=0
n_fail=0
n_skip=0
instance_made=0

# groups_alive PGID...: whether a process of these groups still runs (a
# zombie only waits to be reaped).
groups_alive() {
        ps -e -o pgid=,stat= | awk -v l=" $* " '$2 !~ /^Z/ && index(l, " " $1 " ") { f = 1 } END { exit !f }'
}

# Processes that still name the work directory in their command line or
# environment (grep reads the name from stdin, so that its own command line
# does not hold it).
strays() {
        [ -n "$WORK" ] || return 0 # (an empty name would match everything)
        # shellcheck disable=SC2062 # the globs are files; the pattern is on stdin
        printf '%s\n' "$WORK" | grep -laF -f - /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null |
                sed -n 's|^/proc/\([0-9]*\)/.*|\1|p' | sort -u | grep -vx "$$"
}

stop_strays() {
        local left
        left=$(strays)
        [ -n "$left" ] || return 0
        # shellcheck disable=SC2086
        kill -TERM $left 2>/dev/null
        for _ in $(seq 30); do
                sleep 0.1
                left=$(strays)
                [ -n "$left" ] || return 0
        done
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
}

# Stops every process group the pairing started: TERM, then KILL what is
# left after 5 s; reaps the leaders; then whatever escaped its group.
stop_all() {
        local p
        for p in "${PIDS[@]}"; do
                kill -TERM -- "-$p" 2>/dev/null
        done
        for _ in $(seq 50); do
                if [ "${#PIDS[@]}" -eq 0 ] || ! groups_alive "${PIDS[@]}"; then
                        break
                fi
                sleep 0.1
        done
        for p in "${PIDS[@]}"; do
                kill -KILL -- "-$p" 2>/dev/null
                wait "$p" 2>/dev/null
        done
        PIDS=()
        stop_strays
        # The tracefs instances a pairing made for itself ($INSTANCE-*),
        # also when it failed before removing them.
        local i
        for i in "$TRACEFS/instances/$INSTANCE"-*; do
                remove_instance "$i"
        done
}

# remove_instance DIR: a tracefs instance of ours switched off and removed
# (nothing when it is gone already).
remove_instance() {
        [ -d "$1" ] || return 0
        echo 0 >"$1/tracing_on" 2>/dev/null
        rmdir "$1" 2>/dev/null
}

cleanup() {
        stop_all
        # (ref_stop_count_breaks runs in a command substitution: check the
        # directory, not ref_made.)
        if [ -d "$TRACEFS/instances/$REF_INSTANCE" ]; then
                echo 0 >"$TRACEFS/instances/$REF_INSTANCE/tracing_on" 2>/dev/null
                rmdir "$TRACEFS/instances/$REF_INSTANCE" 2>/dev/null
        fi
        if [ "$instance_made" = 1 ]; then
                echo 0 >"$TRACEFS/instances/$INSTANCE/tracing_on" 2>/dev/null
                rmdir "$TRACEFS/instances/$INSTANCE" 2>/dev/null
        fi
        if [ "${INTEROP_KEEP:-0}" = 1 ]; then
                echo "interop: logs and traces kept in $WORK"
        else
                rm -rf "$WORK"
        fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# launch COMMAND...: runs it in the background, in a session and process
# group of its own, with the caller's redirections (stdin included: a
# background job would otherwise read /dev/null); its pid in LAUNCHED and
# in PIDS. A background child of this shell (no job control) leads no
# group, so setsid runs the command in place: the pid is the command's.
LAUNCHED=""
launch() {
        setsid "$@" <&0 &
        LAUNCHED=$!
        PIDS+=("$LAUNCHED")
}

# finish PID: waits for a launched command and returns its exit status;
# whatever of its group outlived it is stopped.
finish() {
        local st=0 p keep=()
        wait "$1" || st=$?
        for p in "${PIDS[@]}"; do
                [ "$p" = "$1" ] || keep+=("$p")
        done
        PIDS=("${keep[@]}")
        kill -TERM -- "-$1" 2>/dev/null
        return "$st"
}

# run_fg COMMAND...: launch and finish; a signal to this script stops it at
# once (the trap runs during wait, where a foreground command would delay
# it until the command ends).
run_fg() {
        launch "$@"
        finish "$LAUNCHED"
}

# start DIR NAME [VAR=VALUE...] COMMAND...: runs in the background, output
# in DIR/NAME.log, stopped by stop_all.
start() {
        local dir=$1 name=$2
        shift 2
        launch env "$@" >"$dir/$name.log" 2>&1 </dev/null
}

# wait_socket PATH: until something listens there (10 s).
wait_socket() {
        for _ in $(seq 100); do
                [ -S "$1" ] && return 0
                sleep 0.1
        done
        return 1
}

# wait_log FILE TEXT [SECONDS]
wait_log() {
        local secs=${3:-10}
        for _ in $(seq $((secs * 10))); do
                grep -q -- "$2" "$1" 2>/dev/null && return 0
                sleep 0.1
        done
        return 1
}

result() {
        NAMES+=("$1")
        RESULTS+=("$2")
        DETAILS+=("$3")
        case $2 in
        PASS) n_pass=$((n_pass + 1)) ;;
        FAIL) n_fail=$((n_fail + 1)) ;;
        *) n_skip=$((n_skip + 1)) ;;
        esac
        printf '%-56s %-4s %s\n' "$1" "$2" "$3"
}

# start_ours NAME DIR [VAR=VALUE...]: our traced with its plugins on DIR's
# sockets, the variables in its environment; once it listens, a second
# for its plugins to register. False (the pairing failed) when it does
# not listen.
start_ours() {
        local name=$1 d=$2
        shift 2
        start "$d" traced "$@" "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr --log-level=info
        if ! wait_socket "$d/c"; then
                result "$name" FAIL "our traced: no consumer socket"
                stop_all
                return 1
        fi
        sleep 1
}

# verdict NAME WHY PASS_DETAIL: FAIL with WHY (reasons each led by "; ")
# when there is any, else PASS with PASS_DETAIL.
verdict() {
        if [ -n "$2" ]; then
                result "$1" FAIL "${2#; }"
        else
                result "$1" PASS "$3"
        fi
}

# needs NAME BINARY...: prints what is missing; false if anything is.
MISSING=""
needs() {
        MISSING=""
        local b
        for b in "$@"; do
                case $b in
                ours:*)
                        [ -x "${b#ours:}" ] || MISSING="$MISSING ${b#ours:}"
                        ;;
                *)
                        if [ -z "$BIN" ] || [ ! -x "$BIN/$b" ]; then
                                MISSING="$MISSING $b"
                        fi
                        ;;
                esac
        done
        [ -z "$MISSING" ]
}

selected() {
        [ -z "$ONLY" ] || [[ $1 =~ $ONLY ]]
}

skip_missing() {
        local what="needs$MISSING"
        if [ -z "$BIN" ]; then
                what="$what (set PERFETTO_BIN_DIR to upstream Perfetto v58+ binaries)"
        else
                what="$what (not in $BIN)"
        fi
        result "$1" SKIP "$what"
}

# pairing_dir NAME: a fresh directory for the sockets and files of one
# pairing.
pairing_dir() {
        mktemp -d "$WORK/p.XXXX"
}

# ---- trace_processor ---------------------------------------------------

# tp TRACE SQL: the first column of the last row ('' for none or NULL).
tp() {
        local q
        q=$(mktemp "$WORK/q.XXXX.sql")
        printf '%s\n' "$2" >"$q"
        "$BIN/trace_processor_shell" --query-file "$q" "$1" 2>>"$WORK/trace_processor.log" |
                tail -n 1 | sed -e 's/^"//' -e 's/"$//' -e 's/^\[NULL\]$//'
}

# tp_num TRACE SQL: a number, 0 when the query gave none.
tp_num() {
        local v
        v=$(tp "$1" "$2")
        [[ $v =~ ^-?[0-9]+$ ]] && echo "$v" || echo 0
}

# bad_stats TRACE ALLOWED_REGEX: stats of severity error or data_loss with
# a non-zero value, except those the recording caused on purpose.
bad_stats() {
        local all s out=""
        all=$(tp "$1" "select group_concat(name || case when idx is null then '' else '[' || idx || ']' end || '=' || value, ' ')
                       from stats where severity in ('error', 'data_loss') and value > 0")
        for s in $all; do
                if [ -n "${2:-}" ] && [[ ${s%%[[=]*} =~ ^(${2})$ ]]; then
                        continue
                fi
                out="$out $s"
        done
        echo "${out# }"
}

# Checks that every pairing with a kernel trace makes: scheduling, threads,
# processes, counters, ftrace event arguments, and no error stats. Sets
# WHY to what is missing.
WHY=""
check_system_trace() {
        local t=$1 side=$2 allowed=${3:-} n
        WHY=""
        n=$(tp_num "$t" "select count(*) from sched_slice")
        [ "$n" -gt 0 ] || WHY="$WHY; no sched_slice rows ($side sched_switch events)"
        n=$(tp_num "$t" "select count(*) from thread where name is not null and tid != 0")
        [ "$n" -gt 1 ] || WHY="$WHY; $n named threads"
        n=$(tp_num "$t" "select count(*) from process where pid > 1 and name is not null")
        [ "$n" -gt 1 ] || WHY="$WHY; $n named processes ($side linux.process_stats)"
        n=$(tp_num "$t" "select count(*) from counter")
        [ "$n" -gt 0 ] || WHY="$WHY; no counters ($side process_stats polling)"
        n=$(tp_num "$t" "select count(*) from ftrace_event e join args a using (arg_set_id) where e.name = 'task_newtask'")
        [ "$n" -gt 0 ] || WHY="$WHY; no task_newtask ftrace_event with args ($side)"
        local bad
        bad=$(bad_stats "$t" "$allowed")
        [ -z "$bad" ] || WHY="$WHY; stats with severity error/data_loss: $bad"
        WHY=${WHY#; }
        [ -z "$WHY" ]
}

# summary_count TRACE TYPE: packets of TYPE, counted by tracectl.
summary_count() {
        "$OURS_TRACECTL" summary "$1" 2>/dev/null | awk -v t="$2" '$1 == t { print $2; exit }' | grep . || echo 0
}

# Spawns a few tasks (task_newtask events) and writes markers.
make_activity() {
        local i
        for i in 1 2 3 4 5; do
                sh -c 'true' </dev/null
                # atrace's counter syntax: trace_processor parses it (a
                # free-form marker would count as systrace_parse_failure).
                [ -n "${1:-}" ] && echo "C|$$|traced_interop_mark|$i" >"$1" 2>/dev/null
                sleep 0.2
        done
}

# A reference for sched_switch chains: the kernel's own text output of a
# private instance recording sched_switch over the same window. Some kernels
# (this project's VM kernel among them) never emit some switch-outs (of the
# idle task, of some threads); trace_processor then counts
# mismatched_sched_switch_tids in any recorder's trace. The count is held
# against the recorder only when the kernel's own text has no such break.
REF_INSTANCE="traced-interop-ref-$$"
ref_made=0
ref_start() {
        mkdir "$TRACEFS/instances/$REF_INSTANCE" 2>/dev/null || return 1
        ref_made=1
        echo 4096 >"$TRACEFS/instances/$REF_INSTANCE/buffer_size_kb"
        echo 1 >"$TRACEFS/instances/$REF_INSTANCE/events/sched/sched_switch/enable"
        echo 1 >"$TRACEFS/instances/$REF_INSTANCE/tracing_on"
}
# Prints how many switches in the kernel's text do not continue the chain of
# their CPU (prev_pid differs from the previous switch's next_pid).
ref_stop_count_breaks() {
        [ "$ref_made" = 1 ] || { echo -1; return; }
        echo 0 >"$TRACEFS/instances/$REF_INSTANCE/tracing_on"
        awk 'match($0, /\[[0-9]+\]/) {
                cpu = substr($0, RSTART + 1, RLENGTH - 2)
                if (!match($0, /prev_pid=[0-9]+/)) next
                prev = substr($0, RSTART + 9, RLENGTH - 9)
                if (!match($0, /next_pid=[0-9]+/)) next
                next_pid = substr($0, RSTART + 9, RLENGTH - 9)
                if ((cpu in last) && last[cpu] != prev) breaks++
                last[cpu] = next_pid
        } END { print breaks + 0 }' "$TRACEFS/instances/$REF_INSTANCE/trace"
        echo 0 >"$TRACEFS/instances/$REF_INSTANCE/events/sched/sched_switch/enable"
        rmdir "$TRACEFS/instances/$REF_INSTANCE" 2>/dev/null
}

ensure_instance() {
        if [ "$instance_made" = 0 ]; then
                mkdir "$TRACEFS/instances/$INSTANCE" 2>/dev/null || return 1
                instance_made=1
        fi
}

ftrace_config() {
        # $1: extra FtraceConfig fields (e.g. an instance name)
        cat <<EOF
buffers { size_kb: 32768 fill_policy: RING_BUFFER }
data_sources { config { name: "linux.ftrace" ftrace_config {
        ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking"
        ftrace_events: "task/task_newtask" ftrace_events: "task/task_rename"
        ftrace_events: "sched/sched_process_exit" ftrace_events: "ftrace/print"
        $1 } } }
data_sources { config { name: "linux.process_stats" process_stats_config {
        scan_all_processes_on_start: true record_thread_names: true proc_stats_poll_ms: 500 } } }
duration_ms: 3000
EOF
}

# ---- pairings ------------------------------------------------------------

# Upstream traced_probes and perfetto CLI recording through our traced.
pair_probes_to_ours() {
        local name="upstream probes+perfetto -> our traced"
        selected "$name" || return 0
        needs traced_probes perfetto trace_processor_shell "ours:$OURS_TRACED" || { skip_missing "$name"; return; }
        if ! ensure_instance; then
                result "$name" SKIP "cannot create a tracefs instance (not root?)"
                return
        fi
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" --no-plugins \
                --log-target=stderr
        wait_socket "$d/p" || { result "$name" FAIL "our traced: no producer socket ($d/traced.log)"; stop_all; return; }
        start "$d" traced_probes PERFETTO_PRODUCER_SOCK_NAME="$d/p" "$BIN/traced_probes"
        sleep 1
        ftrace_config "instance_name: \"$INSTANCE\"" >"$d/cfg"
        launch env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                >"$d/perfetto.log" 2>&1
        local cli=$LAUNCHED
        sleep 1
        make_activity "$TRACEFS/instances/$INSTANCE/trace_marker"
        finish "$cli"
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "upstream perfetto CLI exited $st against our traced: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        if ! check_system_trace "$d/trace" "upstream traced_probes via our traced"; then
                result "$name" FAIL "our traced's trace: $WHY"
                return
        fi
        local marks
        marks=$(tp_num "$d/trace" "select count(*) from ftrace_event e join args a using (arg_set_id)
                                   where e.name = 'print' and a.display_value like '%traced_interop_mark%'")
        if [ "$marks" -lt 1 ]; then
                result "$name" FAIL "our traced's trace: no print events with their text in args"
                return
        fi
        result "$name" PASS "$(tp_num "$d/trace" "select count(*) from sched_slice") sched slices, $marks markers"
}

# Our ftrace plugin, run by traced-plugin-host, under upstream traced.
pair_plugin_to_upstream() {
        local name="our ftrace plugin -> upstream traced"
        selected "$name" || return 0
        needs traced perfetto trace_processor_shell "ours:$OURS_HOST" "ours:$OURS_PLUGINS/ftrace.so" ||
                { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced"
        wait_socket "$d/p" || { result "$name" FAIL "upstream traced: no producer socket"; stop_all; return; }
        start "$d" plugin-host "$OURS_HOST" --socket "$d/p" "$OURS_PLUGINS/ftrace.so"
        sleep 1
        ftrace_config "" >"$d/cfg"
        ref_start || true
        launch env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                >"$d/perfetto.log" 2>&1
        local cli=$LAUNCHED
        sleep 1
        # The plugin copies writes to the top-level trace_marker into its
        # instance where the kernel can.
        make_activity ""
        finish "$cli"
        local st=$?
        local kernel_breaks
        kernel_breaks=$(ref_stop_count_breaks)
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "upstream perfetto CLI exited $st: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        local allowed="" note=""
        if [ "$kernel_breaks" -gt 0 ]; then
                allowed="mismatched_sched_switch_tids"
                note=", $(tp_num "$d/trace" "select value from stats where name = 'mismatched_sched_switch_tids'") mismatched switch tids where the kernel's own text broke $kernel_breaks chains"
        fi
        if ! check_system_trace "$d/trace" "our ftrace plugin" "$allowed"; then
                result "$name" FAIL "upstream traced's trace of our plugin: $WHY"
                return
        fi
        result "$name" PASS "$(tp_num "$d/trace" "select count(*) from sched_slice") sched slices$note"
}

# A libtraced-client producer (examples/producer) under upstream traced,
# recorded by upstream's CLI: every packet the producer says it wrote must
# be in the trace. $2: example-producer options; $3: stats the recording
# causes on purpose (regex); $4: "drop" when drops are the point.
# free_port: a TCP port on 127.0.0.1 free right now.
free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pair_client_to_upstream WHAT OPTS [ALLOWED_STATS] [drop] [unix|tcp|relay]:
# our example producer into upstream traced over its UNIX socket, over TCP
# (shared memory emulated), or through upstream traced_relay (TCP behind).
pair_client_to_upstream() {
        local via=${5:-unix}
        local name="libtraced-client $1 -> upstream traced" opts=$2 allowed=${3:-} want_drop=${4:-}
        [ "$via" = unix ] || name="libtraced-client $1 -> upstream traced ($via)"
        selected "$name" || return 0
        needs traced perfetto trace_processor_shell "ours:$OURS_PRODUCER" "ours:$OURS_TRACECTL" ||
                { skip_missing "$name"; return; }
        [ "$via" != relay ] || needs traced traced_relay perfetto trace_processor_shell "ours:$OURS_PRODUCER" ||
                { skip_missing "$name"; return; }
        local d port psock
        d=$(pairing_dir)
        psock="$d/p"
        if [ "$via" = unix ]; then
                start "$d" traced PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced"
        else
                port=$(free_port)
                start "$d" traced PERFETTO_PRODUCER_SOCK_NAME="$d/p,127.0.0.1:$port" PERFETTO_CONSUMER_SOCK_NAME="$d/c" \
                        "$BIN/traced" --enable-relay-endpoint-on="127.0.0.1:$port"
                psock="127.0.0.1:$port"
        fi
        local traced_pid=$LAUNCHED
        wait_socket "$d/p" || { result "$name" FAIL "upstream traced: no producer socket"; stop_all; return; }
        if [ "$via" = relay ]; then
                start "$d" relay PERFETTO_RELAY_SOCK_NAME="127.0.0.1:$port" PERFETTO_PRODUCER_SOCK_NAME="$d/r" \
                        "$BIN/traced_relay"
                wait_socket "$d/r" || { result "$name" FAIL "traced_relay: no socket ($d/relay.log)"; stop_all; return; }
                psock="$d/r"
        fi
        # shellcheck disable=SC2086
        start "$d" producer "$OURS_PRODUCER" --socket "$psock" $opts
        wait_log "$d/producer.log" "ready" || { result "$name" FAIL "our producer did not connect: $(tail -n 1 "$d/producer.log")"; stop_all; return; }
        printf 'buffers { size_kb: 65536 }\ndata_sources { config { name: "example.data" } }\nduration_ms: 3000\n' >"$d/cfg"
        # Behind a relay the producer is on another machine.
        [ "$via" != relay ] || echo 'trace_all_machines: true' >>"$d/cfg"
        local st=0
        if [ "$want_drop" = drop ]; then
                # Upstream traced is stopped while the producer writes (it
                # waits a while after the start: --delay-ms), so that its
                # SMB fills and the rest is dropped however fast traced
                # would have drained it; traced goes on once it wrote all.
                launch env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" \
                        -o "$d/trace" >"$d/perfetto.log" 2>&1 </dev/null
                local cli=$LAUNCHED
                if wait_log "$d/producer.log" "threads writing" 20; then
                        kill -STOP "$traced_pid"
                        wait_log "$d/producer.log" "dropped" 20 || true
                        kill -CONT "$traced_pid"
                fi
                finish "$cli" || st=$?
        else
                run_fg env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                        >"$d/perfetto.log" 2>&1 || st=$?
        fi
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "upstream perfetto CLI exited $st: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        local written dropped in_trace
        written=$(sed -n 's/.*wrote \([0-9]*\) packets.*/\1/p' "$d/producer.log" | awk '{ s += $1 } END { print s + 0 }')
        dropped=$(sed -n 's/.*dropped \([0-9]*\).*/\1/p' "$d/producer.log" | awk '{ s += $1 } END { print s + 0 }')
        in_trace=$(summary_count "$d/trace" for_testing)
        local bufstats
        bufstats=$(tp "$d/trace" "select group_concat(replace(name, 'traced_buf_', '') || '=' || value, ' ') from stats
                                  where name in ('traced_buf_chunks_written', 'traced_buf_chunks_read',
                                                 'traced_buf_readaheads_failed', 'traced_buf_abi_violations',
                                                 'traced_buf_trace_writer_packet_loss') and value > 0")
        echo "written=$written dropped=$dropped in_trace=$in_trace $bufstats" >"$d/figures"
        if [ "$written" -eq 0 ]; then
                result "$name" FAIL "our producer wrote nothing: $(tail -n 1 "$d/producer.log")"
                return
        fi
        if [ "$in_trace" != "$written" ]; then
                result "$name" FAIL "our producer wrote $written packets (dropped $dropped), upstream traced's trace holds $in_trace [$bufstats]"
                return
        fi
        if [ "$want_drop" = drop ] && [ "$dropped" -eq 0 ]; then
                result "$name" FAIL "our producer dropped nothing: the SMB never filled, the drop path is untested"
                return
        fi
        local bad
        bad=$(bad_stats "$d/trace" "$allowed")
        if [ -n "$bad" ]; then
                result "$name" FAIL "upstream traced's trace of our producer has $bad"
                return
        fi
        result "$name" PASS "$written written, $dropped dropped, $in_trace in the trace"
}

# tracectl recording from upstream traced: quick mode (process_stats from
# upstream traced_probes, packets of our producer) and a text config with
# ftrace in a tracefs instance of ours.
pair_tracectl_to_upstream() {
        local name="tracectl quick mode -> upstream traced"
        if selected "$name"; then
                if needs traced traced_probes trace_processor_shell "ours:$OURS_TRACECTL" "ours:$OURS_PRODUCER"; then
                        local d
                        d=$(pairing_dir)
                        start "$d" traced PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced"
                        if wait_socket "$d/p"; then
                                start "$d" traced_probes PERFETTO_PRODUCER_SOCK_NAME="$d/p" "$BIN/traced_probes"
                                start "$d" producer "$OURS_PRODUCER" --socket "$d/p" --packets 300 --size 200
                                wait_log "$d/producer.log" "ready"
                                sleep 1
                                run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -t 3s -b 16mb \
                                        --ds example.data -o "$d/trace" --no-summary >"$d/tracectl.log" 2>&1
                                local st=$?
                                stop_all
                                local n procs bad
                                n=$(summary_count "$d/trace" for_testing)
                                procs=$(tp_num "$d/trace" "select count(*) from process where pid > 1 and name is not null")
                                bad=$(bad_stats "$d/trace" "")
                                if [ "$st" != 0 ]; then
                                        result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                                elif [ "$n" != 300 ]; then
                                        result "$name" FAIL "upstream traced's trace holds $n of our producer's 300 packets"
                                elif [ "$procs" -lt 2 ]; then
                                        result "$name" FAIL "no processes from upstream traced_probes' process_stats ($procs)"
                                elif [ -n "$bad" ]; then
                                        result "$name" FAIL "tracectl's config made trace_processor report $bad"
                                else
                                        result "$name" PASS "300 packets, $procs processes"
                                fi
                        else
                                result "$name" FAIL "upstream traced: no producer socket"
                                stop_all
                        fi
                else
                        skip_missing "$name"
                fi
        fi

        name="tracectl text config -> upstream traced+probes"
        selected "$name" || return 0
        needs traced traced_probes trace_processor_shell "ours:$OURS_TRACECTL" || { skip_missing "$name"; return; }
        if ! ensure_instance; then
                result "$name" SKIP "cannot create a tracefs instance (not root?)"
                return
        fi
        local d
        d=$(pairing_dir)
        start "$d" traced PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced"
        wait_socket "$d/p" || { result "$name" FAIL "upstream traced: no producer socket"; stop_all; return; }
        start "$d" traced_probes PERFETTO_PRODUCER_SOCK_NAME="$d/p" "$BIN/traced_probes"
        sleep 1
        { ftrace_config "instance_name: \"$INSTANCE\""; echo "flush_period_ms: 2000"; } >"$d/cfg"
        launch timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/trace" --no-summary \
                >"$d/tracectl.log" 2>&1
        local cli=$LAUNCHED
        sleep 1
        make_activity "$TRACEFS/instances/$INSTANCE/trace_marker"
        finish "$cli"
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "tracectl exited $st against upstream traced: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return
        fi
        if ! check_system_trace "$d/trace" "upstream traced_probes"; then
                result "$name" FAIL "upstream traced's trace, written for tracectl: $WHY"
                return
        fi
        result "$name" PASS "$(tp_num "$d/trace" "select count(*) from sched_slice") sched slices"
}

# A trace recorded entirely by us, read by upstream's trace_processor.
pair_ours_to_trace_processor() {
        local name="our traced+ftrace plugin+tracectl -> trace_processor"
        selected "$name" || return 0
        needs trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_PLUGINS/ftrace.so" \
                "ours:$OURS_TRACECTL" || { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket"; stop_all; return; }
        sleep 1
        launch timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -t 3s -b 32mb sched/sched_switch \
                sched/sched_waking task/task_newtask task/task_rename sched/sched_process_exit ftrace/print \
                -o "$d/trace" --no-summary >"$d/tracectl.log" 2>&1
        local cli=$LAUNCHED
        sleep 1
        make_activity ""
        finish "$cli"
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return
        fi
        if ! check_system_trace "$d/trace" "our ftrace plugin"; then
                result "$name" FAIL "trace_processor on our trace: $WHY"
                return
        fi
        result "$name" PASS "$(tp_num "$d/trace" "select count(*) from sched_slice") sched slices, $(tp_num "$d/trace" "select count(*) from counter") counter values"
}

# Upstream's perfetto CLI with a native heap profile config (upstream's
# fields only: android.heapprofd, heapprofd_config by pid, and
# linux.process_stats for the names) against our traced and heap plugin,
# profiling tests/heap/heap-workload under
# libtraced-heap.so: trace_processor must read the dump into
# heap_profile_allocation, with the workload's callsites named and their
# bytes within 10 % of what it allocated (small_kept 12 800 000 B,
# medium_half 16 000 000 B), the process named, and no error stats (a
# repeated ProfilePacket index counts as heapprofd_missing_packet).
HEAP_LIB="$TOP_BUILDDIR/.libs/libtraced-heap.so"
HEAP_WORKLOAD="$TOP_BUILDDIR/tests/heap/heap-workload"
# heap_site_bytes TRACE FUNCTION: the bytes allocated at the callsites
# whose leaf is FUNCTION (the library's own frames are off the stacks).
heap_site_bytes() {
        tp_num "$1" "select cast(sum(a.size) as int) from heap_profile_allocation a
                     join stack_profile_callsite c on a.callsite_id = c.id
                     join stack_profile_frame f on c.frame_id = f.id
                     where a.size > 0 and f.name = '$2'"
}
pair_heap_cli_to_trace_processor() {
        local name="upstream perfetto heapprofd config -> our heap plugin"
        selected "$name" || return 0
        needs perfetto trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_PLUGINS/heap.so" \
                "ours:$OURS_PLUGINS/ftrace.so" "ours:$HEAP_LIB" "ours:$HEAP_WORKLOAD" || { skip_missing "$name"; return; }
        local d h wl cli st
        d=$(pairing_dir)
        chmod 0711 "$d"
        # The plugin's state page and socket, in a directory of the
        # pairing's own owned by the plugin hosts' user (as tmpfiles.d
        # makes /run/traced-heap).
        h="$d/heap"
        mkdir -m 0755 "$h"
        echo "traced-heap state page" >"$h/state"
        if getent passwd traced-plugin >/dev/null; then chown -R traced-plugin: "$h"; fi
        start_ours "$name" "$d" TRACED_HEAP_DIR="$h" || return
        start "$d" workload LD_PRELOAD="$HEAP_LIB" TRACED_HEAP_DIR="$h" "$HEAP_WORKLOAD" callsites "$d/done"
        wl=$LAUNCHED
        sleep 1
        printf '%s\n' 'buffers { size_kb: 65536 }' \
                'data_sources { config { name: "android.heapprofd" heapprofd_config {' \
                "  sampling_interval_bytes: 4096 pid: $wl shmem_size_bytes: 8388608 block_client: true } } }" \
                'data_sources { config { name: "linux.process_stats" process_stats_config {' \
                '  scan_all_processes_on_start: true } } }' \
                'duration_ms: 8000' >"$d/cfg"
        launch env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                >"$d/perfetto.log" 2>&1
        cli=$LAUNCHED
        if ! wait_log "$d/traced.log" "android.heapprofd instance .*: profiling" 15; then
                result "$name" FAIL "the heap plugin did not start profiling: $(tail -n 3 "$d/traced.log" | tr '\n' ' ')"
                stop_all
                return
        fi
        # The workload joins at its next call, then allocates.
        kill -USR1 "$wl"
        for _ in $(seq 100); do
                [ -e "$d/done" ] && break
                sleep 0.1
        done
        finish "$cli"
        st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "perfetto exited $st: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        local rows small medium pname bad why=""
        rows=$(tp_num "$d/trace" "select count(*) from heap_profile_allocation")
        small=$(heap_site_bytes "$d/trace" small_kept)
        medium=$(heap_site_bytes "$d/trace" medium_half)
        pname=$(tp "$d/trace" "select name from process where pid = $wl")
        bad=$(bad_stats "$d/trace" "")
        [ "$rows" -gt 0 ] || why="$why; no heap_profile_allocation rows"
        { [ "$small" -ge 11520000 ] && [ "$small" -le 14080000 ]; } ||
                why="$why; small_kept: $small bytes (12800000 allocated)"
        { [ "$medium" -ge 14400000 ] && [ "$medium" -le 17600000 ]; } ||
                why="$why; medium_half: $medium bytes (16000000 allocated)"
        [[ $pname == *heap-workload* ]] || why="$why; process $wl named '$pname'"
        [ -z "$bad" ] || why="$why; stats with severity error/data_loss: $bad"
        verdict "$name" "${why:+; trace_processor: ${why#; }}" \
                "$rows allocation rows; small_kept $small B, medium_half $medium B"
}

# Our tracectl record --rotate (traced_rotation, our own TraceConfig
# fields) with sched, process_stats and numbered counter markers: every
# file must open alone in trace_processor (its trace config, the system's
# name, named processes and threads, no error stats), and each numbered
# marker must be in exactly one of them.
pair_rotation_to_trace_processor() {
        local name="our rotated files -> trace_processor, each alone"
        selected "$name" || return 0
        needs trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_PLUGINS/ftrace.so" \
                "ours:$OURS_TRACECTL" || { skip_missing "$name"; return; }
        local d cli st n=3000 i
        d=$(pairing_dir)
        chmod 0711 "$d"
        mkdir "$d/out"
        chgrp "$(id -gn traced 2>/dev/null || id -gn nobody)" "$d/out"
        chmod 2770 "$d/out"
        start_ours "$name" "$d" || return
        ftrace_config "" | sed 's/duration_ms: 3000/duration_ms: 600000/' >"$d/cfg"
        launch timeout 120 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt --rotate 64kb -o "$d/out/" \
                --no-summary >"$d/tracectl.log" 2>&1
        cli=$LAUNCHED
        sleep 2
        # Numbered markers over some seconds, with tasks between them: the
        # cuts fall among them.
        for i in $(seq "$n"); do
                echo "C|$$|traced_interop_seq|$i" >"$TRACEFS/trace_marker"
                if [ $((i % 150)) -eq 0 ]; then
                        sh -c 'true' </dev/null
                        sleep 0.3
                fi
        done
        sleep 1
        kill -INT "$cli" 2>/dev/null
        finish "$cli"
        st=$?
        stop_all
        local files=("$d"/out/*.pftrace)
        if [ "$st" != 0 ] || [ ! -s "${files[0]}" ]; then
                result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return
        fi
        if [ "${#files[@]}" -lt 3 ]; then
                result "$name" FAIL "only ${#files[@]} file(s) written: no cut to check"
                return
        fi
        local f v procs threads cfg sys bad why="" seen="$d/seen"
        : >"$seen"
        for f in "${files[@]}"; do
                v=${f##*/}
                procs=$(tp_num "$f" "select count(*) from process where pid > 1 and name is not null")
                threads=$(tp_num "$f" "select count(*) from thread where name is not null and tid != 0")
                cfg=$(tp_num "$f" "select count(*) from metadata where name = 'trace_config_pbtxt'")
                sys=$(tp "$f" "select str_value from metadata where name = 'system_name'")
                bad=$(bad_stats "$f" "mismatched_sched_switch_tids")
                [ "$procs" -gt 1 ] || why="$why; $v: $procs named processes"
                [ "$threads" -gt 1 ] || why="$why; $v: $threads named threads"
                [ "$cfg" -gt 0 ] || why="$why; $v: no trace config"
                [ -n "$sys" ] || why="$why; $v: no system name"
                [ -z "$bad" ] || why="$why; $v: stats with severity error/data_loss: $bad"
                tp "$f" "select group_concat(cast(c.value as int), ' ') from counter c
                         join counter_track t on c.track_id = t.id where t.name = 'traced_interop_seq'" |
                        tr ' ' '\n' | grep -E '^[0-9]+$' >>"$seen" || true
        done
        local total distinct missing doubled
        total=$(wc -l <"$seen")
        distinct=$(sort -n -u "$seen" | awk -v n="$n" '$1 >= 1 && $1 <= n' | wc -l)
        doubled=$((total - $(sort -n -u "$seen" | wc -l)))
        missing=$((n - distinct))
        [ "$missing" -eq 0 ] || why="$why; $missing of $n numbered markers in no file"
        [ "$doubled" -eq 0 ] || why="$why; $doubled markers in two files"
        verdict "$name" "${why:+; trace_processor: ${why#; }}" \
                "${#files[@]} files, each opened alone; $n markers, each in one file"
}

# Two snapshots (`tracectl snapshot`: flush and clone underneath) of one
# running ring-buffer session of ours, activity between them: each must
# open alone in trace_processor (named processes and threads, sched
# slices, no error stats), and the session must go on after them.
pair_snapshots_to_trace_processor() {
        local name="our snapshots of a running session -> trace_processor"
        selected "$name" || return 0
        needs trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_PLUGINS/ftrace.so" \
                "ours:$OURS_TRACECTL" || { skip_missing "$name"; return; }
        local d st k why=""
        d=$(pairing_dir)
        chmod 0711 "$d"
        start_ours "$name" "$d" || return
        { ftrace_config "" | sed 's/duration_ms: 3000/duration_ms: 600000/'
          echo 'unique_session_name: "interop_snapshots"'; } >"$d/cfg"
        run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt --detach interop_snapshots \
                -o "$d/session.pftrace" >"$d/tracectl.log" 2>&1
        st=$?
        if [ "$st" != 0 ]; then
                result "$name" FAIL "tracectl record --detach exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                stop_all
                return
        fi
        for k in 1 2; do
                make_activity "$TRACEFS/trace_marker"
                run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" snapshot interop_snapshots -o "$d/snap$k.pftrace" \
                        >>"$d/tracectl.log" 2>&1
                st=$?
                [ "$st" = 0 ] && [ -s "$d/snap$k.pftrace" ] ||
                        why="$why; snapshot $k: tracectl exited $st: $(tail -n 1 "$d/tracectl.log")"
        done
        run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" stop interop_snapshots >>"$d/tracectl.log" 2>&1 ||
                why="$why; the session did not stop after the snapshots: $(tail -n 1 "$d/tracectl.log")"
        stop_all
        for k in 1 2; do
                [ -s "$d/snap$k.pftrace" ] || continue
                check_system_trace "$d/snap$k.pftrace" "our snapshot $k" "mismatched_sched_switch_tids" ||
                        why="$why; snapshot $k: $WHY"
        done
        [ -s "$d/session.pftrace" ] || why="$why; the session's own file is empty"
        verdict "$name" "$why" "2 snapshots, each opened alone: $(tp_num "$d/snap1.pftrace" \
                "select count(*) from sched_slice") and $(tp_num "$d/snap2.pftrace" "select count(*) from sched_slice") sched slices"
}

# Upstream traced_perf under our traced: perf samples with callstacks. At
# 50 Hz into 4 MiB kernel buffers traced_perf keeps up on a loaded machine
# (at 200 Hz into its default buffers it loses records, whatever service it
# writes to: perf_cpu_lost_records).
pair_perf_to_ours() {
        local name="upstream traced_perf -> our traced"
        selected "$name" || return 0
        needs traced_perf perfetto trace_processor_shell "ours:$OURS_TRACED" || { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" --no-plugins \
                --log-target=stderr
        wait_socket "$d/p" || { result "$name" FAIL "our traced: no producer socket"; stop_all; return; }
        start "$d" traced_perf PERFETTO_PRODUCER_SOCK_NAME="$d/p" "$BIN/traced_perf"
        start "$d" busy sh -c 'while :; do :; done'
        local busy=${PIDS[-1]}
        sleep 1
        cat >"$d/cfg" <<EOF
buffers { size_kb: 32768 }
data_sources { config { name: "linux.perf" perf_event_config {
        timebase { frequency: 50 counter: SW_CPU_CLOCK }
        callstack_sampling { scope { target_pid: $busy } }
        ring_buffer_pages: 1024
} } }
duration_ms: 3000
EOF
        run_fg env PERFETTO_CONSUMER_SOCK_NAME="$d/c" timeout 60 "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                >"$d/perfetto.log" 2>&1
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "upstream perfetto CLI exited $st against our traced: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        local n bad
        n=$(tp_num "$d/trace" "select count(*) from perf_sample where callsite_id is not null")
        bad=$(bad_stats "$d/trace" "")
        if [ "$n" -lt 1 ]; then
                result "$name" FAIL "our traced's trace: no perf_sample with a callsite from upstream traced_perf"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "our traced's trace of traced_perf has $bad"
        else
                result "$name" PASS "$n samples with callsites"
        fi
}

# Our perf plugin (when this tree builds it) under our traced, read by
# trace_processor: perf samples with callstacks.
pair_perf_plugin_to_trace_processor() {
        local name="our perf plugin -> trace_processor"
        selected "$name" || return 0
        if [ ! -e "$OURS_PLUGINS/perf.so" ]; then
                result "$name" SKIP "this tree builds no perf plugin ($OURS_PLUGINS/perf.so)"
                return
        fi
        needs trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_TRACECTL" ||
                { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket"; stop_all; return; }
        start "$d" busy sh -c 'while :; do :; done'
        local busy=${PIDS[-1]}
        sleep 1
        cat >"$d/cfg" <<EOF
buffers { size_kb: 32768 }
data_sources { config { name: "linux.perf" perf_event_config {
        timebase { frequency: 50 counter: SW_CPU_CLOCK }
        callstack_sampling { scope { target_pid: $busy } }
        ring_buffer_pages: 1024
} } }
duration_ms: 3000
EOF
        run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/trace" --no-summary \
                >"$d/tracectl.log" 2>&1
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return
        fi
        local n bad
        n=$(tp_num "$d/trace" "select count(*) from perf_sample where callsite_id is not null")
        bad=$(bad_stats "$d/trace" "")
        if [ "$n" -lt 1 ]; then
                result "$name" FAIL "trace_processor finds no perf_sample with a callsite in our perf plugin's trace"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "trace_processor on our perf trace: $bad"
        else
                result "$name" PASS "$n samples with callsites"
        fi
}

# Our sysstats plugin, recorded by tracectl, read by trace_processor: the
# meminfo and cpu.times counter tracks upstream's probes make, a cpu row
# per online CPU with its name, no error stats.
pair_sysstats_to_trace_processor() {
        local name="our sysstats plugin -> trace_processor"
        selected "$name" || return 0
        needs trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_TRACECTL" \
                "ours:$OURS_PLUGINS/sysstats.so" || { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket"; stop_all; return; }
        sleep 1
        cat >"$d/cfg" <<EOF
buffers { size_kb: 16384 }
data_sources { config { name: "linux.sys_stats" sys_stats_config {
        meminfo_period_ms: 100 vmstat_period_ms: 100 stat_period_ms: 100 } } }
data_sources { config { name: "linux.system_info" system_info_config { irq_names: true } } }
duration_ms: 3000
EOF
        record_ours "$d" "$name" || return
        local free user cpus named bad online irqs
        free=$(tp_num "$d/trace" "select count(*) from counter join counter_track t on counter.track_id = t.id
                                  where t.name = 'MemFree' and value > 0")
        user=$(tp_num "$d/trace" "select count(*) from counter join counter_track t on counter.track_id = t.id
                                  where t.name = 'cpu.times.user_ns'")
        cpus=$(tp_num "$d/trace" "select count(*) from cpu")
        named=$(tp_num "$d/trace" "select count(*) from cpu where processor is not null and processor != ''")
        online=$(getconf _NPROCESSORS_ONLN)
        irqs=$(tp_num "$d/trace" "select count(*) from _linux_interrupt_mapping where name is not null and name != ''")
        bad=$(bad_stats "$d/trace" "")
        if [ "$free" -lt 10 ] || [ "$user" -lt 10 ]; then
                result "$name" FAIL "trace_processor: $free MemFree and $user cpu.times.user_ns values"
        elif [ "$named" -ne "$online" ] || [ "$cpus" -lt "$named" ]; then
                result "$name" FAIL "trace_processor: $named named CPUs of $cpus, $online online"
        elif [ "$irqs" -lt 1 ]; then
                result "$name" FAIL "trace_processor: no interrupt names (irq_names)"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "trace_processor on our sys_stats trace: $bad"
        else
                result "$name" PASS "$free MemFree values, $user cpu.times.user_ns values, $named CPUs named, $irqs interrupt names"
        fi
}

# Upstream's perfetto CLI against our traced with the sources of our
# sysstats and journald plugins: sys_stats (meminfo, vmstat, stat at
# 100 ms), system_info and systemd_journald (a journald of the pairing's
# own, in a journal namespace, written to with logger during the
# recording). trace_processor must show the MemFree and cpu.times
# counters, a named CPU per online CPU, the logger entry in its logs with
# log_source systemd_journald, and no error stats.
JOURNALD=/lib/systemd/systemd-journald
pair_cli_system_sources() {
        local name="upstream perfetto sys_stats+system_info+journald -> our traced"
        selected "$name" || return 0
        needs perfetto trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_PLUGINS/sysstats.so" \
                "ours:$OURS_PLUGINS/journald.so" "ours:$JOURNALD" || { skip_missing "$name"; return; }
        if ! command -v protoc >/dev/null || ! command -v logger >/dev/null; then
                result "$name" SKIP "needs protoc and logger"
                return
        fi
        local d ns tag
        d=$(pairing_dir)
        ns="tracedinterop$$"
        tag="interop-$$-$RANDOM"
        rm -rf "/run/systemd/journal.$ns"
        start "$d" journald "$JOURNALD" "$ns"
        wait_socket "/run/systemd/journal.$ns/dev-log" ||
                { result "$name" FAIL "journald (namespace $ns) made no socket"; stop_all; return; }
        cli_traced "$d" || { result "$name" FAIL "our traced: no sockets"; stop_all; return; }
        sleep 1
        cat >"$d/cfg.txt" <<EOF
buffers { size_kb: 32768 }
data_sources { config { name: "linux.sys_stats" sys_stats_config {
        meminfo_period_ms: 100 vmstat_period_ms: 100 stat_period_ms: 100 } } }
data_sources { config { name: "linux.system_info" } }
data_sources { config { name: "linux.systemd_journald" journald_config { journal_namespace: "$ns" } } }
duration_ms: 4000
EOF
        protoc --encode=perfetto.protos.TraceConfig -I "$TOP_SRCDIR/protos" \
                "$TOP_SRCDIR/protos/perfetto/config/trace_config.proto" <"$d/cfg.txt" >"$d/cfg" ||
                { result "$name" FAIL "protoc could not encode the config"; stop_all; return; }
        ( sleep 2; logger -u "/run/systemd/journal.$ns/dev-log" -t "$tag" -p user.warning "interop entry" ) &
        local writer=$!
        cli "$d" perfetto -c "$d/cfg" -o "$d/trace"
        local st=$?
        wait "$writer"
        stop_all
        local j
        for j in "/run/systemd/journal.$ns" /run/log/journal/*".$ns" /var/log/journal/*".$ns"; do
                [ -e "$j" ] && rm -rf "$j"
        done
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "perfetto exited $st: $(tail -n 2 "$d/perfetto.log" | tr '\n' ' ')"
                return
        fi
        local free user named online logs bad
        free=$(tp_num "$d/trace" "select count(*) from counter join counter_track t on counter.track_id = t.id
                                  where t.name = 'MemFree' and value > 0")
        user=$(tp_num "$d/trace" "select count(*) from counter join counter_track t on counter.track_id = t.id
                                  where t.name = 'cpu.times.user_ns'")
        named=$(tp_num "$d/trace" "select count(*) from cpu where processor is not null and processor != ''")
        online=$(getconf _NPROCESSORS_ONLN)
        logs=$(tp_num "$d/trace" "select count(*) from logs where tag = '$tag' and msg = 'interop entry'
                                  and log_source = 'systemd_journald' and prio = 4")
        bad=$(bad_stats "$d/trace" "")
        if [ "$free" -lt 10 ] || [ "$user" -lt 10 ]; then
                result "$name" FAIL "trace_processor: $free MemFree and $user cpu.times.user_ns values"
        elif [ "$named" -ne "$online" ]; then
                result "$name" FAIL "trace_processor: $named named CPUs, $online online"
        elif [ "$logs" -ne 1 ]; then
                result "$name" FAIL "trace_processor: $logs journald rows of the logger entry (1 expected)"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "trace_processor: $bad"
        else
                result "$name" PASS "$free MemFree, $user cpu.times.user_ns values, $named CPUs named, the journald entry"
        fi
}

# Upstream's SDK examples (the C++ SDK's example_system_wide, the C SDK's
# example_shlib_track_event) as producers into our traced, recorded by
# tracectl with a track_event config: the slices each writes, the C SDK's
# counters and flows, no error stats and no packet the service refused.
pair_sdk_examples_tracectl() {
        local name="upstream SDK examples -> our traced + tracectl"
        selected "$name" || return 0
        needs example_system_wide example_shlib_track_event trace_processor_shell "ours:$OURS_TRACED" \
                "ours:$OURS_TRACECTL" || { skip_missing "$name"; return; }
        local d
        d=$(pairing_dir)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/p" || { result "$name" FAIL "our traced: no producer socket"; stop_all; return; }
        start "$d" sw sh -c "cd '$BIN' && PERFETTO_PRODUCER_SOCK_NAME='$d/p' exec timeout 30 ./example_system_wide"
        start "$d" shlib sh -c "cd '$BIN' && PERFETTO_PRODUCER_SOCK_NAME='$d/p' exec timeout 30 ./example_shlib_track_event"
        sleep 2
        cat >"$d/cfg" <<EOF
buffers { size_kb: 16384 }
data_sources { config { name: "track_event" track_event_config { enabled_categories: "*" } } }
duration_ms: 4000
EOF
        run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/trace" >"$d/tracectl.log" 2>&1
        local st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return
        fi
        local game players counters flows invalid bad
        game=$(tp_num "$d/trace" "select count(*) from slice where name = 'DrawGame'")
        players=$(tp_num "$d/trace" "select count(distinct display_value) from slice join args using (arg_set_id)
                                     where slice.name = 'DrawPlayer' and args.key = 'debug.player_number'")
        counters=$(tp_num "$d/trace" "select count(*) from counter")
        flows=$(tp_num "$d/trace" "select count(*) from flow")
        invalid=$(sed -n 's/.* \([0-9][0-9]*\) invalid packets.*/\1/p' "$d/tracectl.log" | tail -n 1)
        bad=$(bad_stats "$d/trace" "")
        if [ "$game" -lt 1 ] || [ "$players" -ne 2 ]; then
                result "$name" FAIL "example_system_wide: $game DrawGame slices, $players DrawPlayer players (2 expected)"
        elif [ "$counters" -lt 1 ] || [ "$flows" -lt 1 ]; then
                result "$name" FAIL "example_shlib_track_event: $counters counter values, $flows flows"
        elif [ "${invalid:-0}" != 0 ]; then
                result "$name" FAIL "the service refused $invalid packets (tracectl summary)"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "trace_processor: $bad"
        else
                result "$name" PASS "DrawGame, DrawPlayer x2, $counters counter values, $flows flows"
        fi
}

# record_ours DIR NAME: tracectl records DIR/cfg from our traced on DIR/c
# into DIR/trace, then everything started is stopped; when that failed,
# NAME is reported as failed and 1 returned.
record_ours() {
        local d=$1 name=$2 st
        run_fg timeout 60 "$OURS_TRACECTL" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/trace" --no-summary \
                >"$d/tracectl.log" 2>&1
        st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$d/trace" ]; then
                result "$name" FAIL "tracectl exited $st: $(tail -n 2 "$d/tracectl.log" | tr '\n' ' ')"
                return 1
        fi
}

# Upstream traced_relay + traced_probes on N simulated machines (each relay
# with its own boot id in a private mount namespace, its own sockets) and
# our ftrace plugin on the host, all into our traced over TCP on loopback:
# trace_processor must show a machine row per remote machine and sched
# slices on each machine. Each machine records into its own tracefs
# instance (machine_name_filter picks the data source per machine).
pair_relay_to_ours() {
        local n=$1 name="upstream traced_relay x$1 -> our traced (TCP)"
        selected "$name" || return 0
        needs traced_relay traced_probes trace_processor_shell "ours:$OURS_TRACED" || { skip_missing "$name"; return; }
        if ! command -v unshare >/dev/null || ! ensure_instance; then
                result "$name" SKIP "needs root, unshare(1) and tracefs instances"
                return
        fi
        local d port i
        d=$(pairing_dir)
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p,127.0.0.1:$port" \
                --enable-relay-endpoint-on="127.0.0.1:$port" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket ($d/traced.log)"; stop_all; return; }
        {
                echo 'buffers { size_kb: 32768 fill_policy: RING_BUFFER }'
                echo "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"$INSTANCE\" } } machine_name_filter: \"host\" }"
        } >"$d/cfg"
        for i in $(seq "$n"); do
                mkdir -p "$TRACEFS/instances/$INSTANCE-m$i" || { result "$name" SKIP "cannot create tracefs instances"; stop_all; return; }
                printf '00000000-1111-2222-3333-%012d\n' "$i" >"$d/boot_id$i"
                start "$d" relay$i PERFETTO_RELAY_SOCK_NAME="127.0.0.1:$port" PERFETTO_PRODUCER_SOCK_NAME="$d/r$i" \
                        PERFETTO_MACHINE_NAME="remote$i" unshare -m sh -c \
                        "mount --bind '$d/boot_id$i' /proc/sys/kernel/random/boot_id && exec '$BIN/traced_relay'"
                wait_socket "$d/r$i" || { result "$name" FAIL "traced_relay $i: no socket ($d/relay$i.log)"; stop_all; return; }
                start "$d" probes$i PERFETTO_PRODUCER_SOCK_NAME="$d/r$i" "$BIN/traced_probes"
                echo "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"$INSTANCE-m$i\" } } machine_name_filter: \"remote$i\" }" >>"$d/cfg"
        done
        echo 'data_sources { config { name: "linux.process_stats" } }' >>"$d/cfg"
        echo 'trace_all_machines: true' >>"$d/cfg"
        echo 'duration_ms: 3000' >>"$d/cfg"
        wait_log "$d/traced.log" "machine .* remote$n" 10
        sleep 1
        local ok=0
        record_ours "$d" "$name" || ok=1
        for i in $(seq "$n"); do
                remove_instance "$TRACEFS/instances/$INSTANCE-m$i"
        done
        [ "$ok" = 0 ] || return
        local machines with_sched
        machines=$(tp_num "$d/trace" "select count(*) from machine where raw_id != 0")
        with_sched=$(tp_num "$d/trace" "select count(distinct c.machine_id) from sched s join cpu c on s.ucpu = c.id")
        if [ "$machines" -ne "$n" ]; then
                result "$name" FAIL "trace_processor shows $machines remote machines, not $n"
        elif [ "$with_sched" -ne $((n + 1)) ]; then
                result "$name" FAIL "sched slices on $with_sched machines, not $((n + 1))"
        else
                result "$name" PASS "$machines remote machines, sched slices on all $with_sched"
        fi
}

# Our producers behind upstream traced_relay on a simulated second machine
# (its own boot id, its own socket), into our traced over TCP: our ftrace
# plugin in traced-plugin-host and our example producer, both emulating
# shared memory as the relay's TCP link requires. trace_processor must
# show the remote machine with sched slices on it, and every packet of the
# example producer must be in the trace.
pair_our_producers_behind_relay() {
        local name="our plugin host + producer -> traced_relay -> our traced"
        selected "$name" || return 0
        needs traced_relay trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST" "ours:$OURS_PRODUCER" \
                "ours:$OURS_PLUGINS/ftrace.so" || { skip_missing "$name"; return; }
        if ! command -v unshare >/dev/null || ! ensure_instance; then
                result "$name" SKIP "needs root, unshare(1) and tracefs instances"
                return
        fi
        local d port
        d=$(pairing_dir)
        port=$(free_port)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p,127.0.0.1:$port" \
                --enable-relay-endpoint-on="127.0.0.1:$port" --consumer-socket="$d/c" --no-plugins --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket ($d/traced.log)"; stop_all; return; }
        mkdir -p "$TRACEFS/instances/$INSTANCE-r" || { result "$name" SKIP "cannot create a tracefs instance"; stop_all; return; }
        printf '00000000-1111-2222-3333-%012d\n' 77 >"$d/boot_id"
        # One mount namespace for the machine: the relay, our plugin host
        # and our producer all see its boot id.
        {
                echo "mount --bind '$d/boot_id' /proc/sys/kernel/random/boot_id || exit 1"
                echo "PERFETTO_RELAY_SOCK_NAME=127.0.0.1:$port PERFETTO_PRODUCER_SOCK_NAME='$d/r' PERFETTO_MACHINE_NAME=remote-ours '$BIN/traced_relay' >'$d/relay.log' 2>&1 &"
                echo "pids=\$!"
                echo "for i in \$(seq 100); do [ -S '$d/r' ] && break; sleep 0.1; done"
                echo "'$OURS_HOST' --socket '$d/r' '$OURS_PLUGINS/ftrace.so' >'$d/plugin-host.log' 2>&1 &"
                echo "pids=\"\$pids \$!\""
                echo "'$OURS_PRODUCER' --socket '$d/r' --packets 3000 --size 700 >'$d/producer.log' 2>&1 &"
                echo "pids=\"\$pids \$!\""
                # stop_all signals the whole group; this is for a TERM
                # to this shell alone.
                echo "trap 'kill \$pids 2>/dev/null; wait; exit 143' TERM"
                echo "wait"
        } >"$d/machine.sh"
        start "$d" machine unshare -m sh "$d/machine.sh"
        wait_log "$d/traced.log" "machine .* remote-ours" 10 ||
                { result "$name" FAIL "the relay did not introduce its machine ($d/traced.log)"; stop_all; return; }
        wait_log "$d/producer.log" "ready" 10 ||
                { result "$name" FAIL "our producer did not connect through the relay: $(tail -n 1 "$d/producer.log")"; stop_all; return; }
        sleep 1
        {
                echo 'buffers { size_kb: 32768 }'
                echo "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"$INSTANCE-r\" } } machine_name_filter: \"remote-ours\" }"
                # The producer writes its 2 MB in a few ms, faster than the
                # relay's link drains: it stalls rather than drops (a drop
                # would be reported, rightly, as a writer's packet loss).
                echo 'data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } machine_name_filter: "remote-ours" }'
                echo 'trace_all_machines: true'
                echo 'duration_ms: 3000'
        } >"$d/cfg"
        local ok=0
        record_ours "$d" "$name" || ok=1
        remove_instance "$TRACEFS/instances/$INSTANCE-r"
        [ "$ok" = 0 ] || return
        local machines sched written in_trace bad
        machines=$(tp_num "$d/trace" "select count(*) from machine where raw_id != 0")
        sched=$(tp_num "$d/trace" "select count(*) from sched s join cpu c on s.ucpu = c.id join machine m on c.machine_id = m.id where m.raw_id != 0")
        written=$(sed -n 's/.*wrote \([0-9]*\) packets.*/\1/p' "$d/producer.log" | awk '{ s += $1 } END { print s + 0 }')
        in_trace=$(summary_count "$d/trace" for_testing)
        # This VM's kernel leaves out some switch-outs in its own text too
        # (see pair_plugin_to_upstream): not a fault of the relay path.
        bad=$(bad_stats "$d/trace" "mismatched_sched_switch_tids")
        echo "machines=$machines sched=$sched written=$written in_trace=$in_trace" >"$d/figures"
        if [ "$machines" -ne 1 ]; then
                result "$name" FAIL "trace_processor shows $machines remote machines, not 1"
        elif [ "$sched" -lt 1 ]; then
                result "$name" FAIL "no sched slices on the remote machine from our ftrace plugin"
        elif [ "$written" -eq 0 ] || [ "$in_trace" != "$written" ]; then
                result "$name" FAIL "our producer wrote $written packets through the relay, the trace holds $in_trace"
        elif [ -n "$bad" ]; then
                result "$name" FAIL "the trace has $bad"
        else
                result "$name" PASS "1 remote machine, $sched sched slices on it, $in_trace of $written packets"
        fi
}

# A TCP proxy for the link-cut pairing: forwards 127.0.0.1:LISTEN to
# 127.0.0.1:TARGET; once CUT bytes went towards the target it forwards half
# of the next read and closes every connection (mid-frame), then forwards
# new connections in full.
LINK_CUT_PROXY='
import socket, sys, threading
listen, target, cut_after = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", listen))
ls.listen(16)
lock = threading.Lock()
state = {"sent": 0, "cut": False}
live = []
def close_all():
    for s in live:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def pump(a, b, upward):
    while True:
        try:
            data = a.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        with lock:
            if upward and not state["cut"]:
                state["sent"] += len(data)
                if state["sent"] >= cut_after:
                    state["cut"] = True
                    try:
                        b.sendall(data[: len(data) // 2])
                    except OSError:
                        pass
                    print("cut after", state["sent"], "bytes", flush=True)
                    close_all()
                    break
        try:
            b.sendall(data)
        except OSError:
            break
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    s = socket.create_connection(("127.0.0.1", target))
    with lock:
        live.extend([c, s])
    threading.Thread(target=pump, args=(c, s, True), daemon=True).start()
    threading.Thread(target=pump, args=(s, c, False), daemon=True).start()
'

# Upstream traced_relay with our producer behind it, its TCP link to our
# traced cut mid-frame while the session streams and then restored: the
# session keeps what arrived, the relay and the producer connect again, the
# data source starts anew in the running session, and the machine stays in
# the trace.
pair_relay_link_cut() {
        local name="traced_relay link cut mid-frame and restored -> our traced"
        selected "$name" || return 0
        needs traced_relay trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_PRODUCER" "ours:$OURS_TRACECTL" ||
                { skip_missing "$name"; return; }
        local d port pport
        d=$(pairing_dir)
        port=$(free_port)
        pport=$(free_port)
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p,127.0.0.1:$port" \
                --enable-relay-endpoint-on="127.0.0.1:$port" --consumer-socket="$d/c" --no-plugins --log-target=stderr
        wait_socket "$d/c" || { result "$name" FAIL "our traced: no consumer socket ($d/traced.log)"; stop_all; return; }
        start "$d" proxy python3 -c "$LINK_CUT_PROXY" "$pport" "$port" $((3 * 1024 * 1024))
        sleep 0.5
        start "$d" relay PERFETTO_RELAY_SOCK_NAME="127.0.0.1:$pport" PERFETTO_PRODUCER_SOCK_NAME="$d/r" \
                PERFETTO_MACHINE_NAME=remote-cut "$BIN/traced_relay"
        wait_socket "$d/r" || { result "$name" FAIL "traced_relay: no socket ($d/relay.log)"; stop_all; return; }
        start "$d" producer "$OURS_PRODUCER" --socket "$d/r" --packets 2000 --size 4000 --reconnect
        wait_log "$d/producer.log" "ready" 10 ||
                { result "$name" FAIL "our producer did not connect through the relay"; stop_all; return; }
        sleep 1
        {
                echo 'buffers { size_kb: 65536 }'
                echo 'data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } }'
                echo 'trace_all_machines: true'
                echo 'duration_ms: 6000'
        } >"$d/cfg"
        record_ours "$d" "$name" || return
        local cut reconnected in_trace machines
        cut=$(grep -c "^cut after" "$d/proxy.log")
        reconnected=$(grep -c "connected again" "$d/producer.log")
        in_trace=$(summary_count "$d/trace" for_testing)
        machines=$(tp_num "$d/trace" "select count(*) from machine where raw_id != 0")
        echo "cut=$cut reconnected=$reconnected in_trace=$in_trace machines=$machines" >"$d/figures"
        if [ "$cut" != 1 ]; then
                result "$name" FAIL "the link was not cut (proxy: $(tail -n 1 "$d/proxy.log"))"
        elif [ "$reconnected" -lt 1 ]; then
                result "$name" FAIL "our producer did not connect again through the relay: $(tail -n 2 "$d/producer.log" | tr '\n' ' ')"
        elif [ "$in_trace" -le 2000 ] || [ "$in_trace" -ge 4000 ]; then
                result "$name" FAIL "$in_trace packets: expected the part before the cut and all 2000 after"
        elif [ "$machines" -ne 1 ]; then
                result "$name" FAIL "trace_processor shows $machines remote machines, not 1"
        else
                result "$name" PASS "cut after 3 MB; $in_trace packets (the part before the cut, then 2000 after the reconnection)"
        fi
}

# ---- upstream perfetto CLI session features against our traced (#25) ----
#
# Each pairing starts our traced (with its plugins) on sockets of its own and
# drives it with upstream's perfetto CLI the way a user would.

# cli_traced DIR: our traced on DIR/p, DIR/c, and DIR/tmp as the CLI's TMPDIR
# (where --save-for-bugreport writes). Sets CLI_ENV for `env` before the CLI.
CLI_ENV=()
cli_traced() {
        local d=$1
        chmod 0711 "$d"
        mkdir -m 1777 "$d/tmp"
        CLI_ENV=(PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" TMPDIR="$d/tmp")
        start "$d" traced "$OURS_TRACED" --producer-socket="$d/p" --consumer-socket="$d/c" \
                --plugin-dir="$OURS_PLUGINS" --plugin-host="$OURS_HOST" --log-target=stderr
        wait_socket "$d/c" && wait_socket "$d/p"
}

# cli DIR LOG ARGS...: upstream's perfetto against our traced (60 s at most);
# its output appended to DIR/LOG.log, its exit status returned.
cli() {
        local d=$1 log=$2
        shift 2
        run_fg env "${CLI_ENV[@]}" timeout 60 "$BIN/perfetto" "$@" >>"$d/$log.log" 2>&1
}

# trigger DIR NAME: activates a trigger the way a user does, with a config
# that only holds activate_triggers.
trigger() {
        echo "activate_triggers: \"$2\"" | cli "$1" trigger --txt -c -
}

cli_case_start() {
        CASE=$1
        selected "$CASE" || return 1
        if ! needs perfetto trace_processor_shell "ours:$OURS_TRACED" "ours:$OURS_HOST"; then
                skip_missing "$CASE"
                return 1
        fi
        CD=$(pairing_dir)
        if ! cli_traced "$CD"; then
                result "$CASE" FAIL "our traced: no sockets ($CD/traced.log)"
                stop_all
                return 1
        fi
        return 0
}

# cli_fail WHAT: FAIL with the CLI's last words, and stop our traced.
cli_fail() {
        stop_all
        result "$CASE" FAIL "$1"
}

PROC_DS='data_sources { config { name: "linux.process_stats" process_stats_config { scan_all_processes_on_start: true } } }'

# A bugreport-scored background session: --save-for-bugreport writes
# TMPDIR/systrace.pftrace, --clone -1 clones it into -o, and
# --save-all-for-bugreport writes it under its bugreport_filename.
pair_cli_bugreport() {
        local mode=$1 want st n
        cli_case_start "upstream perfetto $mode -> our traced" || return 0
        want=${2//@D@/$CD}
        cat >"$CD/cfg" <<EOC
buffers { size_kb: 4096 }
$PROC_DS
duration_ms: 60000
bugreport_score: 10
bugreport_filename: "br-interop.pftrace"
unique_session_name: "br_session"
EOC
        cli "$CD" bg --background --txt -c "$CD/cfg" -o "$CD/main.pftrace" || { cli_fail "--background exited $?: $(tail -n 1 "$CD/bg.log")"; return; }
        sleep 2
        case $mode in
        --clone*) cli "$CD" cli $mode -o "$want" ;;
        *) cli "$CD" cli $mode ;;
        esac
        st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$want" ]; then
                result "$CASE" FAIL "exit $st, ${want#"$CD"/} $( [ -s "$want" ] && echo written || echo missing): $(tail -n 1 "$CD/cli.log")"
                return
        fi
        n=$(tp_num "$want" "select count(*) from process where pid > 1")
        if [ "$n" -lt 2 ]; then
                result "$CASE" FAIL "${want#"$CD"/}: trace_processor finds $n processes (process_stats scan)"
                return
        fi
        result "$CASE" PASS "${want#"$CD"/}: $n processes"
}

# Clone of a write_into_file session: the clone holds what was already
# written to the file and what was still in the buffer.
pair_cli_clone_write_into_file() {
        cli_case_start "upstream perfetto --clone-by-name (write_into_file) -> our traced" || return 0
        if ! ensure_instance; then
                stop_all
                result "$CASE" SKIP "cannot create a tracefs instance (not root?)"
                return
        fi
        local m="$TRACEFS/instances/$INSTANCE/trace_marker" before after st
        cat >"$CD/cfg" <<EOC
buffers { size_kb: 4096 }
data_sources { config { name: "linux.ftrace" ftrace_config { ftrace_events: "ftrace/print" instance_name: "$INSTANCE" } } }
duration_ms: 60000
write_into_file: true
file_write_period_ms: 500
unique_session_name: "wif_session"
EOC
        cli "$CD" bg --background --txt -c "$CD/cfg" -o "$CD/main.pftrace" || { cli_fail "--background exited $?"; return; }
        sleep 1
        echo "C|$$|interop_wif_before|1" >"$m"
        sleep 2
        echo "C|$$|interop_wif_after|2" >"$m"
        cli "$CD" cli --clone-by-name wif_session -o "$CD/clone.pftrace"
        st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$CD/clone.pftrace" ]; then
                result "$CASE" FAIL "--clone-by-name exited $st: $(tail -n 1 "$CD/cli.log")"
                return
        fi
        before=$(tp_num "$CD/clone.pftrace" "select count(*) from counter_track where name = 'interop_wif_before'")
        after=$(tp_num "$CD/clone.pftrace" "select count(*) from counter_track where name = 'interop_wif_after'")
        if [ "$before" -lt 1 ] || [ "$after" -lt 1 ]; then
                result "$CASE" FAIL "clone: marker written before the file write: $before, after: $after (trace_processor counter tracks)"
                return
        fi
        result "$CASE" PASS "clone has the markers from before and after the file write"
}

# A config with no buffers, detached then attached and stopped: the output
# file gets the trace config.
pair_cli_detach_no_buffers() {
        cli_case_start "upstream perfetto --detach/--attach --stop (no buffers) -> our traced" || return 0
        printf 'duration_ms: 30000\nwrite_into_file: true\n' >"$CD/cfg"
        local st1 st2 n
        cli "$CD" cli --detach=nobuf --txt -c "$CD/cfg" -o "$CD/out.pftrace"
        st1=$?
        cli "$CD" cli --attach=nobuf --stop
        st2=$?
        stop_all
        if [ "$st1" != 0 ] || [ "$st2" != 0 ]; then
                result "$CASE" FAIL "--detach exited $st1, --attach --stop $st2: $(tail -n 1 "$CD/cli.log")"
                return
        fi
        n=$(tp_num "$CD/out.pftrace" "select count(*) from metadata where name = 'trace_config_pbtxt'
                                        and str_value like '%duration_ms: 30000%'")
        if [ "$n" != 1 ]; then
                result "$CASE" FAIL "out.pftrace: trace_processor finds no trace config with duration_ms: 30000"
                return
        fi
        result "$CASE" PASS "both exit 0, the trace holds its config"
}

# A detached session whose duration ends is freed: --is_detached says no
# (exit 2, where a live one gives 0) and --attach fails.
pair_cli_detached_freed() {
        cli_case_start "upstream perfetto --is_detached/--attach (ended) -> our traced" || return 0
        printf 'buffers { size_kb: 1024 }\nduration_ms: 1000\nwrite_into_file: true\n' >"$CD/cfg"
        printf 'buffers { size_kb: 1024 }\nduration_ms: 60000\nwrite_into_file: true\n' >"$CD/cfg-long"
        local st_det st_live st_is st_att
        cli "$CD" cli --detach=short --txt -c "$CD/cfg" -o "$CD/short.pftrace"
        st_det=$?
        cli "$CD" cli --detach=long --txt -c "$CD/cfg-long" -o "$CD/long.pftrace"
        cli "$CD" cli --is_detached=long
        st_live=$?
        sleep 4
        cli "$CD" cli --is_detached=short
        st_is=$?
        cli "$CD" cli --attach=short
        st_att=$?
        stop_all
        if [ "$st_det" != 0 ] || [ "$st_live" != 0 ] || [ "$st_is" != 2 ] || [ "$st_att" = 0 ]; then
                result "$CASE" FAIL "--detach $st_det, --is_detached on a live one $st_live (want 0), on the ended one $st_is (want 2), --attach $st_att (want non-0)"
                return
        fi
        if [ ! -s "$CD/short.pftrace" ]; then
                result "$CASE" FAIL "the ended session wrote no short.pftrace"
                return
        fi
        result "$CASE" PASS "--is_detached 0 live, 2 ended; --attach exit $st_att"
}

# trigger_session DIR MODE TRIGGER STOP_DELAY_MS TIMEOUT_MS OUT: the
# recording CLI in the background (its pid in CLI_PID).
CLI_PID=""
trigger_session() {
        cat >"$1/cfg" <<EOC
buffers { size_kb: 4096 }
$PROC_DS
trigger_config { trigger_mode: $2 trigger_timeout_ms: $5 triggers { name: "$3" stop_delay_ms: $4 } }
EOC
        launch env "${CLI_ENV[@]}" timeout 120 "$BIN/perfetto" --txt -c "$1/cfg" -o "$6" >>"$1/cli.log" 2>&1
        CLI_PID=$LAUNCHED
        sleep 1.5
}

# STOP_TRACING: the trigger ends the session; the trace has the trigger
# packet, which trace_processor shows.
pair_cli_stop_trigger() {
        cli_case_start "upstream perfetto STOP_TRACING trigger -> our traced" || return 0
        local st tst n
        trigger_session "$CD" STOP_TRACING interop_stop 500 600000 "$CD/out.pftrace"
        trigger "$CD" interop_stop
        tst=$?
        finish "$CLI_PID"
        st=$?
        stop_all
        if [ "$tst" != 0 ] || [ "$st" != 0 ] || [ ! -s "$CD/out.pftrace" ]; then
                result "$CASE" FAIL "activate_triggers exited $tst, the recording $st: $(tail -n 1 "$CD/cli.log")"
                return
        fi
        n=$(tp_num "$CD/out.pftrace" "select count(*) from slice where name = 'interop_stop'")
        if [ "$n" != 1 ]; then
                n=$(tp_num "$CD/out.pftrace" "select count(*) from slice where name like '%interop_stop%'")
                result "$CASE" FAIL "trace_processor: $n slices for the trigger (want 1)"
                return
        fi
        result "$CASE" PASS "trigger slice in trace_processor, 600 s timeout not reached"
}

# START_TRACING: after the trigger, the trigger's stop_delay_ms is the
# session's duration.
pair_cli_start_trigger() {
        cli_case_start "upstream perfetto START_TRACING trigger -> our traced" || return 0
        local st n dur
        trigger_session "$CD" START_TRACING interop_start 1500 600000 "$CD/out.pftrace"
        trigger "$CD" interop_start
        finish "$CLI_PID"
        st=$?
        stop_all
        if [ "$st" != 0 ] || [ ! -s "$CD/out.pftrace" ]; then
                result "$CASE" FAIL "the recording exited $st (timeout 120 s; 600 s trigger timeout): $(tail -n 1 "$CD/cli.log")"
                return
        fi
        n=$(tp_num "$CD/out.pftrace" "select count(*) from slice where name = 'interop_start'")
        dur=$(tp_num "$CD/out.pftrace" "select count(*) from metadata where name = 'trace_config_pbtxt'
                                        and str_value like '%duration_ms: 1500%'")
        if [ "$n" != 1 ] || [ "$dur" != 1 ]; then
                result "$CASE" FAIL "trace_processor: $n trigger slices (want 1), $dur configs with duration_ms: 1500 (want 1)"
                return
        fi
        result "$CASE" PASS "ended by stop_delay_ms (duration_ms: 1500 in its config), trigger slice"
}

# CLONE_SNAPSHOT: each trigger writes a snapshot to <out>.0, <out>.1, ...
pair_cli_clone_snapshot() {
        cli_case_start "upstream perfetto CLONE_SNAPSHOT trigger -> our traced" || return 0
        local st f n bad=""
        trigger_session "$CD" CLONE_SNAPSHOT interop_snap 100 8000 "$CD/out.pftrace"
        trigger "$CD" interop_snap
        sleep 1.5
        trigger "$CD" interop_snap
        finish "$CLI_PID"
        st=$?
        stop_all
        if [ "$st" != 0 ]; then
                result "$CASE" FAIL "the recording exited $st: $(tail -n 1 "$CD/cli.log")"
                return
        fi
        for f in "$CD/out.pftrace.0" "$CD/out.pftrace.1"; do
                if [ ! -s "$f" ]; then
                        bad="$bad ${f##*/} missing;"
                        continue
                fi
                n=$(tp_num "$f" "select count(*) from process where pid > 1")
                [ "$n" -ge 2 ] || bad="$bad ${f##*/} has $n processes;"
        done
        [ -e "$CD/out.pftrace.2" ] && bad="$bad out.pftrace.2 written for 2 triggers;"
        if [ -n "$bad" ]; then
                result "$CASE" FAIL "${bad% ;}"
                return
        fi
        result "$CASE" PASS "out.pftrace.0 and .1, each with the process scan"
}

pair_cli_session_features() {
        pair_cli_bugreport --save-for-bugreport "@D@/tmp/systrace.pftrace"
        pair_cli_bugreport "--clone -1" "@D@/clone.pftrace"
        pair_cli_bugreport --save-all-for-bugreport "@D@/tmp/br-interop.pftrace"
        pair_cli_clone_write_into_file
        pair_cli_detach_no_buffers
        pair_cli_detached_freed
        pair_cli_stop_trigger
        pair_cli_start_trigger
        pair_cli_clone_snapshot
}

# ---- main ----------------------------------------------------------------

echo "traced interop with upstream Perfetto (PERFETTO_BIN_DIR=${BIN:-unset})"
command -v setsid >/dev/null || { echo "interop: needs setsid(1) (util-linux)"; exit 2; }
if [ -z "$BIN" ] || [ ! -d "$BIN" ]; then
        echo "interop: PERFETTO_BIN_DIR ${BIN:+($BIN) }does not name a directory: it must hold upstream Perfetto v58+"
        echo "         traced, traced_probes, perfetto, trace_processor_shell (and traced_perf for its pairing)."
        BIN=""
fi
[ "$(id -u)" = 0 ] || echo "interop: not root: the ftrace pairings will be skipped or fail"
echo

pair_probes_to_ours
pair_plugin_to_upstream
pair_client_to_upstream "whole packets" "--packets 2000 --size 100"
pair_client_to_upstream "large packets" "--packets 100 --size 20000 --smb-kb 2048"
pair_client_to_upstream "fragmented streamed" "--packets 500 --size 3000 --stream --smb-kb 2048"
pair_client_to_upstream "multi-threaded" "--packets 1000 --size 200 --threads 4 --smb-kb 2048"
pair_client_to_upstream "dropping (small SMB)" "--packets 2000 --size 900 --threads 1 --delay-ms 500" \
        "traced_buf_trace_writer_packet_loss|traced_buf_sequence_packet_loss" drop
pair_client_to_upstream "dropping large (small SMB)" "--packets 1000 --size 20000 --threads 1 --delay-ms 500" \
        "traced_buf_trace_writer_packet_loss|traced_buf_sequence_packet_loss" drop
pair_client_to_upstream "large packets" "--packets 100 --size 20000" "" "" tcp
pair_client_to_upstream "fragmented streamed" "--packets 500 --size 3000 --stream" "" "" tcp
pair_client_to_upstream "multi-threaded" "--packets 1000 --size 200 --threads 4" "" "" relay
pair_tracectl_to_upstream
pair_ours_to_trace_processor
pair_perf_to_ours
pair_perf_plugin_to_trace_processor
pair_sysstats_to_trace_processor
pair_heap_cli_to_trace_processor
pair_rotation_to_trace_processor
pair_snapshots_to_trace_processor
pair_cli_system_sources
pair_sdk_examples_tracectl
pair_relay_to_ours 1
pair_relay_to_ours 4
pair_our_producers_behind_relay
pair_relay_link_cut
pair_cli_session_features

echo
echo "$n_pass passed, $n_fail failed, $n_skip skipped"
if [ "$n_fail" -gt 0 ]; then
        exit 1
fi
if [ "$n_pass" -eq 0 ]; then
        exit 77
fi
exit 0
