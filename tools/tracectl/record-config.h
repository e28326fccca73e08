/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pbtxt/pbtxt.h"
#include "tracectl.h"

#include "perfetto/config/trace_config.pb-c.h"

/* "10s", "500ms", "2m", "1h", "1d" (a bare number: seconds): 0, -EINVAL,
 * or -ERANGE over TRACECTL_MAX_DURATION_MS. */
int parse_duration_ms(const char *s, uint32_t *ret);
/* "64mb", "512kb", "1gb" (a bare number: MiB): 0, -EINVAL or -ERANGE. */
int parse_size_kb(const char *s, uint32_t *ret);
/* Loads a TraceConfig, binary or text; prints a positioned error and
 * returns EXIT_CONFIG. For a text config, ret_pos (may be NULL) gets
 * where each field was written (pbtxt_parse_positions). */
int load_config(const char *path, bool txt, Perfetto__Protos__TraceConfig **ret, struct pbtxt_positions *ret_pos);
/* The mean bytes between heap samples of --heap (heapprofd's default). */
#define QUICK_HEAP_INTERVAL 4096u

/* The config of quick mode (NULL after printing why). duration_ms 0: until
 * stopped. heap_target: --heap's pid or command line, or NULL. */
Perfetto__Protos__TraceConfig *quick_config(uint32_t duration_ms, uint32_t buffer_kb, char **events, size_t n_events,
                                            char **extra_ds, size_t n_extra, bool process_stats, uint32_t perf_hz,
                                            bool bpf_stacks, const char *heap_target);
/* Waits for the data sources cfg names to be registered (a service just
 * started registers its plugins a moment later); a misspelt name fails at
 * once, and one never registered after the wait unless allow_missing or it
 * is optional (may be NULL). Prints why and returns an exit code. */
int wait_for_data_sources(struct tracectl *t, const Perfetto__Protos__TraceConfig *cfg, bool allow_missing,
                          const char *optional);
