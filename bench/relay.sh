#!/bin/bash
# Relayed producers: N example producers (libtraced-client; shared memory
# emulated, as behind any relay) on one upstream traced_relay, all
# streaming at once over TCP on loopback into the central service: our
# traced, then upstream traced, in the same run with the same relay,
# producers, consumer (upstream's perfetto CLI) and config. Every round
# moves TOTAL_MB split evenly over the N producers, with the stall policy
# so that nothing need be lost.
#
# Per service, N and round: aggregate MB/s (the data over the time from
# the session's start until the last producer finished writing), the
# service's CPU seconds per MB (utime + stime of all its processes over
# the whole session, read-back included), and the packets that did not
# reach the trace. Then, per N, the median, min and max over the rounds,
# and the ratio ours/upstream of the medians.
#
# Run as root from a build directory, with upstream Perfetto's binaries:
#   PERFETTO_BIN_DIR=/path/to/bin ../bench/relay.sh [ROUNDS] [TOTAL_MB] [N...]
# (defaults: 5 rounds, 128 MB, N = 1 4 16). Not part of make check.
set -u

build=$(pwd)
BIN=${PERFETTO_BIN_DIR:-}
rounds=${1:-5}
total_mb=${2:-128}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
counts=${*:-1 4 16}
size=4000

for b in "$build/traced" "$build/example-producer" "$build/tracectl"; do
        [ -x "$b" ] || { echo "relay.sh: run from the build directory ($b missing)" >&2; exit 2; }
done
for b in traced traced_relay perfetto; do
        [ -n "$BIN" ] && [ -x "$BIN/$b" ] ||
                { echo "relay.sh: PERFETTO_BIN_DIR must hold upstream's traced, traced_relay and perfetto" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d /tmp/traced-relay-bench-XXXXXX)
cleanup() {
        spawn_stop
        [ -n "${KEEP:-}" ] && echo "relay.sh: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for() {
        for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.05; done
        return 1
}

# The pid and all its descendants.
tree() {
        local p c
        for p in "$@"; do
                echo "$p"
                for c in $(pgrep -P "$p"); do tree "$c"; done
        done
}


now() { date +%s.%N; }

# run_one SERVICE N DIR: one round; prints "MB/s cpu_s/MB lost MB".
run_one() {
        local svc=$1 n=$2 d=$3 port svc_pid i
        mkdir -p "$d"
        port=$(free_port)
        if [ "$svc" = ours ]; then
                spawn "$build/traced" --producer-socket="$d/p,127.0.0.1:$port" --enable-relay-endpoint-on="127.0.0.1:$port" \
                        --consumer-socket="$d/c" --no-plugins --log-level=warning >"$d/service.log" 2>&1
        else
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$d/p,127.0.0.1:$port" PERFETTO_CONSUMER_SOCK_NAME="$d/c" \
                        "$BIN/traced" --enable-relay-endpoint-on="127.0.0.1:$port" >"$d/service.log" 2>&1
        fi
        svc_pid=$spawned_pid
        wait_for "$d/c" && wait_for "$d/p" || { echo "relay.sh: $svc did not start ($d/service.log)" >&2; return 1; }
        sleep 0.2
        spawn env PERFETTO_RELAY_SOCK_NAME="127.0.0.1:$port" PERFETTO_PRODUCER_SOCK_NAME="$d/r" "$BIN/traced_relay" \
                >"$d/relay.log" 2>&1
        wait_for "$d/r" || { echo "relay.sh: traced_relay did not start ($d/relay.log)" >&2; return 1; }
        local packets=$((total_mb * 1024 * 1024 / size / n))
        for i in $(seq "$n"); do
                spawn "$build/example-producer" --socket "$d/r" --packets "$packets" --size "$size" --once \
                        >"$d/producer$i.log" 2>&1
        done
        for i in $(seq "$n"); do
                for _ in $(seq 200); do grep -q ready "$d/producer$i.log" 2>/dev/null && break; sleep 0.05; done
        done
        sleep 0.5
        cat >"$d/cfg" <<CFG
buffers { size_kb: $(( (total_mb + total_mb / 4 + 16) * 1024 )) fill_policy: DISCARD }
data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } }
trace_all_machines: true
CFG
        local pids before t0 t1 after
        pids=$(tree "$svc_pid")
        # shellcheck disable=SC2086
        before=$(cpu_of_pids $pids)
        t0=$(now)
        spawn env PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/perfetto" --txt -c "$d/cfg" -o "$d/trace" \
                >"$d/perfetto.log" 2>&1
        local cons=$spawned_pid
        local done_n=0
        for _ in $(seq 1200); do
                done_n=$(grep -l "wrote" "$d"/producer*.log 2>/dev/null | wc -l)
                [ "$done_n" -ge "$n" ] && break
                sleep 0.05
        done
        t1=$(now)
        # Whatever is still in flight gets in before the stop.
        sleep 1
        kill -INT "$cons"
        spawn_wait "$cons"
        pids=$(tree "$svc_pid")
        # shellcheck disable=SC2086
        after=$(cpu_of_pids $pids)
        spawn_stop
        [ "$done_n" -ge "$n" ] || { echo "relay.sh: $svc, N=$n: producers did not finish" >&2; return 1; }
        local written in_trace mb
        written=$(sed -n 's/.*wrote \([0-9]*\) packets.*/\1/p' "$d"/producer*.log | awk '{ s += $1 } END { print s + 0 }')
        in_trace=$("$build/tracectl" summary "$d/trace" 2>/dev/null | awk '$1 == "for_testing" { print $2; exit }')
        mb=$(echo "$n $packets $size" | awk '{ print $1 * $2 * $3 / 1048576 }')
        # The last producer finished writing at t1; its data was on its
        # way over the relay by then.
        echo "$mb $t0 $t1 $before $after $((n * packets)) ${in_trace:-0} $written" |
                awk '{ printf "%.1f %.5f %d %.1f\n", $1 / ($3 - $2), ($5 - $4) / $1, $6 - $7, $1 }'
        rm -f "$d/trace"
}

# stats: median min max of the numbers on stdin.
stats() {
        sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                             printf "%s %s %s\n", m, v[1], v[NR] }'
}

echo "relay bench: $rounds rounds of $total_mb MB in $size-byte packets; upstream from $BIN"
printf "%-4s %-9s %26s %32s %6s\n" N service "MB/s (median min max)" "service cpu s/MB (median min max)" lost
for n in $counts; do
        for svc in ours upstream; do
                : >"$work/$svc-$n.txt"
        done
        for r in $(seq "$rounds"); do
                # Alternate which goes first, so neither always has the
                # warmer machine.
                order="ours upstream"
                [ $((r % 2)) = 0 ] && order="upstream ours"
                for svc in $order; do
                        run_one "$svc" "$n" "$work/$svc-$n-$r" >>"$work/$svc-$n.txt" || exit 1
                done
        done
        for svc in ours upstream; do
                rate=$(awk '{ print $1 }' "$work/$svc-$n.txt" | stats)
                cpu=$(awk '{ print $2 }' "$work/$svc-$n.txt" | stats)
                lost=$(awk '{ s += $3 } END { print s }' "$work/$svc-$n.txt")
                printf "%-4s %-9s %26s %32s %6s\n" "$n" "$svc" "$rate" "$cpu" "$lost"
                eval "med_rate_$svc=${rate%% *} med_cpu_$svc=${cpu%% *}"
        done
        # shellcheck disable=SC2154
        echo "$n $med_rate_ours $med_rate_upstream $med_cpu_ours $med_cpu_upstream" |
                awk '{ printf "%-4s ratio ours/upstream: MB/s %.2f, service cpu/MB %.2f\n", $1, $2 / $3, $4 / $5 }'
done
