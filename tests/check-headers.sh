#!/bin/sh
# Each public header must compile on its own: as C89 with -pedantic-errors
# and as C++. The typed writers generated from protos/ (in the build
# directory's include/, installed under traced/pbzero/) too: each alone as C89, and
# all of them in one C++ file.
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
build=${TOP_BUILDDIR:-$top}
if [ -d "$build/include/traced/pbzero" ]; then
        n=0
        : >"$tmp/all.cc"
        for h in $(cd "$build/include" && find traced/pbzero -name '*.pbw.h' | sort); do
                printf '#include <%s>\nint traced_header_test_dummy;\n' "$h" > "$tmp/t.c"
                $cc -std=c89 -pedantic-errors -Wall -Wextra -Werror -I"$top/include" -I"$build/include" -c "$tmp/t.c" \
                        -o "$tmp/t.o" || { echo "FAIL: $h as C89"; exit 1; }
                printf '#include <%s>\n' "$h" >>"$tmp/all.cc"
                n=$((n + 1))
        done
        if command -v c++ >/dev/null 2>&1; then
                echo 'int traced_header_test_dummy;' >>"$tmp/all.cc"
                c++ -std=c++11 -Wall -Wextra -Werror -I"$top/include" -I"$build/include" -c "$tmp/all.cc" -o "$tmp/t.o" ||
                        { echo "FAIL: the generated writers as C++"; exit 1; }
        fi
        echo "ok: $n generated writers (traced/pbzero/)"
else
        echo "FAIL: no generated writers in $build/include/traced/pbzero (run make first)"
        exit 1
fi
# The profiling library's headers (internal, gnu11) compile alone too.
for h in "$top"/lib/profiling/*.h; do
        name=$(basename "$h")
        printf '#include "profiling/%s"\nint traced_header_test_dummy;\n' "$name" > "$tmp/t.c"
        $cc -std=gnu11 -Wall -Wextra -Werror -I"$top/lib" -c "$tmp/t.c" -o "$tmp/t.o" ||
                { echo "FAIL: lib/profiling/$name"; exit 1; }
        echo "ok: lib/profiling/$name"
done
