#!/bin/sh
# A plugin built against a newer minor of the plugin ABI (tests/abi/
# plugin-newer.c): loads in this host when what the host does not know of it
# is unset, and is refused, by name, when it is set. Both are checked as the
# supervisor asks first (traced-plugin-host --print-capabilities), then
# under traced: the first registers its data source (after checking that
# the host refuses unknown register_data_source flags), the second is
# refused in traced's log.
set -eu
top=${TOP_SRCDIR:?} build=${TOP_BUILDDIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/traced-minor-XXXXXX")
tp=
trap 'if [ -n "$tp" ]; then kill "$tp" 2>/dev/null || true; fi; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$tmp/plugins"
cc=${CC:-cc}
$cc -O2 -Wall -Wextra -Werror -shared -fPIC -I"$top/include" "$top/tests/abi/plugin-newer.c" \
        -o "$tmp/plugins/uses-nothing-new.so"
$cc -O2 -Wall -Wextra -Werror -shared -fPIC -I"$top/include" -DUSES_NEW "$top/tests/abi/plugin-newer.c" \
        -o "$tmp/plugins/uses-new.so"

r=0
"$build/traced-plugin-host" --print-capabilities "$tmp/plugins/uses-nothing-new.so" >"$tmp/out" 2>"$tmp/err" || r=$?
[ "$r" -eq 0 ] || { echo "FAIL: a newer plugin using nothing new was refused ($r):"; cat "$tmp/err"; exit 1; }
echo "ok: uses-nothing-new.so loads: $(cat "$tmp/out")"
r=0
"$build/traced-plugin-host" --print-capabilities "$tmp/plugins/uses-new.so" >"$tmp/out" 2>"$tmp/err" || r=$?
[ "$r" -eq 78 ] || { echo "FAIL: a newer plugin using what the host lacks was not refused ($r)"; cat "$tmp/err"; exit 1; }
grep -q 'plugin "newer-uses-new" (ABI 1\.[0-9]*) uses what this host (ABI 1\.[0-9]*) lacks' "$tmp/err" ||
        { echo "FAIL: the refusal does not name the plugin and what it uses:"; cat "$tmp/err"; exit 1; }
echo "ok: uses-new.so refused: $(cat "$tmp/err")"

"$build/traced" --producer-socket="$tmp/p.sock" --consumer-socket="$tmp/c.sock" \
        --plugin-dir="$tmp/plugins" --plugin-host="$build/traced-plugin-host" 2>"$tmp/log" &
tp=$!
for _ in $(seq 100); do
        "$build/tracectl" --socket "$tmp/c.sock" query 2>/dev/null | grep -q test.newer-uses-nothing-new && break
        sleep 0.1
done
"$build/tracectl" --socket "$tmp/c.sock" query > "$tmp/query"
grep -q test.newer-uses-nothing-new "$tmp/query" ||
        { echo "FAIL: the plugin using nothing new did not register under traced:"; cat "$tmp/query" "$tmp/log"; exit 1; }
for _ in $(seq 100); do
        grep -q 'plugin "newer-uses-new"' "$tmp/log" && break
        sleep 0.1
done
grep 'plugin "newer-uses-new"' "$tmp/log" ||
        { echo "FAIL: traced's log does not name the refused plugin:"; cat "$tmp/log"; exit 1; }
if grep -q test.newer-uses-new "$tmp/query"; then
        echo "FAIL: the plugin using what the host lacks registered"; exit 1
fi
echo "ok: under traced, the first registered and the second was refused"
