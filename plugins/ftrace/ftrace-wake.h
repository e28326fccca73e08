/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Drains woken by the kernel rather than by the clock: the instance's
 * buffer_percent is set, and each CPU's trace_pipe_raw polls readable
 * once that much of its ring buffer holds unread events. The drain
 * timer then only bounds how long a quiet CPU's events wait, so an idle
 * machine wakes the plugin about once a drain period rather than ten
 * times a second, and a busy one is drained before its ring overwrites
 * anything. */

#include <stdbool.h>

struct ftrace_session;

/* The share of a CPU's ring buffer, in percent, that wakes a drain. */
#define FTRACE_WAKE_PERCENT 50u

/* Sets buffer_percent and watches every CPU's buffer: 0, or a negative
 * errno when the kernel cannot wake a reader at a fill level (no
 * buffer_percent file, Linux before 5.1), and then nothing is watched and
 * the timer alone drains. */
int ftrace_wake_start(struct ftrace_session *s);
/* From the drain timer: watches again the CPUs whose watch was dropped
 * after a wake that found nothing to read. */
void ftrace_wake_rearm(struct ftrace_session *s);
void ftrace_wake_stop(struct ftrace_session *s);
