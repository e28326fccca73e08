#!/bin/bash
# How the service's cost grows, and what it costs idle.
#
# Scaling: VOLUME_MB of 1 KB packets written by 1, 8 and 64 example-producer
# processes (each its own connection and SMB), into 1 or 8 concurrent
# sessions (tracectl record, write_into_file every 100 ms, 32 MB buffer
# each), under RING_BUFFER and DISCARD. Per row, over ROUNDS rounds
# (min/median/max): MB/s (all data / wall time from start to the last
# writer done), service CPU per MB (supervisor + core), the core's peak
# RSS, and packets lost (expected minus found in the trace files: any
# loss fails the benchmark). The growth from 1 to 64 producers is given
# as the ratio of the medians and as the ratio within each round
# (min/median/max over the rounds), which this host's slow stretches
# affect far less.
#
# Every producer gets a 1 MiB SMB, so 64 producers keep 64 times the
# shared memory of one in flight, and the bytes the service reads have
# left the caches before it gets to them. Two more rows hold that
# memory equal, 32 MiB either way (the largest SMB the service grants):
# one producer with a 32 MiB SMB, and 64 producers with 512 KiB each.
# Their ratio is what the number of producers costs on its own; the
# ratio of one producer at 32 MiB to one at 1 MiB is what the shared
# memory's size costs.
#
# Idle: start-to-ready (launch to the first answered query), RSS of the
# supervisor, the core and each plugin host, and the core's anonymous RSS
# per idle producer connection (64 producers registered, no session;
# their SMBs are shared memory and counted apart).
#
# Run as root from a build directory:
#   ../bench/service-scaling.sh [VOLUME_MB]      (default 1024)
# Environment: ROUNDS (default 3). Not part of make check.
set -eu

build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)
die() { echo "service-scaling: $*" >&2; exit 1; }
[ -x "$build/traced" ] && [ -x "$build/example-producer" ] && [ -x "$build/tracectl" ] ||
        die "run from the build directory"
volume_mb=${1:-1024}
rounds=${ROUNDS:-3}
# shellcheck source=bench/lib.sh
. "$src/lib.sh"
work=$(mktemp -d /tmp/traced-scaling-XXXXXX)
cleanup() {
        spawn_stop
        [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM


wait_for() {
        for _ in $(seq 400); do [ -e "$1" ] && return 0; sleep 0.025; done
        return 1
}

status_kb() { # pid field -> kB
        awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

start_traced() { # dir [extra args] -> sets svc core
        local d=$1
        shift
        spawn "$build/traced" --producer-socket="$d/p" --consumer-socket="$d/c" --log-level=warning "$@" \
                2>"$d/service.log"
        svc=$spawned_pid
        wait_for "$d/c" && wait_for "$d/p" || die "traced did not start ($(tail -n 2 "$d/service.log"))"
        for _ in $(seq 100); do
                core=$(pgrep -P "$svc" -x traced-core || pgrep -P "$svc" | head -n 1 || true)
                [ -n "$core" ] && break
                sleep 0.02
        done
        [ -n "$core" ] || die "traced's core process did not appear"
}

stop_all() {
        spawn_stop
}

# One run: prints "MB/s service_cpu_s peak_rss_kb lost".
run_scaling() {
        local n=$1 sessions=$2 policy=$3 smb_kb=$4 d=$work/run
        rm -rf "$d" && mkdir -p "$d"
        drop_caches
        start_traced "$d" --no-plugins
        local packets=$((volume_mb * 1024 / (n * sessions)))
        [ "$packets" -gt 0 ] || die "volume too small for $n producers x $sessions sessions"
        local i
        for i in $(seq "$n"); do
                spawn "$build/example-producer" --socket "$d/p" --packets "$packets" --size 1024 --smb-kb "$smb_kb" \
                        --page-kb 64 2>"$d/writer.$i.log"
        done
        for i in $(seq "$n"); do
                for _ in $(seq 400); do grep -q ready "$d/writer.$i.log" 2>/dev/null && break; sleep 0.025; done
                grep -q ready "$d/writer.$i.log" || die "producer $i did not register"
        done
        cat >"$d/cfg" <<CFG
buffers { size_kb: 32768 fill_policy: $policy }
data_sources { config { name: "example.data" buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP } }
write_into_file: true
file_write_period_ms: 100
CFG
        local before t0 t1 after cps=()
        # shellcheck disable=SC2086
        before=$(cpu_of_pids "$svc" $core)
        t0=$(date +%s.%N)
        for i in $(seq "$sessions"); do
                spawn "$build/tracectl" --socket "$d/c" record -c "$d/cfg" --txt -o "$d/t.$i.pftrace" --no-summary \
                        >"$d/tracectl.$i.log" 2>&1
                cps+=("$spawned_pid")
        done
        local want=$((n * sessions)) done_n=0
        for _ in $(seq 12000); do
                done_n=$(cat "$d"/writer.*.log | grep -c wrote || true)
                [ "$done_n" -ge "$want" ] && break
                sleep 0.01
        done
        t1=$(date +%s.%N)
        [ "$done_n" -ge "$want" ] || die "$n x $sessions $policy: only $done_n of $want writers finished"
        sleep 0.3
        for p in "${cps[@]}"; do kill -INT "$p"; done
        for p in "${cps[@]}"; do spawn_wait "$p" || die "tracectl failed ($(tail -n 2 "$d"/tracectl.*.log))"; done
        # shellcheck disable=SC2086
        after=$(cpu_of_pids "$svc" $core)
        local rss
        rss=$(status_kb "$core" VmHWM)
        stop_all
        local found=0 k
        for i in $(seq "$sessions"); do
                k=$("$build/tracectl" summary "$d/t.$i.pftrace" | awk '$1 == "for_testing" { print $2; exit }')
                found=$((found + ${k:-0}))
        done
        local lost=$((want * packets - found))
        [ "$lost" -eq 0 ] || die "$n producers x $sessions sessions, $policy: $lost of $((want * packets)) packets lost"
        echo "$t0 $t1 $before $after $rss $lost" |
                awk -v mb="$((want * packets / 1024))" '{ printf "%.1f %.3f %d %d\n", mb / ($2 - $1), $4 - $3, $5, $6 }'
}


# producers:sessions:policy:SMB kB
configs="1:1:RING_BUFFER:1024 8:1:RING_BUFFER:1024 64:1:RING_BUFFER:1024 1:8:RING_BUFFER:1024
8:8:RING_BUFFER:1024 1:1:DISCARD:1024 8:1:DISCARD:1024 64:1:DISCARD:1024 1:1:RING_BUFFER:32768
64:1:RING_BUFFER:512"
echo "$(nproc) CPUs; $volume_mb MB of 1 KB packets per run, $rounds rounds"
for r in $(seq "$rounds"); do
        order=$configs
        [ $((r % 2)) = 0 ] && order=$(echo "$configs" | tr ' ' '\n' | tac)
        for c in $order; do
                IFS=: read -r n sessions policy smb <<<"$c"
                run_scaling "$n" "$sessions" "$policy" "$smb" >>"$work/$n-$sessions-$policy-$smb.rows"
        done
        echo "round $r done" >&2
done

printf "\n%-9s %-8s %-12s %-8s %-24s %-30s %s\n" producers sessions policy "SMB kB" "MB/s" "service cpu s/MB" \
        "core peak RSS MB"
for c in $configs; do
        IFS=: read -r n sessions policy smb <<<"$c"
        f=$work/$n-$sessions-$policy-$smb.rows
        mb=$((volume_mb / (n * sessions) * n * sessions))
        printf "%-9s %-8s %-12s %-8s %-24s %-30s %s\n" "$n" "$sessions" "$policy" "$smb" "$(cut -d' ' -f1 "$f" | stats)" \
                "$(awk -v mb="$mb" '{ print $2 / mb }' "$f" | stats)" "$(awk '{ print $3 / 1024 }' "$f" | stats)"
done
# "label" rows-of-A rows-of-B: service CPU per MB of B over A, as the
# ratio of the medians and within each round (the two runs minutes apart
# at most, so this host's slow and fast stretches weigh on both alike),
# then over the rounds.
ratio() {
        local a b
        a=$(awk -v mb="$volume_mb" '{ print $2 / mb }' "$work/$2.rows" | stats | cut -d/ -f2)
        b=$(awk -v mb="$volume_mb" '{ print $2 / mb }' "$work/$3.rows" | stats | cut -d/ -f2)
        echo "$a $b" | awk -v l="$1" '{ printf "%s (medians): %.2f\n", l, $2 / $1 }'
        echo "$1 (per round, min/median/max): $(paste -d' ' "$work/$2.rows" "$work/$3.rows" |
                awk '{ printf "%.2f\n", $6 / $2 }' | stats)"
}
for policy in RING_BUFFER DISCARD; do
        ratio "$policy: service cpu/MB, 64 producers / 1" "1-1-$policy-1024" "64-1-$policy-1024"
done
ratio "RING_BUFFER, 32 MiB of SMBs either way: 64 producers / 1" "1-1-RING_BUFFER-32768" "64-1-RING_BUFFER-512"
ratio "RING_BUFFER, one producer: 32 MiB SMB / 1 MiB" "1-1-RING_BUFFER-1024" "1-1-RING_BUFFER-32768"

# Idle figures.
echo
d=$work/idle
rm -rf "$d" && mkdir -p "$d"
t0=$(date +%s%N)
plugin_args=()
if [ -x "$build/traced-plugin-host" ] && [ -d "$build/plugins/.libs" ]; then
        plugin_args=(--plugin-dir="$build/plugins/.libs" --plugin-host="$build/traced-plugin-host")
fi
start_traced "$d" "${plugin_args[@]}"
for _ in $(seq 1000); do
        "$build/tracectl" --socket "$d/c" query >/dev/null 2>&1 && break
        sleep 0.005
done
t1=$(date +%s%N)
sleep 2 # let the plugin hosts register
echo "start to ready (launch to the first answered query): $(((t1 - t0) / 1000000)) ms"
printf "%-24s %8s %10s\n" process "pid" "RSS kB"
printf "%-24s %8s %10s\n" supervisor "$svc" "$(status_kb "$svc" VmRSS)"
for p in $(pgrep -P "$svc"); do
        printf "%-24s %8s %10s\n" "$(cat "/proc/$p/comm")" "$p" "$(status_kb "$p" VmRSS)"
        for h in $(pgrep -P "$p" || true); do
                printf "%-24s %8s %10s\n" "  $(cat "/proc/$h/comm")" "$h" "$(status_kb "$h" VmRSS)"
        done
done
stop_all

d=$work/idle-conns
rm -rf "$d" && mkdir -p "$d"
start_traced "$d" --no-plugins
sleep 0.3
anon0=$(status_kb "$core" RssAnon)
shm0=$(status_kb "$core" RssShmem)
for i in $(seq 64); do
        spawn "$build/example-producer" --socket "$d/p" --packets 1 --size 16 --smb-kb 256 2>"$d/w.$i.log"
done
for i in $(seq 64); do
        for _ in $(seq 400); do grep -q ready "$d/w.$i.log" 2>/dev/null && break; sleep 0.025; done
done
sleep 0.5
anon1=$(status_kb "$core" RssAnon)
shm1=$(status_kb "$core" RssShmem)
echo "64 idle producer connections: core anonymous RSS +$(((anon1 - anon0) / 64)) kB per connection" \
        "(shared memory +$(((shm1 - shm0) / 64)) kB each; their SMBs are 256 kB)"
stop_all
