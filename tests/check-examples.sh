#!/bin/sh
# The examples as a third party builds them: this build installed into a
# scratch tree (make install DESTDIR=..., the headers, typed writers,
# .proto files, pkg-config files and libtraced-client), then
# examples/plugin-hello/hello.c and examples/producer/example-producer.c
# built against that tree with nothing but pkg-config (traced-plugin;
# libtraced-client and libsystemd). Both run under this build's traced,
# tracectl records them, and `tracectl print` must name every field of
# their packets (no "unknown field") and show what they wrote.
set -eu
top=${TOP_SRCDIR:?} build=${TOP_BUILDDIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/traced-examples-XXXXXX")
tp= prod=
stop() {
        for p in $prod $tp; do
                kill "$p" 2>/dev/null || true
        done
        wait 2>/dev/null || true
}
trap 'stop; rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
        echo "FAIL: $*"
        for f in "$tmp"/*.log "$tmp"/*.out; do
                [ -f "$f" ] && { echo "== $f"; tail -n 40 "$f"; }
        done
        exit 1
}

# What a third party gets from the packages: headers, writers, schema,
# .pc files and the client library (the make of make check is not ours).
inst=$tmp/inst
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s -C "$build" DESTDIR="$inst" \
        install-tracedincludeHEADERS install-pbw install-nobase_dist_protoDATA \
        install-pkgconfigDATA install-noarch_pkgconfigDATA install-libLTLIBRARIES >"$tmp/install.log" 2>&1 ||
        fail "make install DESTDIR=$inst"
pcdirs=$(find "$inst" -name '*.pc' -exec dirname {} \; | sort -u | tr '\n' ':')
# The .pc files name the installed paths: the scratch tree is their root.
export PKG_CONFIG_PATH="$pcdirs" PKG_CONFIG_SYSROOT_DIR="$inst"
pc() { pkg-config "$@"; }
in_tree() { case "$1" in "$inst"/*) echo "$1" ;; *) echo "$inst$1" ;; esac; }
protodir=$(in_tree "$(pc --variable=protodir traced-protos)")
[ -f "$protodir/perfetto/trace/trace_packet.proto" ] || fail "traced-protos.pc protodir ($protodir) holds no schema"
plugin_cflags=$(pc --cflags traced-plugin)
client_flags=$(pc --cflags --libs libtraced-client libsystemd)
case "$plugin_cflags $client_flags" in
*"$top"* | *"$build"*) fail "pkg-config points into the source or build tree: $plugin_cflags $client_flags" ;;
esac

mkdir "$tmp/plugins"
${CC:-cc} -O2 -Wall -Wextra -Werror -shared -fPIC $plugin_cflags "$top/examples/plugin-hello/hello.c" \
        -o "$tmp/plugins/hello.so" 2>"$tmp/cc-hello.log" || fail "hello.c does not build with pkg-config traced-plugin"
# shellcheck disable=SC2086 # word splitting of the flags is meant
${CC:-cc} -O2 -Wall -Wextra -Werror "$top/examples/producer/example-producer.c" -o "$tmp/producer" $client_flags \
        -lpthread 2>"$tmp/cc-producer.log" || fail "example-producer.c does not build with pkg-config libtraced-client"
libdir=$(in_tree "$(pc --variable=libdir libtraced-client)")

"$build/traced" --producer-socket="$tmp/p.sock" --consumer-socket="$tmp/c.sock" \
        --plugin-dir="$tmp/plugins" --plugin-host="$build/traced-plugin-host" 2>"$tmp/traced.log" &
tp=$!
for _ in $(seq 100); do
        [ -S "$tmp/p.sock" ] && "$build/tracectl" --socket "$tmp/c.sock" query >/dev/null 2>&1 && break
        sleep 0.1
done
LD_LIBRARY_PATH=$libdir "$tmp/producer" --socket "$tmp/p.sock" --track-events --packets 20 --once \
        2>"$tmp/producer.log" &
prod=$!
for _ in $(seq 100); do
        "$build/tracectl" --socket "$tmp/c.sock" query >"$tmp/query.out" 2>/dev/null &&
                grep -q example.hello "$tmp/query.out" && grep -q example.data "$tmp/query.out" && break
        sleep 0.1
done
grep -q example.data "$tmp/query.out" && grep -q example.hello "$tmp/query.out" ||
        fail "the example plugin or producer did not register"
"$build/tracectl" --socket "$tmp/c.sock" record -t 1s -b 4mb --no-process-stats --ds example.hello \
        --ds example.data -o "$tmp/t.pftrace" >"$tmp/record.out" 2>&1 || fail "tracectl record failed"
n=$(sed -n 's/^  for_testing *\([0-9]*\)$/\1/p' "$tmp/record.out")
[ -n "$n" ] && [ "$n" -ge 5 ] || fail "expected about 10 counter packets of example.hello, got '${n:-0}'"
"$build/tracectl" print "$tmp/t.pftrace" >"$tmp/print.out" 2>&1 || fail "tracectl print failed"
if grep -n 'unknown field' "$tmp/print.out" >"$tmp/unknown.out"; then
        fail "tracectl print names not every field: $(head -n 3 "$tmp/unknown.out")"
fi
# What each wrote, by name: the plugin's counter track and values, the
# producer's thread track, slices with arguments, flows and the counter
# sampled at their ends.
for f in seq_value track_descriptor counter_value thread_name debug_annotations flow_ids \
        extra_counter_track_uuids extra_counter_values TYPE_SLICE_BEGIN TYPE_SLICE_END UNIT_SIZE_BYTES; do
        grep -q "$f" "$tmp/print.out" || fail "tracectl print shows no $f"
done
slices=$(grep -c 'TYPE_SLICE_END' "$tmp/print.out" || true)
[ "$slices" -eq 20 ] || fail "expected the producer's 20 slices, got $slices"
echo "ok: hello.so and example-producer built from an installed tree with pkg-config alone;" \
        "$n counter packets and $slices slices recorded, every field named"
