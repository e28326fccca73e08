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
if [ -f "$top/config.status" ]; then
        # Configured in place (./configure in the source directory, as
        # "Building by hand" may have done): build there.
        build=$top
else
        ./autogen.sh >/dev/null
        build=$top/build
        mkdir -p "$build"
fi
cd "$build"
[ -f Makefile ] || "$top/configure" >configure.out
make -j"$(nproc 2>/dev/null || echo 2)" >make.out 2>&1 || { tail -n 50 make.out; exit 1; }

# The service core drops to the traced user, as a package would create it.
if ! getent passwd traced >/dev/null && command -v systemd-sysusers >/dev/null; then
        systemd-sysusers "$top/units/sysusers.d/traced.conf" || true
fi

run=$(mktemp -d /tmp/traced-run-XXXXXX)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
# systemd-socket-activate execs traced in place: $activator is traced's
# supervisor.
systemd-socket-activate -l "$run/producer.sock" -l "$run/consumer.sock" --fdname=producer:consumer \
        ./traced --plugin-dir="$PWD/plugins/.libs" --plugin-host="$PWD/traced-plugin-host" \
        >"$run/traced.log" 2>&1 &
activator=$!
finish() {
        status=$?
        kill "$activator" 2>/dev/null || true
        wait "$activator" 2>/dev/null || true
        if [ "$status" -ne 0 ]; then
                echo "== traced log"
                cat "$run/traced.log"
        fi
        rm -rf "$run"
}
trap finish EXIT
# The activator binds the sockets a moment after it starts (tracectl waits
# for a starting service it can see, but not for one still being forked);
# record waits for the plugin's data sources.
for _ in $(seq 100); do
        [ -S "$run/consumer.sock" ] && break
        sleep 0.1
done
echo "== tracectl query"
./tracectl --socket "$run/consumer.sock" query >/dev/null
for _ in $(seq 100); do
        ./tracectl --socket "$run/consumer.sock" query | grep -q linux.ftrace && break
        sleep 0.1
done
./tracectl --socket "$run/consumer.sock" query

echo "== processes: supervisor, service core, plugin hosts (from /proc)"
children=$(cat /proc/"$activator"/task/*/children 2>/dev/null || true)
for pid in $activator $children; do
        [ -r "/proc/$pid/status" ] || continue
        uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
        user=$(getent passwd "$uid" | cut -d: -f1)
        printf '%-8s %-16s user %-8s CapEff %s\n' "$pid" "$(cat "/proc/$pid/comm")" "${user:-$uid}" \
                "$(awk '/^CapEff/ {print $2}' "/proc/$pid/status")"
done
echo "== tracectl record -t 3s sched/sched_switch sched/sched_waking -o $run/trace.pftrace"
./tracectl --socket "$run/consumer.sock" record -t 3s -b 16mb sched/sched_switch sched/sched_waking \
        -o "$run/trace.pftrace"
