#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# tools/run.sh, the README's one command for a new user, on a tree of
# stand-ins (its own script, the rest scripts that note being called: the
# dependencies' check, autogen.sh, configure, make, traced, tracectl,
# systemd-socket-activate, getent, systemd-sysusers): it says what each
# step does; a second run leaves autogen.sh and configure alone and
# builds in seconds; a run says when it adds the user traced; the trace
# it records is kept in the build directory, and it says where and how to
# open it.
set -eu
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
dir=$(mktemp -d "${TMPDIR:-/tmp}/check-run.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
fail() {
        echo "FAIL: $*"
        echo "== calls"
        cat "$calls" 2>/dev/null || true
        exit 1
}

src=$dir/src
calls=$dir/calls
mkdir -p "$src/tools" "$src/units/sysusers.d" "$dir/bin"
cp "$top/tools/run.sh" "$src/tools/run.sh"
: >"$src/units/sysusers.d/traced.conf"
: >"$calls"

# A stand-in that notes its name and arguments, then runs the rest of its
# script.
standin() {
        file=$1
        shift
        {
                echo '#!/bin/sh'
                echo "echo \"$(basename "$file") \$*\" >>'$calls'"
                cat
        } >"$file"
        chmod +x "$file"
}

standin "$src/tools/install-deps.sh" <<'S'
echo "install-deps: all build dependencies present"
S
# configure writes the Makefile; make writes the programs.
standin "$src/autogen.sh" <<S
cat >'$src/configure' <<'C'
#!/bin/sh
echo "configure \$*" >>'$calls'
: >config.status
printf 'all:\n\techo make >>$calls\n\tmkdir -p plugins/.libs\n\tcp $dir/tracectl $dir/traced .\n\ttouch traced-plugin-host\n' >Makefile
C
chmod +x '$src/configure'
S
standin "$dir/traced" <<'S'
exec sleep 60
S
standin "$dir/tracectl" <<'S'
case " $* " in
*" query "*) echo "linux.ftrace linux.perf" ;;
*" record "*)
        while [ $# -gt 1 ] && [ "$1" != -o ]; do shift; done
        echo "a trace" >"$2"
        echo "Samples: 42"
        ;;
esac
S
standin "$dir/bin/systemd-socket-activate" <<'S'
while [ $# -gt 0 ]; do
        case "$1" in
        -l) python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$2"; shift 2 ;;
        --fdname=*) shift ;;
        *) break ;;
        esac
done
exec "$@"
S
standin "$dir/bin/getent" <<'S'
[ "$2" = traced ] && exit 2
echo "root:x:0:0:root:/root:/bin/sh"
S
standin "$dir/bin/systemd-sysusers" <<'S'
S
standin "$dir/bin/mountpoint" <<'S'
S
PATH=$dir/bin:$PATH
export PATH

# First run: every step, each said.
sh "$src/tools/run.sh" --build-only >"$dir/out1" 2>&1 || { cat "$dir/out1"; fail "the first build failed"; }
cat "$dir/out1"
for what in "run.sh: checking the build dependencies" "run.sh: generating ./configure" "run.sh: configuring " \
        "run.sh: building with make" "run.sh: built in "; do
        grep -q "^$what" "$dir/out1" || fail "the first run does not say \"$what...\""
done
for c in autogen.sh configure make; do
        grep -q "^$c" "$calls" || fail "the first run did not run $c"
done

# Second run, nothing changed: no autogen.sh, no configure, make decides.
: >"$calls"
sh "$src/tools/run.sh" --build-only >"$dir/out2" 2>&1 || { cat "$dir/out2"; fail "the second build failed"; }
cat "$dir/out2"
if grep -q "^autogen.sh" "$calls" || grep -q "^configure" "$calls"; then
        fail "the second run ran autogen.sh or configure again"
fi
grep -q "^make" "$calls" || fail "the second run did not run make"
grep -q "run.sh: generating\|run.sh: configuring" "$dir/out2" && fail "the second run says it generates or configures"

# A whole run: the user added and said so, the trace kept and said where.
: >"$calls"
sh "$src/tools/run.sh" >"$dir/out3" 2>&1 || { cat "$dir/out3"; fail "the run failed"; }
cat "$dir/out3"
grep -q "^systemd-sysusers .*units/sysusers.d/traced.conf" "$calls" || fail "the user traced was not added"
grep -q "^run.sh: adding the system user and group \"traced\"" "$dir/out3" || fail "the run does not say it adds the user traced"
trace=$(sed -n 's/^run.sh: the trace is kept: \([^ ]*\).*/\1/p' "$dir/out3")
[ -n "$trace" ] || fail "the run does not say where the trace is"
case "$trace" in
"$src/build/traces/"*.pftrace) ;;
*) fail "the trace is not kept in the build directory: $trace" ;;
esac
[ -s "$trace" ] || fail "the trace $trace is not there after the run"
grep -q "tracectl report $trace" "$dir/out3" || fail "the run does not say how to report the trace"
grep -q "ui.perfetto.dev" "$dir/out3" || fail "the run does not name the Perfetto UI"
echo "PASS"
