#!/bin/sh
# The ABI against its baseline in abi/ (abigail-tools: abidw, abidiff):
#   libtraced-client.so: its exported functions (by version node, from
#     libtraced-client.sym) and the public types they reach;
#   the plugin ABI: the structures of include/traced/plugin.h, recorded from
#     tests/abi/plugin-abi.c built here.
# Fails on any change abidiff reports except functions added and members
# appended at the end of a public structure (which grows);
# also fails when a function producer.h declares is not exported under a
# LIBTRACED_CLIENT_* node. With --update (make abi-baseline) writes the
# baseline instead, after a release or an intended addition.
set -eu
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${TOP_BUILDDIR:-$top}
cc=${CC:-cc}
update=false
[ "${1:-}" = --update ] && update=true
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

for t in abidw abidiff; do
        command -v $t >/dev/null 2>&1 ||
                { echo "check-abi: $t not found: install abigail-tools (tools/install-deps.sh)"; exit 1; }
done
lib=$build/.libs/libtraced-client.so.0
[ -e "$lib" ] || { echo "check-abi: $lib not found: run make first"; exit 1; }

# Every function of producer.h exported, with a version.
nm -D --defined-only "$lib" > "$tmp/exported"
for f in $(sed -n 's/.*\<\(traced_[a-z_]*\)(.*/\1/p' "$top/include/traced/producer.h" | sort -u); do
        grep -q " $f@@LIBTRACED_CLIENT_" "$tmp/exported" ||
                { echo "FAIL: $f is declared in producer.h but not exported: add it to a new node of libtraced-client.sym"; exit 1; }
done

dump() { # dump OUT OBJECT
        abidw --no-corpus-path --drop-private-types --headers-dir "$top/include/traced" --out-file "$1" "$2" ||
                { echo "check-abi: abidw failed on $2 (built without -g?)"; exit 1; }
}
dump "$tmp/libtraced-client.abi" "$lib"
$cc -g -O0 -shared -fPIC -I"$top/include" -o "$tmp/plugin-abi.so" "$top/tests/abi/plugin-abi.c"
dump "$tmp/plugin-abi.abi" "$tmp/plugin-abi.so"

if $update; then
        cp "$tmp/libtraced-client.abi" "$tmp/plugin-abi.abi" "$top/abi/"
        echo "check-abi: baseline written to $top/abi/"
        exit 0
fi

# abidiff's leaf report, line by line: what a minor may do passes (the
# type grew, and each member it reports inserted sits at or past the old
# end); anything else fails (a member changed, moved or went, the size
# stayed or shrank, a function or variable changed or went). Added
# functions are not reported (--no-added-syms).
only_appended() {
        awk '
        /^Removed\/Changed\/Added (functions|variables) summary:/ { if ($0 !~ / 0 Removed, 0 Changed,/) bad = 1; next }
        /^(Leaf changes summary|Changed leaf types summary|Removed\/Changed\/Added)/ || /^$/ { next }
        /^\047(struct|union) .*\047 changed:$/ { old = -1; next }
        /^  type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ { old = $5; if ($7 + 0 <= $5 + 0) bad = 1; next }
        /^  [0-9]+ data member insertions?:$/ { next }
        /^    \047.*\047, at offset [0-9]+ \(in bits\)/ {
                match($0, /at offset [0-9]+/)
                if (old < 0 || substr($0, RSTART + 10, RLENGTH - 10) + 0 < old + 0) bad = 1
                next
        }
        { bad = 1 }
        END { exit bad }' "$1"
}

status=0
for a in libtraced-client plugin-abi; do
        r=0
        abidiff --leaf-changes-only --no-added-syms --hd1 "$top/include/traced" --hd2 "$top/include/traced" \
                "$top/abi/$a.abi" "$tmp/$a.abi" > "$tmp/$a.diff" 2>&1 || r=$?
        # 4: changes, none that abidiff itself calls incompatible.
        if [ "$r" -eq 0 ] || { [ "$r" -eq 4 ] && only_appended "$tmp/$a.diff"; }; then
                echo "ok: $a compatible with abi/$a.abi"
                [ "$r" -eq 0 ] || sed 's/^/    /' "$tmp/$a.diff"
        else
                echo "FAIL: $a is not compatible with abi/$a.abi (abidiff status $r):"
                cat "$tmp/$a.diff"
                echo "A change that breaks callers needs a new major (HACKING.md, ABI); after an intended"
                echo "addition this check does not take, regenerate the baseline: make abi-baseline"
                status=1
        fi
done
exit $status
