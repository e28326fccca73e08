#!/bin/sh
# Each public header must compile on its own: as C89 with -pedantic-errors
# and as C++.
set -eu
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cc=${CC:-cc}
for h in "$top"/include/traced/*.h; do
        name=$(basename "$h")
        printf '#include <traced/%s>\nint traced_header_test_dummy;\n' "$name" > "$tmp/t.c"
        $cc -std=c89 -pedantic-errors -Wall -Wextra -Werror -I"$top/include" -c "$tmp/t.c" -o "$tmp/t.o" ||
                { echo "FAIL: $name as C89"; exit 1; }
        if command -v c++ >/dev/null 2>&1; then
                cp "$tmp/t.c" "$tmp/t.cc"
                c++ -std=c++11 -Wall -Wextra -Werror -I"$top/include" -c "$tmp/t.cc" -o "$tmp/t.o" ||
                        { echo "FAIL: $name as C++"; exit 1; }
        fi
        echo "ok: $name"
done
# The profiling library's headers (internal, gnu11) compile alone too.
for h in "$top"/lib/profiling/*.h; do
        name=$(basename "$h")
        printf '#include "profiling/%s"\nint traced_header_test_dummy;\n' "$name" > "$tmp/t.c"
        $cc -std=gnu11 -Wall -Wextra -Werror -I"$top/lib" -c "$tmp/t.c" -o "$tmp/t.o" ||
                { echo "FAIL: lib/profiling/$name"; exit 1; }
        echo "ok: lib/profiling/$name"
done
