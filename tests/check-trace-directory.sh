#!/bin/sh
# The real traced (socket-activated, the ftrace plugin loaded) as a
# distribution runs it, with clients of three kinds: a member of the
# consumer socket's group, an unprivileged user outside it, and root.
#   - output_path: the service writes only into its trace directory; a
#     path outside it, a relative one, one with "..", a symbolic link out of
#     it are refused with a clear error and no file is touched;
#   - a user outside the group is refused at the socket;
#   - SIGHUP (systemctl reload) re-reads traced.conf while a session runs:
#     a bad file is reported and the old configuration stays; a good one
#     moves the trace directory; the running session ends normally;
#   - tracectl started while traced starts waits for its socket; with no
#     traced to wait for, it fails at once and says how to start one.
set -u
builddir=$(cd "${TOP_BUILDDIR:-.}" && pwd)
if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: needs root (switches users and starts traced as root)"
        exit 77
fi
for t in systemd-socket-activate setpriv; do
        if ! command -v $t >/dev/null 2>&1; then
                echo "SKIP: $t is not installed"
                exit 77
        fi
done

# Ids no one else uses: the consumer group, a member, a stranger. The core
# runs as nobody (65534), which owns the trace directories.
gid=61414
member=61415
stranger=61416
core=65534

tmp=$(mktemp -d "${TMPDIR:-/tmp}/traced-check-trace-dir-XXXXXX")
chmod 0755 "$tmp"
mkdir -p "$tmp/traces" "$tmp/traces2" "$tmp/outside"
for d in "$tmp/traces" "$tmp/traces2"; do
        chown "$core:$gid" "$d"
        chmod 2770 "$d"
done
cat >"$tmp/traced.conf" <<CONF
[service]
user = $core
trace_directory = $tmp/traces
CONF

# What runs in the background (traced, tracectl waiting or recording) is
# stopped and reaped on every way out.
activator='' early='' long='' starting=''
cleanup() {
        for p in $long $early $activator $starting; do
                kill "$p" 2>/dev/null
        done
        for p in $long $early $activator $starting; do
                wait "$p" 2>/dev/null
        done
        rm -rf "$tmp"
}
trap cleanup EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
fail() {
        echo "FAIL: $*"
        echo "--- traced log"; cat "$tmp/traced.log"
        exit 1
}

# With no traced running, a socket that is not there fails at once.
if out=$("$builddir/tracectl" --socket "$tmp/consumer.sock" query 2>&1); then
        fail "tracectl connected to nothing"
fi
echo "$out" | grep -q "waiting" && fail "tracectl waited with no traced running: $out"
echo "$out" | grep -q "systemctl start traced.socket" || fail "no hint how to start the service: $out"
echo "ok: no service: $(echo "$out" | tail -n 1)"

# tracectl started while the service starts waits for its socket (the
# README's "Try it" lines start traced in the background and record at
# once). A script named traced whose command line names the socket stands
# for a traced that has not bound it yet.
# It runs while $tmp/traced.run exists.
printf '#!/bin/sh\nwhile [ -e "$0.run" ]; do sleep 0.1; done\n' >"$tmp/traced"
chmod 0755 "$tmp/traced"
: >"$tmp/traced.run"
"$tmp/traced" --consumer-socket="$tmp/consumer.sock" &
starting=$!
# Once it runs as that script (not yet, on a loaded machine, just after the
# fork): tracectl looks for it by command line.
for _ in $(seq 200); do
        tr '\0' ' ' <"/proc/$starting/cmdline" 2>/dev/null | grep -q -- "--consumer-socket=$tmp/consumer.sock" && break
        sleep 0.05
done
"$builddir/tracectl" --socket "$tmp/consumer.sock" query >"$tmp/early.out" 2>&1 &
early=$!
sleep 1
systemd-socket-activate -l "$tmp/producer.sock" -l "$tmp/consumer.sock" --fdname=producer:consumer \
        "$builddir/traced" --config="$tmp/traced.conf" --plugin-dir="$builddir/plugins/.libs" \
        --plugin-host="$builddir/traced-plugin-host" --log-target=stderr >"$tmp/traced.log" 2>&1 &
activator=$!
for _ in $(seq 200); do [ -S "$tmp/consumer.sock" ] && break; sleep 0.05; done
[ -S "$tmp/consumer.sock" ] || fail "no consumer socket"
st=0
wait "$early" || st=$?
early=
[ "$st" = 0 ] || fail "tracectl started before traced did not wait for it: $(cat "$tmp/early.out")"
grep -q "waiting for the tracing service" "$tmp/early.out" || fail "tracectl did not wait: $(cat "$tmp/early.out")"
rm -f "$tmp/traced.run"
wait "$starting" 2>/dev/null
starting=
echo "ok: tracectl started 1 s before traced listened waited for it"
# As traced.socket sets it up: the consumer socket belongs to the group.
chgrp "$gid" "$tmp/consumer.sock"
chmod 0660 "$tmp/consumer.sock"

as_member() { setpriv --reuid=$member --regid=$gid --clear-groups -- "$@"; }
as_stranger() { setpriv --reuid=$stranger --regid=$stranger --clear-groups -- "$@"; }
tracectl() { "$builddir/tracectl" --socket "$tmp/consumer.sock" "$@"; }

config() { # output_path [duration_ms]
        printf 'buffers { size_kb: 1024 }\nduration_ms: %s\nwrite_into_file: true\noutput_path: "%s"\n' \
                "${2:-300}" "$1"
        printf 'data_sources { config { name: "linux.process_stats" } }\n'
}

# The first connection starts traced (and waits for it).
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" query >/dev/null || fail "a member cannot query"

echo "== a member of the group: output_path inside the trace directory"
config "$tmp/traces/ok.pftrace" >"$tmp/ok.cfg"
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/ok.cfg" --txt --no-summary ||
        fail "recording into the trace directory failed"
[ -s "$tmp/traces/ok.pftrace" ] || fail "no trace in the trace directory"
[ "$(stat -c %g "$tmp/traces/ok.pftrace")" = "$gid" ] || fail "the trace does not belong to the group (setgid)"
as_member head -c 1 "$tmp/traces/ok.pftrace" >/dev/null || fail "the member cannot read the trace"
echo "ok"

echo "== a member of the group: paths the service refuses"
: >"$tmp/outside/victim"
ln -s "$tmp/outside/victim" "$tmp/traces/link"
ln -s "$tmp/outside" "$tmp/traces/linkdir"
before=$(sha256sum /etc/passwd)
for p in /etc/passwd "$tmp/outside/new.pftrace" relative.pftrace "$tmp/traces/../outside/new.pftrace" \
        "$tmp/traces/link" "$tmp/traces/linkdir/new.pftrace" "$tmp/traces"; do
        config "$p" >"$tmp/bad.cfg"
        if out=$(as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/bad.cfg" --txt \
                --no-summary 2>&1); then
                fail "output_path $p was accepted"
        fi
        echo "$out" | grep -q "output_path" || fail "no clear error for $p: $out"
        echo "refused $p: $(echo "$out" | tail -n 1)"
done
[ "$(sha256sum /etc/passwd)" = "$before" ] || fail "/etc/passwd changed"
[ ! -s "$tmp/outside/victim" ] || fail "the symlink's target was written"
[ -z "$(ls "$tmp/outside" | grep -v '^victim$')" ] || fail "a file was created outside: $(ls "$tmp/outside")"

echo "== a session the service refuses leaves output_path as it was"
printf 'an older trace' >"$tmp/traces/kept.pftrace"
chown "$core:$gid" "$tmp/traces/kept.pftrace"
config "$tmp/traces/kept.pftrace" 720000000 >"$tmp/refused.cfg"
if out=$(as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/refused.cfg" --txt \
        --no-summary 2>&1); then
        fail "a 200 h session was accepted"
fi
[ "$(cat "$tmp/traces/kept.pftrace")" = "an older trace" ] || fail "a refused session changed output_path: $out"
config "$tmp/traces/refused-new.pftrace" 720000000 >"$tmp/refused.cfg"
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/refused.cfg" --txt --no-summary \
        >/dev/null 2>&1 && fail "a 200 h session was accepted"
[ ! -e "$tmp/traces/refused-new.pftrace" ] || fail "a refused session left a new output_path file"
echo "ok: $(echo "$out" | tail -n 1)"

echo "== a user outside the group is refused at the socket"
if out=$(as_stranger "$builddir/tracectl" --socket "$tmp/consumer.sock" query 2>&1); then
        fail "a user outside the group could connect"
fi
echo "$out" | grep -q "Permission denied" || fail "unexpected error for the stranger: $out"
echo "$out" | grep -q 'group "traced"' || fail "the stranger is not told about the group: $out"
echo "ok: $out"

echo "== reload: a bad file is reported, the old configuration stays, sessions go on"
supervisor=$activator # systemd-socket-activate execs traced in place
config "$tmp/traces/long.pftrace" 6000 >"$tmp/long.cfg"
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/long.cfg" --txt --no-summary \
        >"$tmp/long.out" 2>&1 &
long=$!
sleep 1
cp "$tmp/traced.conf" "$tmp/traced.conf.good"
printf '[service]\ntrace_directory = relative/dir\n' >"$tmp/traced.conf"
kill -HUP "$supervisor"
for _ in $(seq 100); do grep -q "Not reloading" "$tmp/traced.log" && break; sleep 0.05; done
grep "Not reloading" "$tmp/traced.log" | grep -q "traced.conf:2" || fail "the bad file was not reported with its line"
config "$tmp/traces/after-bad.pftrace" >"$tmp/ab.cfg"
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/ab.cfg" --txt --no-summary ||
        fail "after a bad reload, the old trace directory no longer works"
echo "ok: $(grep "Not reloading" "$tmp/traced.log" | head -n 1)"

printf '[service]\nuser = %s\ntrace_directory = %s/traces2\n' "$core" "$tmp" >"$tmp/traced.conf"
kill -HUP "$supervisor"
for _ in $(seq 100); do grep -q "go into $tmp/traces2" "$tmp/traced.log" && break; sleep 0.05; done
grep -q "go into $tmp/traces2" "$tmp/traced.log" || fail "the good file was not applied"
config "$tmp/traces2/new.pftrace" >"$tmp/new.cfg"
as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/new.cfg" --txt --no-summary ||
        fail "the new trace directory does not work"
config "$tmp/traces/old.pftrace" >"$tmp/old.cfg"
if as_member "$builddir/tracectl" --socket "$tmp/consumer.sock" record -c "$tmp/old.cfg" --txt --no-summary \
        >/dev/null 2>&1; then
        fail "the old trace directory still works after the reload"
fi
st=0
wait "$long" || st=$?
long=
[ "$st" = 0 ] || fail "the session running across the reloads failed: $(cat "$tmp/long.out")"
[ -s "$tmp/traces/long.pftrace" ] || fail "the session running across the reloads wrote nothing"
kill -0 "$supervisor" || fail "traced exited"
echo "ok: the session begun before the reloads completed ($(stat -c %s "$tmp/traces/long.pftrace") bytes)"
