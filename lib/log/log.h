/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Logging for daemons and tools (library code returns errors instead).
 * Under systemd (stderr connected to the journal, JOURNAL_STREAM) messages
 * go to the journal with their priority and errno; otherwise to stderr. */

#include <stdbool.h>
#include <syslog.h>

#include "basic/macro.h"

enum log_target {
        LOG_TARGET_AUTO,
        LOG_TARGET_STDERR,
        LOG_TARGET_JOURNAL,
};

void log_setup(const char *ident, enum log_target target);
void log_set_max_level(int level);
int log_get_max_level(void);
/* Parses "err", "warning", "info", "debug" or a number 0..7. */
int log_level_from_string(const char *s);

/* Logs and returns -abs(error) (or 0 when error is 0). %m formats error. */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *format, ...)
        _printf_(6, 7);

#define log_full_errno(level, error, ...)                                                        \
        ({                                                                                       \
                int _l = (level), _e = (error);                                                  \
                (_l & LOG_PRIMASK) <= log_get_max_level()                                        \
                        ? log_internal(_l, _e, __FILE__, __LINE__, __func__, __VA_ARGS__)        \
                        : (_e > 0 ? -_e : _e);                                                   \
        })

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
