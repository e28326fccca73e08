/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the files of the sessions layer only (session*.c): the steps
 * of a session's life that one file starts and another finishes.
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <systemd/sd-event.h>

#include "core/service.h"

uint64_t session_now_usec(clockid_t clk);
/* (Re)arms *src to call cb with s after ms on CLOCK_BOOTTIME. */
int session_add_timer_ms(struct session *s, sd_event_source **src, uint64_t ms, sd_event_time_handler_t cb);
/* -EINVAL with a copy of msg in *ret_error (may be NULL). */
int session_config_error(char **ret_error, const char *msg);
bool session_is_trigger_mode(const struct session *s, int mode);

/* session.c */
/* A new session in the service's list, with its own copy of cfg (and its
 * bytes, for the trace_config packet). */
int session_alloc(struct traced_service *svc, struct consumer *c, uid_t uid, enum session_state state,
                  const Perfetto__Protos__TraceConfig *cfg, struct session **ret);
/* Arms the duration and periodic timers and starts every instance. */
int session_start_now(struct session *s);
/* Marks the session disabled and writes out what it still holds. */
void session_finalize(struct session *s);

/* session-instances.c */
void session_instance_free(struct ds_instance *i);
/* Bounds the work a config can ask for, then compiles its regexes once. */
int session_compile_regexes(struct session *s, char **ret_error);
void session_free_regexes(struct session *s);
void session_setup_data_sources(struct session *s);
int session_start_instance(struct session *s, struct ds_instance *inst);
void session_check_all_started(struct session *s);
/* The incremental_state_config timer. */
int session_on_clear_timer(sd_event_source *src, uint64_t usec, void *userdata);

/* session-flush.c */
void session_flush_ack(struct pending_flush *f, uint16_t producer_id);
void session_check_all_stopped(struct session *s);
void session_stop_all_instances(struct session *s);
