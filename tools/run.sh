#!/bin/sh
# The main job on a fresh Debian 12 machine: install the dependencies,
# build traced, its plugins and tracectl, start traced the way systemd
# does (socket activation, through systemd-socket-activate) with the
# plugins, record a real system trace (scheduling events, the process
# tree and a CPU profile of every process) and print its summary. The
# trace is kept under the build directory. Needs root (tracefs, perf).
#
# The plugin hosts run as the traced-plugin user (else nobody) only when
# that user can execute the build's plugin host: build under directories
# everyone may search (/usr/src, /opt, /srv). A build in /root (mode 0700)
# works too: traced runs its plugin hosts as root, each holding only its
# plugin's capabilities, and warns once per plugin (shown below).
#
#   tools/run.sh [--build-only]
#
# Each step says what it does. A second run builds only what changed:
# ./autogen.sh runs when there is no ./configure, configure when the build
# directory has none of its output (make reruns both itself when
# configure.ac or a Makefile.am changes).
set -eu

build_only=no
for a in "$@"; do
        case "$a" in
        --build-only) build_only=yes ;;
        -h | --help)
                sed -n '2,/^set -eu/{/^#/s/^# \{0,1\}//p}' "$0"
                exit 0
                ;;
        *)
                echo "usage: $0 [--build-only]" >&2
                exit 2
                ;;
        esac
done

say() {
        printf 'run.sh: %s\n' "$*"
}

# Seconds since the step began, for the step's last line.
step_start=0
step() {
        say "$*"
        step_start=$(date +%s)
}
took() {
        echo "$(($(date +%s) - step_start)) s"
}

top=$(cd "$(dirname "$0")/.." && pwd)
step "checking the build dependencies (tools/install-deps.sh: Debian packages, apt-get when one is missing)"
"$top/tools/install-deps.sh"
cd "$top"
if [ -f "$top/config.status" ]; then
        # Configured in place (./configure in the source directory, as
        # "Building by hand" may have done): build there.
        build=$top
else
        build=$top/build
        mkdir -p "$build"
        if [ ! -x "$top/configure" ]; then
                step "generating ./configure (./autogen.sh; once: later runs leave it to make)"
                ./autogen.sh >"$build/autogen.log" 2>&1 || {
                        cat "$build/autogen.log"
                        exit 1
                }
        fi
fi
cd "$build"
if [ ! -f Makefile ] || [ ! -f config.status ]; then
        step "configuring $build (configure; output in $build/configure.log)"
        "$top/configure" >configure.log 2>&1 || {
                tail -n 30 configure.log
                say "configure failed; the whole output is in $build/configure.log"
                exit 1
        }
fi
jobs=$(nproc 2>/dev/null || echo 2)
step "building with make -j$jobs in $build (output in $build/make.log; about 15 minutes on two CPUs the first time, seconds when nothing changed)"
make -j"$jobs" >make.log 2>&1 || {
        tail -n 50 make.log
        say "the build failed; the whole output is in $build/make.log"
        exit 1
}
say "built in $(took)"
if [ "$build_only" = yes ]; then
        say "built; run $top/tools/run.sh without --build-only to start traced and record"
        exit 0
fi

# The service core drops to the traced user, as a package would create it.
if ! getent passwd traced >/dev/null; then
        if command -v systemd-sysusers >/dev/null; then
                step "adding the system user and group \"traced\" (systemd-sysusers $top/units/sysusers.d/traced.conf): traced's service core runs as it; 'userdel traced' removes it"
                systemd-sysusers "$top/units/sysusers.d/traced.conf" || say "could not add the user traced: the service core runs as nobody"
        else
                say "no user \"traced\" and no systemd-sysusers to add it: the service core runs as nobody"
        fi
fi

traces=$build/traces
mkdir -p "$traces"
trace=$traces/run-$(date +%Y%m%d-%H%M%S).pftrace
run=$(mktemp -d "${TMPDIR:-/tmp}/traced-run-XXXXXX")
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
step "starting traced (systemd-socket-activate, its sockets and log in $run, removed at the end)"
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
trap 'exit 130' INT TERM
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
if grep -q "its host runs as root" "$run/traced.log"; then
        say "the plugin hosts' user cannot run the plugin host of $build (a directory above it is not searchable by all): the hosts of plugins that declare no capability to read past that (below) run as root, each with only its plugin's capabilities; build under /usr/src, /opt or /srv for the sandbox (README.md). traced says:"
        grep "its host runs as root" "$run/traced.log"
fi
step "recording 3 s: scheduling, the process tree and every CPU's stacks at 99 Hz"
echo "== tracectl record -t 3s --perf 99 sched/sched_switch sched/sched_waking -o $trace"
./tracectl --socket "$run/consumer.sock" record -t 3s -b 32mb --perf 99 sched/sched_switch sched/sched_waking \
        -o "$trace"
ln -sf "$(basename "$trace")" "$traces/latest.pftrace"
say "the trace is kept: $trace (and $traces/latest.pftrace)"
say "look at it again with: $build/tracectl summary $trace"
say "where the CPU time went: $build/tracectl report $trace (--svg flame.svg for a flamegraph)"
say "in the Perfetto UI: open https://ui.perfetto.dev and \"Open trace file\" (read in the browser, nothing uploaded)"
