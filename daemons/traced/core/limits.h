/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The service core's limits: numbers only, included by any layer. */

/* Limits, in line with upstream's defaults and guardrails. */
#define SERVICE_DEFAULT_SMB_SIZE (256u * 1024u)
#define SERVICE_MAX_SMB_SIZE (32u * 1024u * 1024u)
#define SERVICE_DEFAULT_SMB_PAGE_SIZE 4096u
#define SERVICE_MAX_SESSIONS 32u
#define SERVICE_MAX_SESSIONS_PER_UID 5u
#define SERVICE_MAX_BUFFERS_PER_SESSION 128u
#define SERVICE_MAX_TOTAL_BUFFER_BYTES (1024ull * 1024u * 1024u) /* per session */
#define SERVICE_MAX_DATA_SOURCES_PER_PRODUCER 1024u
#define SERVICE_MAX_PRODUCERS 512u
#define SERVICE_MAX_PRODUCERS_PER_MACHINE 128u /* per remote machine */
/* What a registration may hold (see man traced(8), LIMITS): a descriptor
 * as large as a frame carries and a QueryServiceState reply can list
 * (ports/consumer-query.c), names, and the memory all of a producer's, a
 * uid's and everybody's registrations take (name + descriptor +
 * bookkeeping). */
#define SERVICE_MAX_NAME_LENGTH 1024u
#define SERVICE_DEFAULT_FLUSH_TIMEOUT_MS 5000u
#define SERVICE_DEFAULT_STOP_TIMEOUT_MS 5000u
/* How long a started session waits for its data sources to acknowledge
 * their start before duration_ms counts anyway and the late ones are
 * named (upstream reports slow starters after the same time). */
#define SERVICE_DATA_SOURCE_START_TIMEOUT_MS 20000u
#define SERVICE_DEFAULT_FILE_WRITE_PERIOD_MS 5000u
/* A stop of the service (SIGTERM) flushes every session's data sources
 * for at most this long (or the session's own flush_timeout_ms, when
 * shorter), then stops them, waiting for stop acknowledgements as long
 * at most; core.h bounds the whole stop. */
#define SERVICE_STOP_FLUSH_TIMEOUT_MS 5000u
#define SERVICE_MIN_FILE_WRITE_PERIOD_MS 100u
#define SERVICE_MAX_DURATION_MS (7u * 24u * 3600u * 1000u)
#define SERVICE_SYNC_MARKER_PERIOD_USEC (5u * 1000000u)
#define SERVICE_MAX_TRIGGERS_PER_SESSION 1024u
#define SERVICE_MAX_TRIGGER_HISTORY 4096u
/* Per TraceConfig: every producer filter is tried against every producer
 * on EnableTracing and on each registration, so their number is bounded
 * (and each regex is, see lib/basic/regex-limits.h). */
#define SERVICE_MAX_CONFIG_DATA_SOURCES 1024u
#define SERVICE_MAX_CONFIG_REGEX_FILTERS 64u
#define SERVICE_CONFIG_REGEX_BUDGET 1024u /* expanded size of all of them, see regex_compile_budgeted */
#define SERVICE_MAX_CONFIG_NAME_FILTERS 4096u
#define SERVICE_MAX_CONFIG_TRIGGERS 256u
#define SERVICE_MAX_TRIGGERS_PER_REQUEST 64u /* names in one ActivateTriggers */
#define SERVICE_MAX_DS_ERRORS 32u           /* data source errors a session keeps */
#define SERVICE_MAX_DS_ERROR_LEN 512u       /* bytes of a reported field or message */
/* A write_into_file fd that takes nothing this long fails its session. */
#define SERVICE_OUTPUT_STALL_USEC (30u * 1000000u)
/* Rotation (TraceConfig.traced_rotation): the smallest file size and
 * period a session may ask for. */
#define SERVICE_MIN_ROTATE_BYTES (64u * 1024u)
#define SERVICE_MIN_ROTATE_PERIOD_MS 1000u
#define SERVICE_SEQUENCE_ID 1u /* trusted_packet_sequence_id of the service's own packets */
