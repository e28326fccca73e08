# Helpers the benchmark scripts share (sourced, not run).

# CPU seconds (utime + stime) of the given pids, from /proc; pids that are
# gone count nothing.
cpu_of_pids() {
        local t=0 p
        for p in "$@"; do
                [ -r "/proc/$p/stat" ] || continue
                t=$(awk -v t="$t" '{ sub(/.*\) /, ""); print t + ($12 + $13) }' "/proc/$p/stat")
        done
        echo "$t $(getconf CLK_TCK)" | awk '{ printf "%.3f\n", $1 / $2 }'
}

# Before a run: the page cache written back and dropped, so that no run
# pays for the writeback of the one before it.
drop_caches() {
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# A column of numbers on stdin -> "min/median/max".
stats() {
        sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                             printf "%s/%s/%s\n", v[1], m, v[NR] }'
}
