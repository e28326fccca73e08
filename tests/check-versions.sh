#!/bin/sh
# One version per C interface (HACKING.md, "Versions"): libtraced-client's
# is its newest symbol version node, so `pkg-config --atleast-version=X.Y
# libtraced-client` holds for every node X.Y the library has and not for
# the next; every "Since X.Y" of producer.h and of the library's pages
# names a node, and each function of a later node than 1.0 is marked
# "Since" its node in its page. traced-plugin.pc's version is plugin.h's
# TRACED_PLUGIN_ABI_MAJOR.MINOR.
set -eu
top=${TOP_SRCDIR:?} build=${TOP_BUILDDIR:?}
export PKG_CONFIG_PATH="$build${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fail=0
nodes=$(sed -n 's/^LIBTRACED_CLIENT_\([0-9][0-9.]*\) {.*/\1/p' "$top/libtraced-client.sym")
[ -n "$nodes" ] || { echo "FAIL: no version node in libtraced-client.sym"; exit 1; }
newest=$(echo "$nodes" | tail -n 1)
have=$(pkg-config --modversion libtraced-client) || { echo "FAIL: pkg-config cannot read $build/libtraced-client.pc"; exit 1; }
[ "$have" = "$newest" ] || { echo "FAIL: libtraced-client.pc says $have, the newest node is $newest"; fail=1; }
for v in $nodes; do
        pkg-config --atleast-version="$v" libtraced-client ||
                { echo "FAIL: pkg-config --atleast-version=$v libtraced-client fails, the library has node $v"; fail=1; }
done
next=${newest%.*}.$((${newest##*.} + 1))
if pkg-config --atleast-version="$next" libtraced-client; then
        echo "FAIL: pkg-config --atleast-version=$next libtraced-client holds, the library has no node $next"
        fail=1
fi

# The notes name nodes.
for f in "$top/include/traced/producer.h" "$top"/man/libtraced-client.3.in "$top"/man/traced_producer_*.3.in \
        "$top"/man/traced_trace_writer_*.3.in; do
        for v in $(grep -o '[Ss]ince [0-9][0-9.]*[0-9]' "$f" | sed 's/.* //' | sort -u); do
                echo "$nodes" | grep -qx "$v" ||
                        { echo "FAIL: $f says \"Since $v\": libtraced-client has no node $v"; fail=1; }
        done
done
# Each later node's functions are marked in their pages.
node=
while read -r line; do
        case "$line" in
        LIBTRACED_CLIENT_*" {") node=${line#LIBTRACED_CLIENT_}; node=${node%% *} ;;
        traced_*\;)
                sym=${line%;}
                [ "$node" = 1.0 ] && continue
                page=$top/man/$sym.3.in
                # A name linked to its group's page (MAN3_LINKS in Makefile.am).
                [ -e "$page" ] || page=$top/man/$(printf '%s\n' ${MAN3_LINKS:-} | sed -n "s/^$sym://p").3.in
                if [ ! -f "$page" ]; then
                        echo "FAIL: $sym (node $node) has no page"
                        fail=1
                elif ! grep -q "[Ss]ince $node" "$page"; then
                        echo "FAIL: $(basename "$page" .in) does not say $sym is since $node"
                        fail=1
                fi
                ;;
        esac
done <"$top/libtraced-client.sym"

abi=$(sed -n 's/^#define TRACED_PLUGIN_ABI_\(MAJOR\|MINOR\) \([0-9]*\)u$/\2/p' "$top/include/traced/plugin.h" | paste -s -d .)
plugin=$(pkg-config --modversion traced-plugin) || { echo "FAIL: pkg-config cannot read traced-plugin.pc"; exit 1; }
[ "$plugin" = "$abi" ] || { echo "FAIL: traced-plugin.pc says $plugin, plugin.h's ABI is $abi"; fail=1; }
[ $fail -eq 0 ] && echo "ok: libtraced-client $have (nodes $(echo $nodes)), traced-plugin $plugin"
exit $fail
