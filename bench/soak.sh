#!/bin/sh
# Soak test (run by hand, not in CI): 64 producers across 8 concurrent
# sessions (ring and discard buffers, the last one write_into_file) for 10
# minutes, producers SIGKILLed and restarted at random, the first session's
# consumer detaching and attaching again every 15 s. Prints the service
# core's RSS and descriptors every 10 s, then per session the packets
# written (committed), read, reported lost (chunks, from TraceStats) and
# unaccounted (must be 0). Exits non-zero if any packet is unaccounted.
#
#   bench/soak.sh [-b BUILD_DIR] [-t SECONDS] [-p PRODUCERS] [-s SESSIONS]
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
build="$top/build"
seconds=600
producers=64
sessions=8
while getopts b:t:p:s: o; do
        case "$o" in
        b) build=$(cd "$OPTARG" && pwd) ;;
        t) seconds=$OPTARG ;;
        p) producers=$OPTARG ;;
        s) sessions=$OPTARG ;;
        *) echo "usage: $0 [-b BUILD_DIR] [-t SECONDS] [-p PRODUCERS] [-s SESSIONS]" >&2; exit 2 ;;
        esac
done

make -C "$build" traced bench/soak-driver >/dev/null
work=$(mktemp -d /tmp/traced-soak-XXXXXX)
# traced and the driver (with the producers it forks) in groups of their
# own, stopped on every way out; a signal exits through the EXIT trap
# (it used to run the cleanup and let the script go on).
trap 'spawn_stop; rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

spawn "$build/traced" --no-plugins --producer-socket="$work/producer.sock" \
        --consumer-socket="$work/consumer.sock" 2>"$work/traced.log"
traced_pid=$spawned_pid
for _ in $(seq 100); do
        [ -S "$work/consumer.sock" ] && break
        sleep 0.1
done

echo "soak: $producers producers, $sessions sessions, ${seconds}s; traced pid $traced_pid"
rc=0
spawn "$build/bench/soak-driver" --producer-socket="$work/producer.sock" --consumer-socket="$work/consumer.sock" \
        --pid="$traced_pid" --seconds="$seconds" --producers="$producers" --sessions="$sessions" \
        --dir="$work"
spawn_wait "$spawned_pid" || rc=$?
if ! kill -0 "$traced_pid" 2>/dev/null; then
        echo "soak: traced died" >&2
        tail -n 40 "$work/traced.log" >&2
        rc=1
fi
echo "soak: traced log: $(grep -c . "$work/traced.log") lines, $(grep -ci 'warn\|error' "$work/traced.log" || true) warnings or errors"
exit $rc
