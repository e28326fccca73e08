/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The Python frames of a sample of tests/data/pyframes-busy.py, as the
 * profilers' integration tests (linux.bpf_stack, linux.perf) check them. */

#include <stdbool.h>
#include <stddef.h>

#include "bpfstack-collect.h"

#define PYFRAMES_PYTHON "/usr/bin/python3.11"
#define PYFRAMES_SCRIPT TEST_DATA_DIR "/pyframes-busy.py"

/* A Python frame's name: "FUNCTION (SCRIPT:LINE)"; its function into fn. */
bool python_frame(const char *name, char *fn, size_t size);

/* Whether the sample's Python frames read, root first, <module>, main
 * (the main thread only), loop, then work and fib, fib... or csum, or
 * rest (or stop before), with no evaluation frame of the interpreter
 * left. *innermost: the innermost Python function ("" if none);
 * *native_under: how many native frames lie under it (leafward). */
bool python_stack_right_under(const struct sample *s, char *innermost, size_t size, size_t *native_under);
