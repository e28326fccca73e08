#!/bin/sh
# Instructions per packet of the packet-building paths of linux.ftrace and
# linux.sys_stats (bench/packet-cost.c: ftrace pages into an
# FtraceEventBundle packet, with and without compact_sched, and one
# sys_stats poll into a SysStats packet), counted by callgrind, against a
# peer driver in the same run: the program built from another tree (the
# code before a change, say; its packet-cost.c adapted to that tree's API
# where it differs, the fake host and the inputs kept).
#
# A path's cost is (Ir(N2) - Ir(N1)) / (N2 - N1) over two runs of N1 and N2
# packets, so that start-up and fixture loading cancel out. Over ROUNDS
# rounds (min / median / max), then the ratio of the medians (this / peer),
# and the bytes per packet of each.
#
# Run from a build directory, after `make bench/packet-cost`:
#   ../bench/packet-cost.sh [PEER]
# PEER: a packet-cost binary of another tree (it takes the same arguments;
# left out: this tree alone). Environment: ROUNDS (default 3), N1 (default
# 100), N2 (default 600). Needs valgrind. Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
this=$build/bench/packet-cost
peer=${1:-}
rounds=${ROUNDS:-3}
n1=${N1:-100}
n2=${N2:-600}
[ -x "$this" ] || { echo "run from the build directory after make bench/packet-cost ($this is missing)" >&2; exit 2; }
[ -z "$peer" ] || [ -x "$peer" ] || { echo "peer $peer is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ "$n2" -gt "$n1" ] || { echo "N2 ($n2) must be larger than N1 ($n1)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/traced-packet-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# The instructions of one run: BIN PATH N.
ir() {
        out=$work/cg.out
        valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$3" "$src/tests/data" >"$work/run.out" 2>"$work/run.err" ||
                { echo "$1 $2 $3 failed:" >&2; cat "$work/run.err" >&2; exit 1; }
        awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# Instructions per packet of BIN PATH, and its bytes per packet (from the
# N2 run's "P packets, B bytes").
per_packet() {
        a=$(ir "$1" "$2" "$n1")
        b=$(ir "$1" "$2" "$n2")
        bytes=$(awk '{ printf "%.0f", $3 / $1 }' "$work/run.out")
        echo "$(( (b - a) / (n2 - n1) )) $bytes"
}

# min median max of the numbers on stdin.
stats() {
        sort -n | awk '{ v[NR] = $1 } END { printf "%d %d %d", v[1], v[int((NR + 1) / 2)], v[NR] }'
}

printf '%-15s %-28s %-28s %s\n' path "this: Ir/packet min/med/max" "peer: Ir/packet min/med/max" "this/peer (bytes/packet)"
for path in ftrace ftrace-compact sysstats; do
        : >"$work/this" && : >"$work/peer"
        r=0
        while [ "$r" -lt "$rounds" ]; do
                # Alternate which runs first.
                if [ -n "$peer" ] && [ $((r % 2)) -eq 1 ]; then
                        per_packet "$peer" "$path" >>"$work/peer"
                        per_packet "$this" "$path" >>"$work/this"
                else
                        per_packet "$this" "$path" >>"$work/this"
                        [ -z "$peer" ] || per_packet "$peer" "$path" >>"$work/peer"
                fi
                r=$((r + 1))
        done
        read -r t_min t_med t_max <<EOF
$(awk '{ print $1 }' "$work/this" | stats)
EOF
        t_bytes=$(awk 'NR == 1 { print $2 }' "$work/this")
        if [ -n "$peer" ]; then
                read -r p_min p_med p_max <<EOF
$(awk '{ print $1 }' "$work/peer" | stats)
EOF
                p_bytes=$(awk 'NR == 1 { print $2 }' "$work/peer")
                ratio=$(awk -v t="$t_med" -v p="$p_med" 'BEGIN { printf "%.3f", t / p }')
                printf '%-15s %-28s %-28s %s (%s / %s)\n' "$path" "$t_min / $t_med / $t_max" "$p_min / $p_med / $p_max" \
                        "$ratio" "$t_bytes" "$p_bytes"
        else
                printf '%-15s %-28s %-28s (%s)\n' "$path" "$t_min / $t_med / $t_max" - "$t_bytes"
        fi
done
