#!/bin/sh
# The examples as a third party gets them: this build installed into a
# scratch tree (make install DESTDIR=...: the headers, typed writers,
# .proto files, pkg-config files, libtraced-client, the man pages and the
# examples under $(docdir)/examples), then the installed examples built
# with their GNUmakefiles, -Wall -Wextra -Werror and nothing but pkg-config:
# the plugin from traced-plugin(7)'s EXAMPLE as the installed page shows
# it (pkg-config traced-plugin), the producer, which calls sd-event itself,
# with `pkg-config libtraced-client` alone (libsystemd comes with it). Both
# run under this build's traced, tracectl records them, and `tracectl
# print` must name every field of their packets (no "unknown field") and
# show what they wrote.
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
# .pc files, the client library, man pages and examples (the make of make
# check is not ours).
inst=$tmp/inst
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s -C "$build" DESTDIR="$inst" \
        install-tracedincludeHEADERS install-pbw install-nobase_dist_protoDATA \
        install-pkgconfigDATA install-noarch_pkgconfigDATA install-libLTLIBRARIES install-man \
        install-nobase_dist_exampledocDATA >"$tmp/install.log" 2>&1 ||
        fail "make install DESTDIR=$inst"
pcdirs=$(find "$inst" -name '*.pc' -exec dirname {} \; | sort -u | tr '\n' ':')
# The .pc files name the installed paths: the scratch tree is their root.
export PKG_CONFIG_PATH="$pcdirs" PKG_CONFIG_SYSROOT_DIR="$inst"
pc() { pkg-config "$@"; }
in_tree() { case "$1" in "$inst"/*) echo "$1" ;; *) echo "$inst$1" ;; esac; }
protodir=$(in_tree "$(pc --variable=protodir traced-protos)")
[ -f "$protodir/perfetto/trace/trace_packet.proto" ] || fail "traced-protos.pc protodir ($protodir) holds no schema"
plugin_cflags=$(pc --cflags traced-plugin)
client_flags=$(pc --cflags --libs libtraced-client)
case "$plugin_cflags $client_flags" in
*"$top"* | *"$build"*) fail "pkg-config points into the source or build tree: $plugin_cflags $client_flags" ;;
esac
examples=$(find "$inst" -type d -path '*/examples/plugin-hello' -exec dirname {} \;)
[ -n "$examples" ] && [ -f "$examples/producer/example-producer.c" ] && [ -f "$examples/producer/GNUmakefile" ] ||
        fail "make install installed no examples (plugin-hello/, producer/ under \$(docdir)/examples)"
page=$(find "$inst" -name traced-plugin.7 -path '*/man7/*')
[ -n "$page" ] || fail "make install installed no traced-plugin.7"
cp -R "$examples" "$tmp/work"
sh "$top/tests/man-example.sh" "$page" examples/plugin-hello/hello.c >"$tmp/work/plugin-hello/hello.c" ||
        fail "traced-plugin.7 shows no examples/plugin-hello/hello.c"

mkdir "$tmp/plugins"
# shellcheck disable=SC2086 # word splitting of the flags is meant
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -C "$tmp/work/plugin-hello" CC="${CC:-cc}" \
        CFLAGS="-O2 -Wall -Wextra -Werror" hello.so >"$tmp/cc-hello.log" 2>&1 ||
        fail "traced-plugin(7)'s example does not build with its GNUmakefile (pkg-config traced-plugin)"
cp "$tmp/work/plugin-hello/hello.so" "$tmp/plugins/hello.so"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -C "$tmp/work/producer" CC="${CC:-cc}" \
        CFLAGS="-O2 -Wall -Wextra -Werror" example-producer >"$tmp/cc-producer.log" 2>&1 ||
        fail "example-producer.c does not build with its GNUmakefile (pkg-config libtraced-client alone)"
cp "$tmp/work/producer/example-producer" "$tmp/producer"
libdir=$(in_tree "$(pc --variable=libdir libtraced-client)")

"$build/traced" --producer-socket="$tmp/p.sock" --consumer-socket="$tmp/c.sock" \
        --plugin-dir="$tmp/plugins" --plugin-host="$build/traced-plugin-host" 2>"$tmp/traced.log" &
tp=$!
for _ in $(seq 100); do
        [ -S "$tmp/p.sock" ] && "$build/tracectl" --socket "$tmp/c.sock" query >/dev/null 2>&1 && break
        sleep 0.1
done
# A sanitized build's library needs its sanitizer runtimes loaded first;
# the example itself is built without them (and is not checked for leaks).
preload=$(ldd "$libdir/libtraced-client.so" 2>/dev/null |
        awk '/lib(asan|ubsan)\.so/ && $3 ~ /^\// { printf "%s%s", sep, $3; sep = ":" }')
if [ -n "$preload" ]; then
        LD_PRELOAD=$preload ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" LD_LIBRARY_PATH=$libdir \
                "$tmp/producer" --socket "$tmp/p.sock" --track-events --packets 20 --once 2>"$tmp/producer.log" &
else
        LD_LIBRARY_PATH=$libdir "$tmp/producer" --socket "$tmp/p.sock" --track-events --packets 20 --once \
                2>"$tmp/producer.log" &
fi
prod=$!
for _ in $(seq 100); do
        "$build/tracectl" --socket "$tmp/c.sock" query >"$tmp/query.out" 2>/dev/null &&
                grep -q example.hello "$tmp/query.out" && grep -q example.data "$tmp/query.out" && break
        sleep 0.1
done
grep -q example.data "$tmp/query.out" && grep -q example.hello "$tmp/query.out" ||
        fail "the example plugin or producer did not register"
# The plugin's own setting, in the config's legacy_config (traced-plugin(7)).
cat >"$tmp/session.cfg" <<'CFG'
buffers { size_kb: 4096 }
duration_ms: 1000
data_sources { config { name: "example.hello" legacy_config: "period_ms=50" } }
data_sources { config { name: "example.data" } }
CFG
"$build/tracectl" --socket "$tmp/c.sock" record --txt -c "$tmp/session.cfg" \
        -o "$tmp/t.pftrace" >"$tmp/record.out" 2>&1 || fail "tracectl record failed"
n=$(sed -n 's/^  for_testing *\([0-9]*\)$/\1/p' "$tmp/record.out")
[ -n "$n" ] && [ "$n" -ge 5 ] || fail "expected about 20 counter packets of example.hello, got '${n:-0}'"
grep -q 'example.hello started, every 50 ms' "$tmp/traced.log" ||
        fail "example.hello did not take period_ms=50 from its legacy_config"
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
echo "ok: traced-plugin(7)'s example and example-producer built from an installed tree with pkg-config alone;" \
        "$n counter packets and $slices slices recorded, every field named"
