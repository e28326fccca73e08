#!/bin/sh
# Producer throughput: the same volume of packets written by one thread
# through libtraced-client into traced (example-producer, whole packets,
# STALL_THEN_DROP so that nothing is dropped) and through LTTng-UST into
# lttng-sessiond/lttng-consumerd (a blocking channel, so that nothing is
# discarded), in the same run. For each: MB/s as the writer sees it, CPU
# seconds per MB of the writer and of the service processes, losses, and
# the ratios traced/LTTng. Run as root from a build directory:
#   ../bench/producer-throughput.sh [VOLUME_MB] [SIZES...]
# (defaults: 256 MB in 1 KB and 64 KB packets). Needs lttng-tools and
# liblttng-ust-dev (Debian) for the peer. Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)
[ -x "$build/traced" ] && [ -x "$build/example-producer" ] || { echo "run from the build directory" >&2; exit 2; }
volume_mb=${1:-256}
[ $# -gt 0 ] && shift
sizes=${*:-1024 65536}
work=$(mktemp -d /tmp/traced-tput-XXXXXX)
cleanup() {
        [ -n "${sup:-}" ] && kill "$sup" 2>/dev/null || true
        lttng destroy tput >/dev/null 2>&1 || true
        [ -n "${sessiond:-}" ] && kill "$sessiond" 2>/dev/null || true
        [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# CPU seconds (utime + stime) of the given pids, from /proc.
cpu_of_pids() {
        t=0
        for p in "$@"; do
                [ -r "/proc/$p/stat" ] || continue
                t=$(awk -v t="$t" '{ sub(/.*\) /, ""); print t + ($12 + $13) }' "/proc/$p/stat")
        done
        echo "$t $(getconf CLK_TCK)" | awk '{ print $1 / $2 }'
}

have_lttng=yes
if ! command -v lttng >/dev/null || ! command -v lttng-sessiond >/dev/null ||
   ! echo "#include <lttng/tracepoint.h>" | cc -E - >/dev/null 2>&1; then
        have_lttng=no
        echo "LTTng-UST is not installed (apt-get install lttng-tools liblttng-ust-dev): measuring traced only" >&2
fi
if [ $have_lttng = yes ]; then
        cc -O2 -I"$src/lttng-ust" -o "$work/blob-writer" "$src/lttng-ust/blob-writer.c" -llttng-ust -ldl
        # Our own session daemon; one that was already running is used
        # and left alone.
        if ! pgrep -x lttng-sessiond >/dev/null; then
                lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || true
                sleep 1
                sessiond=$(pgrep -o -x lttng-sessiond || true)
        fi
fi

printf "%-7s %-7s %9s %9s %9s %11s %11s %6s\n" size tool packets MB/s cpu_s cpu_s/MB writer_cpu/MB lost
for size in $sizes; do
        packets=$((volume_mb * 1024 * 1024 / size))
        mb=$(echo "$packets $size" | awk '{ print $1 * $2 / 1048576 }')

        # traced: standalone, no plugins; the service is the supervisor and
        # its core (the core does all the work).
        rm -f "$work"/*.sock
        "$build/traced" --producer-socket="$work/p.sock" --consumer-socket="$work/c.sock" --no-plugins \
                --log-level=warning 2>"$work/traced.log" &
        sup=$!
        for _ in $(seq 100); do [ -S "$work/c.sock" ] && break; sleep 0.05; done
        core=$(pgrep -P "$sup" | head -n 1)
        /usr/bin/time -f "%U %S" -o "$work/producer.time" \
                "$build/example-producer" --socket "$work/p.sock" --packets "$packets" --size "$size" \
                --smb-kb 4096 --page-kb 64 --once 2>"$work/producer.log" &
        prod=$!
        sleep 0.5
        cat >"$work/cfg.pbtxt" <<CFG
buffers { size_kb: $(( (volume_mb + volume_mb / 4 + 16) * 1024 )) fill_policy: DISCARD }
data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } }
duration_ms: 8000
CFG
        before=$(cpu_of_pids "$sup" "$core")
        "$build/tracectl" --socket "$work/c.sock" record -c "$work/cfg.pbtxt" --txt -o "$work/t.pftrace" \
                >"$work/tracectl.log" 2>&1
        after=$(cpu_of_pids "$sup" "$core")
        wait "$prod" || true
        kill "$sup"
        wait "$sup" || true
        secs=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$work/producer.log")
        dropped=$(sed -n 's/.*dropped \([0-9]*\),.*/\1/p' "$work/producer.log")
        lost=$(sed -n 's/^Service stats:.* \([0-9]*\) chunks overwritten, \([0-9]*\) discarded.*/\1 \2/p' \
                "$work/tracectl.log" | awk -v d="${dropped:-?}" '{ print d + $1 + $2 }')
        wcpu=$(cpu_of_file=$(tail -n 1 "$work/producer.time"); echo "$cpu_of_file" | awk '{ print $1 + $2 }')
        scpu=$(echo "$before $after" | awk '{ print $2 - $1 }')
        t_rate=$(echo "$mb $secs" | awk '{ print ($2 > 0 ? $1 / $2 : 0) }')
        t_cpu=$(echo "$wcpu $scpu $mb" | awk '{ print ($1 + $2) / $3 }')
        t_wcpu=$(echo "$wcpu $mb" | awk '{ print $1 / $2 }')
        printf "%-7s %-7s %9s %9.1f %9.2f %11.5f %11.5f %6s\n" "$size" traced "$packets" "$t_rate" \
                "$(echo "$wcpu $scpu" | awk '{ print $1 + $2 }')" "$t_cpu" "$t_wcpu" "${lost:-?}"

        [ $have_lttng = yes ] || continue
        # LTTng-UST: the same events into a blocking per-UID channel big
        # enough for the largest event.
        rm -rf "$work/lttng"
        lttng create tput --output="$work/lttng" >/dev/null
        lttng enable-channel -u --subbuf-size=4M --num-subbuf=8 --blocking-timeout=inf ch >/dev/null
        lttng enable-event -u -c ch 'traced_bench:*' >/dev/null
        lttng start >/dev/null
        lpids=$(pgrep -d ' ' -f 'lttng-(sessiond|consumerd)' || true)
        before=$(cpu_of_pids $lpids)
        LTTNG_UST_ALLOW_BLOCKING=1 /usr/bin/time -f "%U %S" -o "$work/blob.time" \
                "$work/blob-writer" "$packets" "$size" 2>"$work/blob.log"
        lttng stop >"$work/lttng-stop.log" 2>&1
        lpids=$(pgrep -d ' ' -f 'lttng-(sessiond|consumerd)' || true)
        after=$(cpu_of_pids $lpids)
        lttng destroy >/dev/null
        secs=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$work/blob.log")
        lost=$(sed -n 's/.* \([0-9][0-9]*\) events* discarded.*/\1/p' "$work/lttng-stop.log" | head -n 1)
        wcpu=$(tail -n 1 "$work/blob.time" | awk '{ print $1 + $2 }')
        # blob-writer sleeps 1 s before writing (registration); that is not CPU.
        scpu=$(echo "$before $after" | awk '{ print $2 - $1 }')
        l_rate=$(echo "$mb $secs" | awk '{ print ($2 > 0 ? $1 / $2 : 0) }')
        l_cpu=$(echo "$wcpu $scpu $mb" | awk '{ print ($1 + $2) / $3 }')
        l_wcpu=$(echo "$wcpu $mb" | awk '{ print $1 / $2 }')
        printf "%-7s %-7s %9s %9.1f %9.2f %11.5f %11.5f %6s\n" "$size" lttng "$packets" "$l_rate" \
                "$(echo "$wcpu $scpu" | awk '{ print $1 + $2 }')" "$l_cpu" "$l_wcpu" "${lost:-0}"
        echo "$size $t_rate $l_rate $t_cpu $l_cpu" |
                awk '{ printf "%-7s ratio traced/lttng: MB/s %.2f, cpu/MB %.2f\n", $1, $2 / $3, $4 / $5 }'
done
