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
