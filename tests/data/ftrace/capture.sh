#!/bin/sh
# Captures ftrace test fixtures from the running kernel into this folder:
# the page and event header layouts, a few event formats, and raw ring
# buffer pages (per_cpu/cpu0/trace_pipe_raw) of an instance that recorded
# sched_switch, sched_waking and three trace_marker writes. Needs root.
#   tests/data/ftrace/capture.sh
set -eu
out=$(cd "$(dirname "$0")" && pwd)
t=/sys/kernel/tracing
[ -e "$t/trace_marker" ] || mount -t tracefs nodev "$t"
cp "$t/events/header_page" "$out/header_page"
cp "$t/events/header_event" "$out/header_event"
for e in sched/sched_switch sched/sched_waking ftrace/print task/task_newtask task/task_rename \
         sched/sched_process_fork irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry \
         power/cpu_frequency power/cpu_idle raw_syscalls/sys_enter raw_syscalls/sys_exit \
         workqueue/workqueue_execute_start workqueue/workqueue_queue_work; do
        cp "$t/events/$e/format" "$out/format-$(basename "$e")"
done
i="$t/instances/traced_capture_$$"
mkdir "$i"
trap 'echo 0 > "$i/tracing_on"; rmdir "$i"' EXIT
echo boot > "$i/trace_clock"
echo 1 > "$i/options/copy_trace_marker" 2>/dev/null || true
echo 1 > "$i/events/sched/sched_switch/enable"
echo 1 > "$i/events/sched/sched_waking/enable"
echo 1 > "$i/tracing_on"
taskset -c 0 sh -c "for n in 1 2 3; do echo fixture-marker-\$n > $t/trace_marker; sleep 0.05; done"
taskset -c 0 sh -c 'for n in 1 2 3 4 5; do sleep 0.01; done'
echo 0 > "$i/tracing_on"
# Whole pages, as a reader gets them.
dd if="$i/per_cpu/cpu0/trace_pipe_raw" of="$out/cpu0.pages" bs=4096 iflag=nonblock 2>/dev/null || true
chmod 0644 "$out"/header_* "$out"/format-* "$out"/cpu0.pages
ls -l "$out"
