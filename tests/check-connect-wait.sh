#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# tracectl waits for a service that is being started the way tools/run.sh
# and the README start it, systemd-socket-activate execing traced: a query
# issued before the sockets exist waits for them instead of failing at
# once. The activator here is a script of that name that binds late
# (after a second), so the window is always there.
set -eu
builddir=${TOP_BUILDDIR:-.}
if ! command -v systemd-socket-activate >/dev/null; then
        echo "SKIP: systemd-socket-activate is not installed (package systemd)"
        exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/check-connect-wait.XXXXXX")
activator=
cleanup() {
        if [ -n "$activator" ]; then
                kill "$activator" 2>/dev/null || true
                wait "$activator" 2>/dev/null || true
        fi
        rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$dir/bin"
# Its comm is "systemd-socket-" (the name cut to 15 characters), as the
# real one's.
cat >"$dir/bin/systemd-socket-activate" <<SCRIPT
#!/bin/sh
sleep 1
exec $(command -v systemd-socket-activate) "\$@"
SCRIPT
chmod +x "$dir/bin/systemd-socket-activate"
"$dir/bin/systemd-socket-activate" -l "$dir/producer.sock" -l "$dir/consumer.sock" --fdname=producer:consumer \
        "$builddir/traced" --no-plugins --log-target=stderr >"$dir/traced.log" 2>&1 &
activator=$!
# Until the activator runs as itself (a forked shell not yet exec'd is not a
# service being started).
for _ in $(seq 100); do
        [ "$(cat "/proc/$activator/comm" 2>/dev/null)" = systemd-socket- ] && break
        sleep 0.05
done
if ! "$builddir/tracectl" --socket "$dir/consumer.sock" query >"$dir/query.out" 2>"$dir/query.err"; then
        echo "FAIL: tracectl query did not wait for the service being started:"
        cat "$dir/query.err"
        exit 1
fi
grep -q "waiting for the tracing service" "$dir/query.err" || {
        echo "FAIL: tracectl did not say it waited (the sockets were there already?)"
        cat "$dir/query.err"
        exit 1
}
echo "tracectl query waited for systemd-socket-activate's sockets: ok"
