#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The bash completion of tracectl: sourced with bash-completion's helpers,
# it completes commands, a command's options, and ftrace events.
set -eu
srcdir=${TOP_SRCDIR:-.}
helpers=/usr/share/bash-completion/bash_completion
if [ ! -r "$helpers" ]; then
        echo "SKIP: bash-completion is not installed ($helpers)"
        exit 77
fi
fail=0
# complete LINE: the words offered for the last word of LINE.
complete_line() {
        bash --norc --noprofile -c '
                source "$1" >/dev/null 2>&1
                source "$2"
                COMP_LINE=$3
                COMP_POINT=${#COMP_LINE}
                read -r -a COMP_WORDS <<<"$COMP_LINE"
                [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
                COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
                _tracectl tracectl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                printf "%s\n" "${COMPREPLY[@]}"
        ' _ "$helpers" "$srcdir/completions/tracectl" "$1"
}
expect() {
        local got
        got=$(complete_line "$1")
        if ! grep -qxF -- "$2" <<<"$got"; then
                echo "FAIL: completing \"$1\" does not offer \"$2\"; got: $(tr '\n' ' ' <<<"$got")"
                fail=1
        fi
}
expect "tracectl su" summary
expect "tracectl --socket /run/x.sock rep" report
expect "tracectl query --j" --json
expect "tracectl summary --j" --json
expect "tracectl report --off" --off-cpu
expect "tracectl record --bpf" --bpf-stacks
expect "tracectl sn" snapshot
expect "tracectl tri" trigger
expect "tracectl snapshot flight-recorder --un" --unit
expect "tracectl snapshot flight-recorder --dir" --directory
expect "tracectl trigger --pro" --producer-socket
expect "tracectl record --ds linux.p" linux.perf
# --ds offers every data source a plugin of ours registers.
for ds in $(grep -ho '"linux\.[a-z_]*"' "$srcdir"/plugins/*/plugin.c "$srcdir"/plugins/*/*.h | tr -d '"' | sort -u); do
        expect "tracectl record --ds ${ds%%_*}" "$ds"
done
if [ -d /sys/kernel/tracing/events/sched/sched_switch ]; then
        expect "tracectl record -t 2s sched/sched_sw" sched/sched_switch
        expect "tracectl record sch" 'sched/*'
fi
exit $fail
