#!/bin/bash
# Producer throughput: one writer thread streams VOLUME_MB of packets into
# a tracer that streams them into a file, for three tracers in the same
# run, each with the same memory for its buffers:
#   traced    ours: example-producer (libtraced-client) into traced, a
#             32 MB buffer written into the file every 100 ms
#             (tracectl record), the stall policy so nothing is dropped
#   upstream  the same writer and config into upstream Perfetto's traced
#             (PERFETTO_BIN_DIR; skipped with a note when unset)
#   lttng     blob-writer (LTTng-UST) into lttng-sessiond/consumerd, a
#             blocking per-UID channel of 32 MB (4 x 4 MB sub-buffers per
#             CPU on 2 CPUs; 16 MB per CPU elsewhere)
# Both writers take their payloads from one pre-filled buffer, so they
# measure the tracers, not the making of bytes.
#
# Rounds alternate which packet size and which tracer go first. Per
# packet size and tracer, over the rounds (min/median/max): MB/s as the
# writer sees it, CPU per MB of writer + service, of the service alone
# (traced: supervisor + core; LTTng: sessiond + consumerd), and packets
# lost. Then the ratios of ours to each peer: of the medians, and taken
# round by round (min/median/max), which this host's stretches of slow
# memory and CPU (a run's CPU per MB can double from one minute to the
# next) affect far less. Every trace file
# is checked afterwards (traced: its packet count; LTTng: its size); any
# failure, and any packet lost by ours or by LTTng, stops the benchmark
# with a message and a non-zero status. Upstream's traced only drains its
# buffer on the period, so it loses data at these rates: that is printed,
# and its CPU figures are per MB that reached its trace.
#
# Every run starts with the page cache written back and dropped, so that
# no run pays for the writeback of the one before it. After the rounds,
# one more run of ours per packet size under `perf record -g` leaves its
# profile in PROFILE_DIR (default: the current directory) as
# traced-profile-SIZE.data and .txt (perf report), so anyone can see where
# the service's time goes.
#
# Run as root from a build directory:
#   ../bench/producer-throughput.sh [VOLUME_MB] [SIZES...]
# (defaults: 2048 MB in 1 KB and 64 KB packets). Environment: ROUNDS
# (default 5), PERFETTO_BIN_DIR, FILL_POLICY (RING_BUFFER or DISCARD),
# PROFILE_DIR, NO_PROFILE=1. Needs lttng-tools and liblttng-ust-dev
# (Debian) for the LTTng peer, linux-perf for the profile. Not part of
# make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)
die() { echo "producer-throughput: $*" >&2; exit 1; }
[ -x "$build/traced" ] && [ -x "$build/example-producer" ] && [ -x "$build/tracectl" ] ||
        die "run from the build directory"
volume_mb=${1:-2048}
[ $# -gt 0 ] && shift
sizes=${*:-1024 65536}
rounds=${ROUNDS:-5}
BIN=${PERFETTO_BIN_DIR:-}
# shellcheck source=bench/lib.sh
. "$src/lib.sh"
work=$(mktemp -d /tmp/traced-tput-XXXXXX)
cleanup() {
        spawn_stop
        lttng --no-sessiond destroy tput >/dev/null 2>&1 || true
        # Gone before the script ends: a run started right after this one
        # would otherwise take the dying daemon for one it may use.
        if [ -n "${sessiond:-}" ]; then
                kill "$sessiond" 2>/dev/null || true
                for _ in $(seq 50); do kill -0 "$sessiond" 2>/dev/null || break; sleep 0.1; done
                ! kill -0 "$sessiond" 2>/dev/null || kill -KILL "$sessiond" 2>/dev/null || true
        fi
        [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

peers="traced"
if [ -n "$BIN" ] && [ -x "$BIN/traced" ]; then
        peers="$peers upstream"
else
        echo "PERFETTO_BIN_DIR names no upstream traced: upstream is not measured" >&2
fi
if command -v lttng >/dev/null && command -v lttng-sessiond >/dev/null &&
   echo "#include <lttng/tracepoint.h>" | cc -E - >/dev/null 2>&1; then
        peers="$peers lttng"
        cc -O2 -I"$src/lttng-ust" -o "$work/blob-writer" "$src/lttng-ust/blob-writer.c" -llttng-ust -ldl
        if ! pgrep -x lttng-sessiond >/dev/null; then
                lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || die "lttng-sessiond did not start"
                sleep 1
                sessiond=$(pgrep -o -x lttng-sessiond || true)
        fi
else
        echo "LTTng-UST is not installed (apt-get install lttng-tools liblttng-ust-dev): not measured" >&2
fi



wait_for() {
        for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.05; done
        return 1
}

# One traced (ours or upstream): prints "MB/s writer_cpu_s service_cpu_s lost MB_kept".
run_traced() {
        local which=$1 size=$2 packets=$3 profile=${4:-} d=$work/run svc core
        rm -rf "$d" && mkdir -p "$d"
        drop_caches
        if [ "$which" = traced ]; then
                spawn "$build/traced" --producer-socket="$d/p" --consumer-socket="$d/c" --no-plugins \
                        --log-level=warning 2>"$d/service.log"
        else
                spawn env PERFETTO_PRODUCER_SOCK_NAME="$d/p" PERFETTO_CONSUMER_SOCK_NAME="$d/c" "$BIN/traced" \
                        >"$d/service.log" 2>&1
        fi
        svc=$spawned_pid
        wait_for "$d/c" && wait_for "$d/p" || die "$which did not start ($(tail -n 2 "$d/service.log"))"
        sleep 0.2
        core=$(pgrep -P "$svc" | tr '\n' ' ')
        spawn /usr/bin/time -f "%U %S" -o "$d/writer.time" "$build/example-producer" --socket "$d/p" \
                --packets "$packets" --size "$size" --smb-kb 4096 --page-kb 64 --once 2>"$d/writer.log"
        local wpid=$spawned_pid
        for _ in $(seq 200); do grep -q ready "$d/writer.log" 2>/dev/null && break; sleep 0.05; done
        cat >"$d/cfg" <<CFG
buffers { size_kb: 32768 fill_policy: ${FILL_POLICY:-RING_BUFFER} }
data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } }
write_into_file: true
file_write_period_ms: 100
CFG
        # shellcheck disable=SC2086
        local before after
        before=$(cpu_of_pids "$svc" $core)
        local ppid=
        if [ -n "$profile" ]; then
                # shellcheck disable=SC2086
                spawn perf record -g -o "$profile" -p "$(echo $core | tr ' ' ,)" >/dev/null 2>&1
                ppid=$spawned_pid
        fi
        spawn "$build/tracectl" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/t.pftrace" --no-summary \
                >"$d/tracectl.log" 2>&1
        local cpid=$spawned_pid
        for _ in $(seq 6000); do grep -q wrote "$d/writer.log" 2>/dev/null && break; sleep 0.05; done
        grep -q wrote "$d/writer.log" || die "$which: the writer did not finish ($(tail -n 1 "$d/writer.log"))"
        sleep 0.5
        kill -INT "$cpid"
        spawn_wait "$cpid" || die "$which: tracectl failed ($(tail -n 2 "$d/tracectl.log"))"
        if [ -n "$ppid" ]; then
                kill -INT "$ppid" 2>/dev/null || true # perf may have ended with its target
                spawn_wait "$ppid" || true
        fi
        # shellcheck disable=SC2086
        after=$(cpu_of_pids "$svc" $core)
        spawn_wait "$wpid" || true
        kill "$svc"
        spawn_wait "$svc" || true
        local secs dropped in_trace
        secs=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$d/writer.log")
        dropped=$(sed -n 's/.*dropped \([0-9]*\),.*/\1/p' "$d/writer.log")
        in_trace=$("$build/tracectl" summary "$d/t.pftrace" 2>/dev/null | awk '$1 == "for_testing" { print $2; exit }')
        [ -n "$secs" ] && [ -n "$in_trace" ] || die "$which: no figures (writer: $(tail -n 1 "$d/writer.log"))"
        [ "$which" = upstream ] || [ "$in_trace" = "$packets" ] ||
                die "$which: $((packets - in_trace)) of $packets packets of $size bytes lost"
        echo "$volume_mb $secs $(tail -n 1 "$d/writer.time") $before $after $packets $in_trace ${dropped:-0}" |
                awk '{ printf "%.1f %.3f %.3f %d %.3f\n", $1 / $2, $3 + $4, $6 - $5, $7 - $8, $1 * $8 / $7 }'
}

run_lttng() {
        local size=$1 packets=$2 d=$work/run
        rm -rf "$d" && mkdir -p "$d"
        drop_caches
        local per_cpu=$(( 32 / $(nproc) ))
        [ "$per_cpu" -ge 4 ] || per_cpu=4
        # --no-sessiond everywhere: the lttng client would otherwise start
        # a daemon of its own when none runs, and nothing would stop it.
        lttng --no-sessiond create tput --output="$d/lttng" >/dev/null || die "lttng create failed"
        lttng --no-sessiond enable-channel -u --buffers-uid --subbuf-size=4M --num-subbuf=$((per_cpu / 4)) \
                --blocking-timeout=inf ch >/dev/null || die "lttng enable-channel failed"
        lttng --no-sessiond enable-event -u -c ch 'traced_bench:*' >/dev/null || die "lttng enable-event failed"
        lttng --no-sessiond start >/dev/null || die "lttng start failed"
        local lpids before after
        lpids=$(pgrep -d ' ' -f 'lttng-(sessiond|consumerd)' || true)
        # shellcheck disable=SC2086
        before=$(cpu_of_pids $lpids)
        LTTNG_UST_ALLOW_BLOCKING=1 /usr/bin/time -f "%U %S" -o "$d/writer.time" \
                "$work/blob-writer" "$packets" "$size" 2>"$d/writer.log" || die "blob-writer failed"
        lttng --no-sessiond stop >"$d/stop.log" 2>&1 || die "lttng stop failed"
        # shellcheck disable=SC2086
        after=$(cpu_of_pids $lpids)
        lttng --no-sessiond destroy >/dev/null
        local secs lost bytes
        secs=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$d/writer.log")
        lost=$(sed -n 's/.* \([0-9][0-9]*\) events* discarded.*/\1/p' "$d/stop.log" | head -n 1)
        bytes=$(du -sb "$d/lttng" | cut -f1)
        # The trace holds every payload, plus its headers.
        [ "$bytes" -ge $((volume_mb * 1024 * 1024)) ] ||
                die "lttng: the trace has $bytes bytes, less than the $volume_mb MB written"
        [ "${lost:-0}" = 0 ] || die "lttng: $lost events discarded"
        echo "$volume_mb $secs $(tail -n 1 "$d/writer.time") $before $after ${lost:-0} $packets" |
                awk '{ printf "%.1f %.3f %.3f %d %.3f\n", $1 / $2, $3 + $4, $6 - $5, $7, $1 * ($8 - $7) / $8 }'
}

median() { stats | cut -d/ -f2; }

echo "$(nproc) CPUs; $volume_mb MB per run, $rounds rounds; tracers: $peers"
for r in $(seq "$rounds"); do
        order_sizes=$sizes
        [ $((r % 2)) = 0 ] && order_sizes=$(echo "$sizes" | tr ' ' '\n' | tac | tr '\n' ' ')
        # Rotate the tracers so each goes first in turn.
        set -- $peers
        for _ in $(seq $(( (r - 1) % $# ))); do set -- "${@:2}" "$1"; done
        order_peers="$*"
        for size in $order_sizes; do
                packets=$((volume_mb * 1024 * 1024 / size))
                for p in $order_peers; do
                        # In this shell, not in $(...): a die in them
                        # exits the script, whose EXIT trap stops what
                        # they started.
                        case $p in
                        traced | upstream) run_traced "$p" "$size" "$packets" >>"$work/$p-$size.rows" ;;
                        lttng) run_lttng "$size" "$packets" >>"$work/$p-$size.rows" ;;
                        esac
                done
        done
        echo "round $r done" >&2
done

printf "\n%-7s %-9s %-22s %-26s %-26s %s\n" size tracer "MB/s" "cpu s/MB (writer+service)" "service cpu s/MB" lost
for size in $sizes; do
        for p in $peers; do
                f=$work/$p-$size.rows
                rate=$(cut -d' ' -f1 "$f" | stats)
                whole=$(awk '{ print ($2 + $3) / $5 }' "$f" | stats)
                svc=$(awk '{ print $3 / $5 }' "$f" | stats)
                lost=$(awk '{ s += $4 } END { print s }' "$f")
                printf "%-7s %-9s %-22s %-26s %-26s %s\n" "$size" "$p" "$rate" "$whole" "$svc" "$lost"
        done
        for p in $peers; do
                [ "$p" = traced ] && continue
                o=$work/traced-$size.rows
                t=$work/$p-$size.rows
                echo "$(cut -d' ' -f1 "$o" | median) $(cut -d' ' -f1 "$t" | median)" \
                     "$(awk '{ print ($2 + $3) / $5 }' "$o" | median) $(awk '{ print ($2 + $3) / $5 }' "$t" | median)" \
                     "$(awk '{ print $3 / $5 }' "$o" | median) $(awk '{ print $3 / $5 }' "$t" | median)" |
                        awk -v s="$size" -v p="$p" '{ printf "%-7s traced / %s (medians): MB/s %.2f, cpu/MB %.2f, service cpu/MB %.2f\n",
                                                       s, p, $1 / $2, $3 / $4, $5 / $6 }'
                # The same ratios taken within each round (the two runs
                # minutes apart at most), then over the rounds: this host's
                # slow and fast stretches then weigh on both sides alike.
                printf "%-7s traced / %s (per round, min/median/max): MB/s %s, cpu/MB %s, service cpu/MB %s\n" \
                        "$size" "$p" \
                        "$(paste -d' ' "$o" "$t" | awk '{ printf "%.2f\n", $1 / $6 }' | stats)" \
                        "$(paste -d' ' "$o" "$t" | awk '{ printf "%.2f\n", (($2 + $3) / $5) / (($7 + $8) / $10) }' | stats)" \
                        "$(paste -d' ' "$o" "$t" | awk '{ printf "%.2f\n", ($3 / $5) / ($8 / $10) }' | stats)"
        done
done

if [ -z "${NO_PROFILE:-}" ] && command -v perf >/dev/null; then
        pdir=${PROFILE_DIR:-$build}
        mkdir -p "$pdir"
        for size in $sizes; do
                run_traced traced "$size" $((volume_mb * 1024 * 1024 / size)) "$pdir/traced-profile-$size.data" >/dev/null
                perf report -i "$pdir/traced-profile-$size.data" --no-children --stdio 2>/dev/null |
                        head -n 200 >"$pdir/traced-profile-$size.txt" || true
                echo "profile of traced's core at $size-byte packets: $pdir/traced-profile-$size.data (.txt)"
        done
fi
