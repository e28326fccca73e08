/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "log/log.h"

static int max_level = LOG_INFO;
static bool use_journal;
static const char *log_ident = "traced";

static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_setup(const char *ident, enum log_target target) {
        if (ident)
                log_ident = ident;
        switch (target) {
        case LOG_TARGET_JOURNAL:
                use_journal = true;
                break;
        case LOG_TARGET_STDERR:
                use_journal = false;
                break;
        default:
                use_journal = stderr_is_journal();
        }
        const char *lvl = getenv("TRACED_LOG_LEVEL");
        if (lvl) {
                int l = log_level_from_string(lvl);
                if (l >= 0)
                        max_level = l;
        }
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
        for (int i = 0; i < 8; i++)
                if (strcmp(s, names[i]) == 0)
                        return i;
        if (strcmp(s, "error") == 0)
                return LOG_ERR;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
                return s[0] - '0';
        return -EINVAL;
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *format, ...) {
        char msg[2048];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        errno = error; /* for %m */
        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);

        if (use_journal) {
                char code_line[32];
                snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);
                if (error > 0)
                        sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", level & LOG_PRIMASK, "ERRNO=%d", error,
                                        "CODE_FILE=%s", file, code_line, "CODE_FUNC=%s", func,
                                        "SYSLOG_IDENTIFIER=%s", log_ident, NULL);
                else
                        sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", level & LOG_PRIMASK, "CODE_FILE=%s", file,
                                        code_line, "CODE_FUNC=%s", func, "SYSLOG_IDENTIFIER=%s", log_ident, NULL);
        } else
                fprintf(stderr, "%s: %s\n", log_ident, msg);

        errno = saved;
        return error > 0 ? -error : 0;
}
