#!/bin/sh
# The layers of HACKING.md, in two passes; fails on a tree that breaks a
# rule, one line per offence.
#
# 1. The folders of the tree, over the #include lines of the sources: a
#    file may include the headers of its own folder and those of the layers
#    its folder's rule below names, nothing else. An include is placed by
#    its path: "traced/pbzero.h" and "traced/pbzero/..." are the typed
#    writers (the low-level writer and the headers generated from
#    protos/), "traced/..." the rest of the public API, "perfetto/ipc/..." the wire
#    protocol's generated code, "perfetto/..." the other generated protos,
#    "X/..." with a folder lib/X that library, a bare name the folder that
#    holds it (searched under the including file's top folder),
#    <systemd/...> libsystemd. Other system headers are not checked.
#
# 2. The layering inside daemons/traced (HACKING.md, "The service core"):
#      supervisor/ (root process) -> core/core.h only of the core;
#      core/: ports -> sessions -> buffers, output; nothing calls upward.
#    Checked on the #include lines of every file (and the files' folders
#    and sizes) and, when the build's objects are there, on the symbols
#    each layer's objects take from the others (nm).
#
#   tests/check-layers.sh [TOPDIR]
# TOPDIR defaults to $TOP_SRCDIR, then to this script's tree. The objects
# are looked for under $TOP_BUILDDIR (set by make check), else under the
# current directory when it is a build directory and no TOPDIR was given.
set -eu
top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}
builddir=${TOP_BUILDDIR:-}
if [ -z "$builddir" ] && [ $# -eq 0 ] && [ -d "$PWD/daemons/traced/core/.libs" ]; then
        builddir=$PWD
fi
cd "$top"
top=$(pwd)
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
fail=0

# ---------------------------------------------------------------------------
# 1. The folders of the tree.

# Longest matching folder first. "-" for a folder that may include nothing
# but its own headers.
rules() {
        cat <<'EOF'
lib/basic/                      writers
lib/log/                        lib/basic libsystemd
lib/smb/                        lib/basic
lib/pbtxt/                      lib/basic protos
lib/profiling/                  lib/basic writers
lib/heap/                       lib/basic
lib/ipc/                        lib/basic libsystemd protos wire
lib/consumer/                   lib/basic lib/log lib/ipc libsystemd protos wire
lib/producer/                   public writers lib/basic lib/log lib/ipc lib/smb libsystemd protos wire
plugins/                        public writers lib/basic lib/profiling lib/pbtxt protos
plugins/journald/               public writers lib/basic lib/pbtxt protos libsystemd
plugins/heap/                   public writers lib/basic lib/profiling lib/pbtxt lib/heap protos
daemons/plugin-host/            public writers lib/basic lib/log lib/producer libsystemd protos
daemons/traced/                 writers lib/basic lib/log lib/ipc lib/smb lib/pbtxt libsystemd protos wire daemons/traced
tools/                          writers lib/basic lib/log lib/ipc lib/pbtxt lib/consumer lib/profiling libsystemd protos wire
examples/                       public writers lib/basic libsystemd
EOF
}

# The rule of file $1: "folder allowed...".
rule_of() {
        rules | awk -v f="$1" '
                index(f, $1) == 1 && length($1) > best { best = length($1); line = $0 }
                END { print line }'
}

# Where include $2 of file $1 lives.
owner_of() {
        file=$1 inc=$2
        case "$inc" in
        traced/pbzero.h | traced/pbzero/*) echo writers; return ;;
        traced/*) echo public; return ;;
        perfetto/ipc/*) echo wire; return ;;
        perfetto/*) echo protos; return ;;
        plugins/* | daemons/* | tools/*) dirname "$inc"; return ;;
        */*)
                first=${inc%%/*}
                if [ -d "lib/$first" ]; then
                        echo "lib/$first"
                        return
                fi ;;
        esac
        dir=$(dirname "$file")
        if [ -e "$dir/$inc" ]; then
                echo "$dir"
                return
        fi
        # A header of a sibling folder (the service's layers): searched
        # under the file's top two folders.
        base=$(echo "$dir" | cut -d/ -f1-2)
        found=$(find "$base" -name "$(basename "$inc")" -path "*/$inc" 2>/dev/null | head -n 1)
        if [ -n "$found" ]; then
                dirname "$found"
                return
        fi
        echo "$dir" # generated beside it (skeletons, tables)
}

bad=0
dirs=
for d in lib daemons plugins tools examples; do
        [ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086
files=$(find $dirs -name '*.[ch]' ! -name '*.pb-c.*' ! -name '*.skel.h' \
        ! -name 'vmlinux.h' ! -name '*.bpf.c' | sort)
for f in $files; do
        r=$(rule_of "$f")
        [ -n "$r" ] || continue
        own=$(echo "$r" | awk '{ print $1 }')
        allowed=$(echo "$r" | awk '{ $1 = ""; sub(/^ +/, ""); print }')
        # "N:path" for each quoted include, "N:<systemd/x>" for libsystemd's.
        grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<systemd/)' "$f" |
                sed -E 's/^([0-9]+):[^"<]*["<]([^">]*)[">].*/\1:\2/' >"$tmpdir/includes" || true
        while IFS=: read -r line inc; do
                case "$inc" in
                systemd/*) o=libsystemd ;;
                config.h) continue ;;
                *) o=$(owner_of "$f" "$inc") ;;
                esac
                case "$o/" in
                "$own"*) continue ;;
                esac
                ok=no
                for a in $allowed; do
                        case "$o/" in
                        "$a"/*) ok=yes ;;
                        esac
                done
                if [ "$ok" = no ]; then
                        echo "$f:$line: includes \"$inc\" ($o), which ${own%/} may not (allowed: $allowed)"
                        bad=1
                fi
        done <"$tmpdir/includes"
done
if [ "$bad" -ne 0 ]; then
        echo "FAIL: includes across layers (rules: tests/check-layers.sh, HACKING.md)"
        fail=1
else
        echo "ok: every include within its layer"
fi

# ---------------------------------------------------------------------------
# 2. The layering of daemons/traced.

tfail=0
tbad() { echo "FAIL: $*"; tfail=1; }

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

if [ -d daemons/traced ]; then
        cd daemons/traced
        files=$(find . -name '*.[ch]' | sed 's|^\./||' | LC_ALL=C sort)
        for f in $files; do
                l=$(layer_of "$f")
                case "$f" in
                */*) ;;
                *) echo "FAIL: daemons/traced/$f: not in supervisor/, shared/ or core/" ;;
                esac
                lines=$(wc -l < "$f")
                [ "$lines" -gt 800 ] && echo "FAIL: daemons/traced/$f: $lines lines (at most 800)"
                grep -n '^#include "' "$f" | while IFS= read -r line; do
                        n=${line%%:*}
                        h=$(printf '%s\n' "$line" | sed 's/^[0-9]*:#include "\([^"]*\)".*/\1/')
                        case "$h" in
                        perfetto/ipc/*)
                                case "$l" in
                                sessions | buffers | output) echo "FAIL: daemons/traced/$f:$n: the $l layer includes a wire protocol header $h" ;;
                                esac
                                continue ;;
                        supervisor/* | shared/* | core/*) ;;
                        runner.h) [ "$f" = supervisor/in-process.c ] || echo "FAIL: daemons/traced/$f:$n: includes $h" ; continue ;;
                        */*) continue ;; # lib/ and generated headers (checked by the first pass)
                        *.h) [ -f "$h" ] || continue ;; # a header of a tree without the folders
                        *) continue ;;
                        esac
                        # The supervisor starts the core: its entry point only, and
                        # the service to hand plugin connections to in process.
                        if [ "$l" = supervisor ]; then
                                [ "$h" = core/core.h ] && continue
                                [ "$f" = supervisor/in-process.c ] && [ "$h" = core/service.h ] && continue
                        fi
                        hl=$(layer_of "$h")
                        may_include "$l" "$hl" || echo "FAIL: daemons/traced/$f:$n: the $l layer includes $h ($hl)"
                done
        done > "$tmpdir/traced" 2>&1 || true
        if [ -s "$tmpdir/traced" ]; then
                cat "$tmpdir/traced"
                tfail=1
        fi

        # The shared state stays small.
        for f in core/service.h service.h; do
                [ -f "$f" ] || continue
                n=$(wc -l < "$f")
                [ "$n" -gt 150 ] && tbad "daemons/traced/$f: $n lines (at most 150)"
        done
        cd "$top"
fi

# Calls: what the objects of a layer take from another layer must be
# allowed by the same rules (a lower layer reports through ops structs,
# never by calling up).
objdir="$builddir/daemons/traced/core"
if [ -n "$builddir" ] && [ -d "$objdir" ] && command -v nm >/dev/null 2>&1; then
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
                : > "$tmpdir/$l.def"
                : > "$tmpdir/$l.undef"
                for o in $objs; do
                        nm -g --defined-only "$o" | awk '{print $3}' >> "$tmpdir/$l.def"
                        nm -u "$o" | awk '{print $2}' >> "$tmpdir/$l.undef"
                done
                sort -u -o "$tmpdir/$l.def" "$tmpdir/$l.def"
                sort -u -o "$tmpdir/$l.undef" "$tmpdir/$l.undef"
        done
        for from in root ports sessions buffers output; do
                for to in root ports sessions buffers output; do
                        [ "$from" = "$to" ] && continue
                        may_include "$from" "$to" && continue
                        for s in $(comm -12 "$tmpdir/$from.undef" "$tmpdir/$to.def"); do
                                tbad "the $from layer calls $s of the $to layer"
                        done
                done
        done
fi

if [ "$tfail" -ne 0 ]; then
        echo "FAIL: daemons/traced layering (rules: tests/check-layers.sh, HACKING.md)"
        fail=1
else
        echo "ok: daemons/traced layering"
fi
exit "$fail"
