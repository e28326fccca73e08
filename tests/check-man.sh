#!/bin/sh
# Every man page under man/ (generated from man/*.in by make, so with this
# build's paths): `mandoc -Tlint` finds nothing in it, and every example
# config in it (an .EX/.EE block right after a `.\" tracectl-config`
# line) is parsed by `tracectl record --dry-run`. Every name a page's NAME
# gives has a page (its own, or a link to the group page: MAN3_LINKS),
# every function libtraced-client exports has one, every traced page a
# page cites exists, and a file a page includes (tools/man-include.awk,
# traced-plugin(7)'s example) reads back from the page as the file itself.
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
aliases=0
includes=0
configs=0
# ALIAS:PAGE: ALIAS.3 is installed as a link to PAGE.3, whose NAME gives
# ALIAS (Makefile.am).
links=${MAN3_LINKS:-}
for l in $links; do
        alias=${l%%:*} target=${l#*:}
        tpage=$builddir/man/$target.3
        [ -f "$tpage" ] || tpage=$srcdir/man/$target.3
        if [ ! -f "$tpage" ]; then
                echo "FAIL: MAN3_LINKS links $alias to $target.3, which is no page"
                fail=1
        elif ! sed -n '/^\.SH NAME/,/\\-/p' "$tpage" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -qx -- "$alias"; then
                echo "FAIL: MAN3_LINKS links $alias to $target.3, whose NAME does not give $alias"
                fail=1
        fi
        aliases=$((aliases + 1))
done
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
        # Each name of its NAME section has a page.
        for name in $(sed -n '/^\.SH NAME/,/\\-/p' "$page" | sed '1d; s/\\-.*//' | tr ',' ' '); do
                sec=$(sed -n 's/^\.TH [^ ]* \([1-8]\) .*/\1/p' "$page")
                if [ ! -e "$srcdir/man/$name.$sec" ] && [ ! -e "$srcdir/man/$name.$sec.in" ] &&
                        ! printf '%s\n' $links | grep -qx -- "$name:$(basename "$page" ".$sec")"; then
                        echo "FAIL: $page names $name, which has no page (add $name:$(basename "$page" ".$sec") to MAN3_LINKS in Makefile.am)"
                        fail=1
                fi
        done
        # The project's pages it cites exist.
        for ref in $(grep -o '\(^\|[ (]\)\(traced\|libtraced\|tracectl\)[a-z_.\\-]* ([1-8])' "$page" |
                sed 's/^[ (]//; s/\\-/-/g; s/ (\(.\))/.\1/' | sort -u); do
                if [ ! -e "$srcdir/man/$ref" ] && [ ! -e "$srcdir/man/$ref.in" ] &&
                        ! printf '%s\n' $links | grep -q -- "^${ref%.[1-8]}:"; then
                        echo "FAIL: $page cites $ref, which is no page"
                        fail=1
                fi
        done
        # Files it includes read back as themselves.
        for path in $(sed -n 's/^\.\\" begin include: //p' "$page"); do
                if ! sh "$srcdir/tests/man-example.sh" "$page" "$path" | cmp -s - "$srcdir/$path"; then
                        echo "FAIL: $page does not show $path as it is:"
                        sh "$srcdir/tests/man-example.sh" "$page" "$path" | diff "$srcdir/$path" - | head -n 20
                        fail=1
                else
                        includes=$((includes + 1))
                fi
        done
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
# Every function libtraced-client exports has a page.
for sym in $(sed -n 's/^[[:space:]]*\(traced_[a-z_]*\);$/\1/p' "$srcdir/libtraced-client.sym"); do
        if [ ! -e "$srcdir/man/$sym.3" ] && [ ! -e "$srcdir/man/$sym.3.in" ] &&
                ! printf '%s\n' $links | grep -q -- "^$sym:"; then
                echo "FAIL: libtraced-client exports $sym, which has no page (man/$sym.3, or a link in MAN3_LINKS)"
                fail=1
        fi
done
echo "$pages page(s) linted, $aliases linked name(s), $includes included file(s) as they are," \
        "$configs example config(s) parsed"
[ "$pages" -gt 0 ] || { echo "FAIL: no man pages found"; exit 1; }
exit $fail
