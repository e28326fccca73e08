#!/bin/sh
# The layering of daemons/traced (HACKING.md, "The service core"):
#   supervisor/ (root process) -> core/core.h only of the core;
#   core/: ports -> sessions -> buffers, output; nothing calls upward.
# Checked on the #include lines of every file and, when the build's
# objects are there, on the symbols each layer's objects take from the
# others (nm). Fails on a tree that breaks a rule, naming the line.
set -eu
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${TOP_BUILDDIR:-}
d="$top/daemons/traced"
cd "$d"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The layer of a file of daemons/traced, by its path.
layer_of() {
        case "$1" in
        supervisor/*) echo supervisor ;;
        shared/*) echo shared ;;
        core/limits.h) echo limits ;;
        core/service.h) echo state ;;
        core/ports/*) echo ports ;;
        core/sessions/*) echo sessions ;;
        core/buffers/*) echo buffers ;;
        core/output/*) echo output ;;
        core/*) echo root ;;
        # A tree without the folders: judged by file names, and refused.
        session*) echo sessions ;;
        trace-buffer*) echo buffers ;;
        output-*) echo output ;;
        *-port.[ch] | chunk-sink.[ch] | quota.[ch]) echo ports ;;
        service.h) echo state ;;
        *) echo flat ;;
        esac
}

# Whether a file of layer $1 may include a header of layer $2.
may_include() {
        [ "$1" = "$2" ] && return 0
        case "$1:$2" in
        supervisor:shared) return 0 ;;
        root:*) [ "$2" != supervisor ] && return 0 ;;
        ports:sessions | ports:buffers | ports:output | ports:limits | ports:state) return 0 ;;
        sessions:buffers | sessions:output | sessions:limits | sessions:state) return 0 ;;
        state:sessions) return 0 ;; # the machines' record, which service.h holds
        esac
        return 1
}

files=$(find . -name '*.[ch]' | sed 's|^\./||' | LC_ALL=C sort)
for f in $files; do
        l=$(layer_of "$f")
        case "$f" in
        */*) ;;
        *) bad "$f: not in supervisor/, shared/ or core/" ;;
        esac
        lines=$(wc -l < "$f")
        [ "$lines" -gt 800 ] && bad "$f: $lines lines (at most 800)"
        grep -n '^#include "' "$f" | while IFS= read -r line; do
                n=${line%%:*}
                h=$(printf '%s\n' "$line" | sed 's/^[0-9]*:#include "\([^"]*\)".*/\1/')
                case "$h" in
                perfetto/ipc/*)
                        case "$l" in
                        sessions | buffers | output) echo "FAIL: $f:$n: the $l layer includes a wire protocol header $h" ;;
                        esac
                        continue ;;
                supervisor/* | shared/* | core/*) ;;
                *.h) [ -f "$h" ] || continue ;; # a header of a tree without the folders
                runner.h) [ "$f" = supervisor/in-process.c ] || echo "FAIL: $f:$n: includes $h" ; continue ;;
                *) continue ;; # lib/ and generated headers
                esac
                # The supervisor starts the core: its entry point only, and
                # the service to hand plugin connections to in process.
                if [ "$l" = supervisor ]; then
                        [ "$h" = core/core.h ] && continue
                        [ "$f" = supervisor/in-process.c ] && [ "$h" = core/service.h ] && continue
                fi
                hl=$(layer_of "$h")
                may_include "$l" "$hl" || echo "FAIL: $f:$n: the $l layer includes $h ($hl)"
        done
done > "${TMPDIR:-/tmp}/check-layers.$$" 2>&1 || true
if [ -s "${TMPDIR:-/tmp}/check-layers.$$" ]; then
        cat "${TMPDIR:-/tmp}/check-layers.$$"
        fail=1
fi
rm -f "${TMPDIR:-/tmp}/check-layers.$$"

# The shared state stays small.
for f in core/service.h service.h; do
        [ -f "$f" ] || continue
        n=$(wc -l < "$f")
        [ "$n" -gt 150 ] && bad "$f: $n lines (at most 150)"
done

# Calls: what the objects of a layer take from another layer must be
# allowed by the same rules (a lower layer reports through ops structs,
# never by calling up).
objdir="$builddir/daemons/traced/core"
if [ -n "$builddir" ] && [ -d "$objdir" ] && command -v nm >/dev/null 2>&1; then
        tmp=$(mktemp -d)
        for l in root ports sessions buffers output; do
                case $l in
                root) dir="$objdir" ;;
                *) dir="$objdir/$l" ;;
                esac
                # libtool keeps the objects in .libs/ (next to the .lo).
                case $l in
                root) objs=$(ls "$dir"/.libs/libtraced_core_la-*.o 2>/dev/null || true) ;;
                *) objs=$(find "$dir" -name 'libtraced_core_la-*.o' -path '*/.libs/*') ;;
                esac
                : > "$tmp/$l.def"
                : > "$tmp/$l.undef"
                for o in $objs; do
                        nm -g --defined-only "$o" | awk '{print $3}' >> "$tmp/$l.def"
                        nm -u "$o" | awk '{print $2}' >> "$tmp/$l.undef"
                done
                sort -u -o "$tmp/$l.def" "$tmp/$l.def"
                sort -u -o "$tmp/$l.undef" "$tmp/$l.undef"
        done
        for from in root ports sessions buffers output; do
                for to in root ports sessions buffers output; do
                        [ "$from" = "$to" ] && continue
                        may_include "$from" "$to" && continue
                        for s in $(comm -12 "$tmp/$from.undef" "$tmp/$to.def"); do
                                bad "the $from layer calls $s of the $to layer"
                        done
                done
        done
        rm -rf "$tmp"
fi

[ "$fail" = 0 ] && echo "ok: daemons/traced layering"
exit "$fail"
