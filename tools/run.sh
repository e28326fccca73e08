#!/bin/sh
# The main job on a fresh Debian 12 machine: install the dependencies,
# build traced, its ftrace plugin and tracectl, start traced the way
# systemd does (socket activation, through systemd-socket-activate) with
# the plugin, record a real system trace with the default quick
# configuration (scheduling events and the process tree) and print its
# summary. Needs root (tracefs).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/install-deps.sh"
cd "$top"
./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || ../configure >configure.out
make -j"$(nproc 2>/dev/null || echo 2)" >make.out 2>&1 || { tail -n 50 make.out; exit 1; }

# The service core drops to the traced user, as a package would create it.
if ! getent passwd traced >/dev/null && command -v systemd-sysusers >/dev/null; then
        systemd-sysusers "$top/units/sysusers.d/traced.conf" || true
fi

run=$(mktemp -d /tmp/traced-run-XXXXXX)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
systemd-socket-activate -l "$run/producer.sock" -l "$run/consumer.sock" --fdname=producer:consumer \
        ./traced --plugin-dir="$PWD/plugins/.libs" --plugin-host="$PWD/traced-plugin-host" \
        >"$run/traced.log" 2>&1 &
activator=$!
trap 'kill $activator 2>/dev/null; wait $activator 2>/dev/null; echo "traced log: $run/traced.log"' EXIT
for _ in $(seq 100); do [ -S "$run/consumer.sock" ] && break; sleep 0.05; done
# The first connection activates traced, which starts the plugin host.
./tracectl --socket "$run/consumer.sock" query >/dev/null
for _ in $(seq 100); do
        ./tracectl --socket "$run/consumer.sock" query | grep -q linux.ftrace && break
        sleep 0.1
done

echo "== tracectl query"
./tracectl --socket "$run/consumer.sock" query
echo "== processes: supervisor, service core, plugin hosts"
tracedpid=$(pgrep -o -f "traced --plugin-dir=$PWD/plugins/.libs" || true)
for pid in $tracedpid $(pgrep -P "${tracedpid:-0}" || true); do
        printf '%-8s %-16s user %-8s CapEff %s\n' "$pid" "$(cat /proc/$pid/comm)" \
                "$(ps -o user= -p "$pid")" "$(awk '/^CapEff/ {print $2}' /proc/$pid/status)"
done
echo "== tracectl record -t 3s sched/sched_switch sched/sched_waking -o $run/trace.pftrace"
./tracectl --socket "$run/consumer.sock" record -t 3s -b 16mb sched/sched_switch sched/sched_waking \
        -o "$run/trace.pftrace"
