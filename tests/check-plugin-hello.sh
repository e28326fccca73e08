#!/bin/sh
# Builds examples/plugin-hello out of tree with nothing but
# `pkg-config --cflags traced-plugin` (pointed at this build's .pc and
# headers), runs it under traced and checks its counter packets arrive.
set -eu
top=${TOP_SRCDIR:?} build=${TOP_BUILDDIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/traced-hello-XXXXXX")
tp=
trap 'if [ -n "$tp" ]; then kill "$tp" 2>/dev/null || true; fi; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cflags=$(PKG_CONFIG_PATH="$build" pkg-config --define-variable=includedir="$top/include" --cflags traced-plugin)
mkdir "$tmp/plugins"
${CC:-cc} -O2 -Wall -Wextra -Werror -shared -fPIC $cflags "$top/examples/plugin-hello/hello.c" -o "$tmp/plugins/hello.so"
"$build/traced" --producer-socket="$tmp/p.sock" --consumer-socket="$tmp/c.sock" \
        --plugin-dir="$tmp/plugins" --plugin-host="$build/traced-plugin-host" 2>"$tmp/log" &
tp=$!
for _ in $(seq 100); do
        "$build/tracectl" --socket "$tmp/c.sock" query 2>/dev/null | grep -q example.hello && break
        sleep 0.1
done
"$build/tracectl" --socket "$tmp/c.sock" record -t 1s -b 4mb --no-process-stats --ds example.hello \
        -o "$tmp/t.pftrace" > "$tmp/out"
n=$(sed -n 's/^  for_testing *\([0-9]*\)$/\1/p' "$tmp/out")
if [ -z "$n" ] || [ "$n" -lt 5 ]; then
        echo "FAIL: expected about 10 counter packets, got '${n:-0}'"; cat "$tmp/out" "$tmp/log"; exit 1
fi
echo "ok: hello.so built out of tree with pkg-config, $n counter packets traced"
