#!/bin/sh
# Every man page under man/ (generated from man/*.in by make, so with this
# build's paths): `mandoc -Tlint` finds nothing in it, and every example
# config in it (an .EX/.EE block right after a `.\" tracectl-config`
# line) is parsed by `tracectl record --dry-run`.
set -eu
builddir=${TOP_BUILDDIR:-.}
srcdir=${TOP_SRCDIR:-..}
if ! command -v mandoc >/dev/null 2>&1; then
        echo "SKIP: mandoc is not installed"
        exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
pages=0
configs=0
for src in "$srcdir"/man/*.in "$srcdir"/man/*.[1-8]; do
        [ -e "$src" ] || continue
        case "$src" in
        *.in) page="$builddir/man/$(basename "$src" .in)" ;;
        *) page=$src ;;
        esac
        if [ ! -f "$page" ]; then
                echo "FAIL: $page was not generated (add it to man_MANS in Makefile.am)"
                fail=1
                continue
        fi
        pages=$((pages + 1))
        if grep -q '{{' "$page"; then
                echo "FAIL: $page: an unsubstituted {{...}}: $(grep '{{' "$page" | head -n 1)"
                fail=1
        fi
        # The configuration file's path is this build's (--sysconfdir).
        if [ -n "${SYSCONFDIR:-}" ]; then
                other=$(grep -o '[^ ]*/traced/traced\.conf' "$page" | grep -v "^\(\.I[RB]* \)\{0,1\}$SYSCONFDIR/traced/traced\.conf\$" || true)
                if [ -n "$other" ]; then
                        echo "FAIL: $page names $(echo $other) instead of $SYSCONFDIR/traced/traced.conf"
                        fail=1
                fi
        fi
        lint=$(mandoc -Tlint -Wall "$page" 2>&1 || true)
        if [ -n "$lint" ]; then
                echo "FAIL: mandoc -Tlint $page:"
                echo "$lint"
                fail=1
        fi
        # The example configs: roff escapes back to text.
        awk -v out="$tmp/$(basename "$page")" '
                /^\.\\" tracectl-config/ { want = 1; next }
                want && /^\.EX/ { n++; file = out "." n ".cfg"; printf "" > file; inside = 1; want = 0; next }
                inside && /^\.EE/ { inside = 0; close(file); next }
                inside { gsub(/\\-/, "-"); gsub(/\\e/, "\\"); gsub(/\\\(dq/, "\""); print >> file }
        ' "$page"
        for cfg in "$tmp/$(basename "$page")".*.cfg; do
                [ -e "$cfg" ] || continue
                configs=$((configs + 1))
                if ! out=$("$builddir/tracectl" record --dry-run --txt -c "$cfg" 2>&1 >/dev/null); then
                        echo "FAIL: an example config of $page does not parse:"
                        echo "$out"
                        sed 's/^/    /' "$cfg"
                        fail=1
                else
                        echo "ok: $(basename "$page") example $(basename "$cfg" .cfg | sed 's/.*\.//'): $out"
                fi
        done
done
echo "$pages page(s) linted, $configs example config(s) parsed"
[ "$pages" -gt 0 ] || { echo "FAIL: no man pages found"; exit 1; }
exit $fail
