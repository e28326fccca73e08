# Sourced by the tests: a scratch directory, and the service to talk to.
#   start_service [standalone] [traced options...]
# Where systemd runs (and "standalone" is not asked for), the installed
# sockets: the first client starts traced.service. Elsewhere a traced of
# our own on sockets in the scratch directory, stopped on exit. Both export
# PERFETTO_CONSUMER_SOCK_NAME and PERFETTO_PRODUCER_SOCK_NAME.
set -eu
tmp=$(mktemp -d "${AUTOPKGTEST_TMP:-${TMPDIR:-/tmp}}/traced-test-XXXXXX")
traced_pid=
cleanup() {
        if [ -n "$traced_pid" ]; then
                kill "$traced_pid" 2>/dev/null || true
                wait "$traced_pid" 2>/dev/null || true
        fi
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
        echo "FAIL: $*"
        for f in "$tmp"/*.log "$tmp"/*.out; do
                if [ -f "$f" ]; then echo "== $f"; cat "$f"; fi
        done
        exit 1
}

# As sd_booted(3) tells: systemd is PID 1.
systemd_runs() {
        [ -d /run/systemd/system ]
}

start_service() {
        if [ "${1:-}" != standalone ] && systemd_runs; then
                export PERFETTO_CONSUMER_SOCK_NAME=/run/traced/consumer.sock
                export PERFETTO_PRODUCER_SOCK_NAME=/run/traced/producer.sock
                mode=systemd
                return 0
        fi
        [ "${1:-}" = standalone ] && shift
        export PERFETTO_CONSUMER_SOCK_NAME="$tmp/c.sock"
        export PERFETTO_PRODUCER_SOCK_NAME="$tmp/p.sock"
        /usr/sbin/traced --consumer-socket="$tmp/c.sock" --producer-socket="$tmp/p.sock" "$@" 2>"$tmp/traced.log" &
        traced_pid=$!
        for _ in $(seq 100); do
                [ -S "$tmp/c.sock" ] && tracectl query >/dev/null 2>&1 && break
                sleep 0.1
        done
        tracectl query >/dev/null 2>&1 || fail "the standalone traced did not answer on $tmp/c.sock"
        mode=standalone
}

# wait_ds NAME: until a producer registered data source NAME.
wait_ds() {
        for _ in $(seq 100); do
                tracectl query 2>/dev/null | grep -q "$1" && return 0
                sleep 0.1
        done
        fail "data source $1 never registered"
}

# for_testing OUTPUT: how many for_testing packets tracectl record's summary counts.
for_testing() {
        sed -n 's/^  for_testing *\([0-9]*\)$/\1/p' "$1"
}
