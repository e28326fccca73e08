#!/bin/sh
# The layers of HACKING.md, checked over the #include lines of the sources:
# a file may include the headers of its own folder and those of the layers
# its folder's rule below names, nothing else. An include is placed by its
# path: "traced/..." is the public API, "perfetto/ipc/..." the wire
# protocol's generated code, "perfetto/..." the other generated protos,
# "X/..." with a folder lib/X that library, a bare name the folder that holds
# it (searched under the including file's top folder), <systemd/...>
# libsystemd. Other system headers are not checked.
#   tests/check-layers.sh [TOPDIR]     exit 1 and one line per offence
set -eu
top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$top"

# Longest matching folder first. "-" for a folder that may include nothing
# but its own headers.
rules() {
        cat <<'EOF'
lib/basic/                      -
lib/log/                        lib/basic libsystemd
lib/smb/                        lib/basic
lib/pbtxt/                      lib/basic protos
lib/profiling/                  lib/basic
lib/ipc/                        lib/basic libsystemd protos wire
lib/consumer/                   lib/basic lib/log lib/ipc libsystemd protos wire
lib/producer/                   public lib/basic lib/log lib/ipc lib/smb libsystemd protos wire
plugins/                        public lib/basic lib/profiling lib/pbtxt protos
daemons/plugin-host/            public lib/basic lib/log lib/producer libsystemd protos
daemons/traced/                 lib/basic lib/log lib/ipc lib/smb lib/pbtxt libsystemd protos wire daemons/traced
tools/                          lib/basic lib/log lib/ipc lib/pbtxt lib/consumer libsystemd protos wire
examples/                       public lib/basic libsystemd
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
                sed -E 's/^([0-9]+):[^"<]*["<]([^">]*)[">].*/\1:\2/' >"${TMPDIR:-/tmp}/layers.$$" || true
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
        done <"${TMPDIR:-/tmp}/layers.$$"
done
rm -f "${TMPDIR:-/tmp}/layers.$$"
if [ "$bad" -ne 0 ]; then
        echo "FAIL: includes across layers (rules: tests/check-layers.sh, HACKING.md)"
        exit 1
fi
echo "ok: every include within its layer"
