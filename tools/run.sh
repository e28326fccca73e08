#!/bin/sh
# The main job on a fresh Debian 12 machine: install the dependencies,
# build traced and tracectl, start traced the way systemd does (socket
# activation, through systemd-socket-activate), record a trace with the
# default quick configuration and print its summary.
#
# Until the producer plugins land (ftrace, perf, bpfstack), nothing on
# the system serves linux.ftrace or linux.process_stats, so the trace holds
# the service's own packets (config, clocks, system info, service events,
# statistics) and whatever producers are connected.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/install-deps.sh"
cd "$top"
./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || ../configure >configure.out
make -j"$(nproc 2>/dev/null || echo 2)" >make.out 2>&1 || { tail -n 50 make.out; exit 1; }

run=$(mktemp -d /tmp/traced-run-XXXXXX)
systemd-socket-activate -l "$run/producer.sock" -l "$run/consumer.sock" --fdname=producer:consumer \
        ./traced >"$run/traced.log" 2>&1 &
activator=$!
trap 'kill $activator 2>/dev/null; wait $activator 2>/dev/null; echo "traced log: $run/traced.log"' EXIT
for _ in $(seq 100); do [ -S "$run/consumer.sock" ] && break; sleep 0.05; done

echo "== tracectl query"
./tracectl --socket "$run/consumer.sock" query
echo "== tracectl record -t 3s sched/sched_switch sched/sched_waking -o $run/trace.pftrace"
./tracectl --socket "$run/consumer.sock" record -t 3s -b 16mb sched/sched_switch sched/sched_waking \
        -o "$run/trace.pftrace"
