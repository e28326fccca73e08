/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "basic/socket-address.h"
#include "supervisor/config.h"

struct ctx {
        struct traced_config *cfg;
        char error[512];
};

/* Records why the current line is bad; inih stops and reports its
 * number. */
_printf_(2, 3) static int fail(struct ctx *k, const char *fmt, ...) {
        va_list ap;
        if (!k->error[0]) {
                va_start(ap, fmt);
                vsnprintf(k->error, sizeof(k->error), fmt, ap);
                va_end(ap);
        }
        return 0;
}

static char *trim(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = '\0';
        return s;
}

static char *mfree_str(char *p) {
        free(p);
        return NULL;
}

static bool valid_pattern(const char *t) {
        /* A data source name, optionally ending in '*' (a prefix). */
        size_t n = strlen(t);
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (t[i] == '*' ? i != n - 1 : (t[i] <= ' ' || t[i] == ','))
                        return false;
        return true;
}

static int parse_user(const char *t, uid_t *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(t, &end, 10);
        if (!errno && end != t && !*end && t[0] != '-' && v < (unsigned long) (uid_t) -1) {
                *ret = (uid_t) v;
                return 0;
        }
        struct passwd *pw = getpwnam(t);
        if (!pw)
                return -ESRCH;
        *ret = pw->pw_uid;
        return 0;
}

/* journald's sizes: a number of bytes, or with a K, M, G or T suffix
 * (1024-based). */
static int parse_bytes(const char *t, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(t, &end, 10);
        if (errno || end == t || t[0] == '-')
                return -EINVAL;
        unsigned shift = 0;
        switch (*end) {
        case '\0':
                break;
        case 'K': case 'k':
                shift = 10;
                break;
        case 'M': case 'm':
                shift = 20;
                break;
        case 'G': case 'g':
                shift = 30;
                break;
        case 'T': case 't':
                shift = 40;
                break;
        default:
                return -EINVAL;
        }
        if (*end && end[1] != '\0')
                return -EINVAL;
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = (uint64_t) v << shift;
        return 0;
}

/* trusted_data_sources / trusted_users: comma-separated, replacing the
 * default (an empty value: nothing reserved / nobody extra). */
static int trusted_list(struct ctx *k, const char *name, const char *value) {
        struct traced_config *cfg = k->cfg;
        bool names = strcmp(name, "trusted_data_sources") == 0;
        _cleanup_free_ char *copy = strdup(value);
        if (!copy)
                return 0;
        if (names) {
                for (unsigned i = 0; i < cfg->n_trusted_data_sources; i++)
                        free(cfg->trusted_data_sources[i]);
                cfg->n_trusted_data_sources = 0;
                cfg->trusted_data_sources_set = true;
        } else
                cfg->n_trusted_uids = 0;
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                char *t = trim(tok);
                if (!*t)
                        continue;
                if ((names ? cfg->n_trusted_data_sources : cfg->n_trusted_uids) == TRACED_CONFIG_MAX_TRUSTED)
                        return fail(k, "more than %u entries in field \"%s\"", TRACED_CONFIG_MAX_TRUSTED, name);
                if (names) {
                        if (!valid_pattern(t))
                                return fail(k, "\"%s\" is not a data source name or prefix* (field \"%s\")", t, name);
                        cfg->trusted_data_sources[cfg->n_trusted_data_sources] = strdup(t);
                        if (!cfg->trusted_data_sources[cfg->n_trusted_data_sources])
                                return 0;
                        cfg->n_trusted_data_sources++;
                } else {
                        uid_t uid;
                        if (parse_user(t, &uid) < 0)
                                return fail(k, "unknown user \"%s\" (field \"%s\")", t, name);
                        cfg->trusted_uids[cfg->n_trusted_uids++] = uid;
                }
        }
        return 1;
}

/* A comma-separated list of socket addresses, each checked now so that
 * a typo is reported with its line rather than at bind time. */
static int address_list(struct ctx *k, const char *name, const char *value) {
        struct traced_config *cfg = k->cfg;
        bool producers = strcmp(name, "producer_sockets") == 0;
        char **slot = producers ? &cfg->producer_sockets : &cfg->relay_endpoint_on;
        char item[256];
        size_t n = 0;

        if (strlen(value) >= 4096)
                return fail(k, "field \"%s\" is too long", name);
        for (const char *p = value;; p++) {
                if (*p != ',' && *p != '\0') {
                        if (n + 1 >= sizeof(item))
                                return fail(k, "an address in field \"%s\" is too long", name);
                        item[n++] = *p;
                        continue;
                }
                item[n] = '\0';
                /* Spaces around commas are allowed, not inside. */
                char *s = item, *e = item + n;
                while (*s == ' ' || *s == '\t')
                        s++;
                while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                        *--e = '\0';
                struct socket_address sa;
                if (!*s)
                        return fail(k, "empty address in field \"%s\"", name);
                if (socket_address_parse(s, &sa) < 0)
                        return fail(k, "\"%s\" is not a socket address (a path, @abstract, HOST:PORT, [V6]:PORT "
                                       "or vsock://CID:PORT) in field \"%s\"",
                                    s, name);
                n = 0;
                if (!*p)
                        break;
        }
        /* Stored without blanks: the lists are matched entry by entry. */
        char *copy = malloc(strlen(value) + 1), *d = copy;
        if (!copy)
                return 0;
        for (const char *p = value; *p; p++)
                if (*p != ' ' && *p != '\t')
                        *d++ = *p;
        *d = '\0';
        free(*slot);
        *slot = copy;
        return 1;
}

static int parse_yes_no(const char *value, bool *ret) {
        if (strcasecmp(value, "yes") == 0 || strcasecmp(value, "true") == 0 || strcmp(value, "1") == 0)
                *ret = true;
        else if (strcasecmp(value, "no") == 0 || strcasecmp(value, "false") == 0 || strcmp(value, "0") == 0)
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
        struct ctx *k = user;
        struct traced_config *cfg = k->cfg;

        if (strcasecmp(section, "service") == 0) {
                if (strcmp(name, "user") == 0 || strcmp(name, "plugin_user") == 0) {
                        char **slot = name[0] == 'u' ? &cfg->user : &cfg->plugin_user;
                        if (!value[0] || strlen(value) > 32 || strpbrk(value, " \t:/"))
                                return fail(k, "\"%s\" is not a user name or uid (field \"%s\")", value, name);
                        free(*slot);
                        *slot = strdup(value);
                        return *slot ? 1 : 0;
                }
                if (strcmp(name, "plugin_user_required") == 0) {
                        if (parse_yes_no(value, &cfg->plugin_user_required) < 0)
                                return fail(k, "\"%s\" is not yes or no (field \"%s\")", value, name);
                        return 1;
                }
                if (strcmp(name, "trace_directory") == 0 || strcmp(name, "sessions_directory") == 0) {
                        bool trace = name[0] == 't';
                        char **slot = trace ? &cfg->trace_dir : &cfg->sessions_dir;
                        bool *none = trace ? &cfg->no_trace_dir : &cfg->no_sessions_dir;
                        if (!value[0]) {
                                *slot = mfree_str(*slot);
                                *none = true;
                                return 1;
                        }
                        if (value[0] != '/' || strstr(value, "/../") || strstr(value, "/./") ||
                            strlen(value) >= 1000)
                                return fail(k, "\"%s\" is not an absolute path without . or .. (field \"%s\")",
                                            value, name);
                        free(*slot);
                        *slot = strdup(value);
                        *none = false;
                        return *slot ? 1 : 0;
                }
                if (strcmp(name, "max_use") == 0 || strcmp(name, "keep_free") == 0) {
                        uint64_t v;
                        if (parse_bytes(value, &v) < 0)
                                return fail(k, "\"%s\" is not a size (bytes, or a number with K, M, G or T) "
                                            "(field \"%s\")",
                                            value, name);
                        *(name[0] == 'm' ? &cfg->max_use : &cfg->keep_free) = v;
                        return 1;
                }
                if (strcmp(name, "trusted_data_sources") == 0 || strcmp(name, "trusted_users") == 0)
                        return trusted_list(k, name, value);
                if (strcmp(name, "producer_sockets") == 0 || strcmp(name, "relay_endpoint_on") == 0)
                        return address_list(k, name, value);
                return fail(k, "unknown field \"%s\" in section [%s]", name, section);
        }
        if (strcasecmp(section, "plugins") != 0)
                return fail(k, "unknown section [%s]", section);
        if (strcmp(name, "enabled") == 0 || strcmp(name, "in_process") == 0) {
                bool v;
                if (parse_yes_no(value, &v) < 0)
                        return fail(k, "\"%s\" is not yes or no (field \"%s\")", value, name);
                if (name[0] == 'e')
                        cfg->plugins_enabled = v;
                else
                        cfg->plugins_in_process = v;
                return 1;
        }
        if (strcmp(name, "watchdog_sec") == 0 || strcmp(name, "start_timeout_sec") == 0 ||
            strcmp(name, "idle_stop_sec") == 0) {
                bool watchdog = name[0] == 'w', idle = name[0] == 'i';
                unsigned max = watchdog ? TRACED_CONFIG_MAX_WATCHDOG_SEC
                               : idle   ? TRACED_CONFIG_MAX_IDLE_STOP_SEC
                                        : TRACED_CONFIG_MAX_START_TIMEOUT_SEC;
                char *end;
                errno = 0;
                unsigned long v = strtoul(value, &end, 10);
                if (errno || end == value || *end || value[0] == '-' || v > max)
                        return fail(k, "\"%s\" is not a number of seconds from 0 to %u (field \"%s\")", value, max,
                                    name);
                if (watchdog)
                        cfg->watchdog_sec = (unsigned) v;
                else if (idle)
                        cfg->idle_stop_sec = (unsigned) v;
                else
                        cfg->start_timeout_sec = (unsigned) v;
                return 1;
        }
        if (strcmp(name, "hosts") == 0) {
                if (strcmp(value, "eager") == 0)
                        cfg->plugin_hosts_lazy = false;
                else if (strcmp(value, "lazy") == 0)
                        cfg->plugin_hosts_lazy = true;
                else
                        return fail(k, "\"%s\" is not eager or lazy (field \"%s\")", value, name);
                return 1;
        }
        if (strcmp(name, "directory") == 0) {
                if (value[0] != '/')
                        return fail(k, "\"%s\" is not an absolute path (field \"%s\")", value, name);
                free(cfg->plugin_dir);
                cfg->plugin_dir = strdup(value);
                return cfg->plugin_dir ? 1 : 0;
        }
        if (strcmp(name, "disable") == 0) {
                _cleanup_free_ char *copy = strdup(value);
                if (!copy)
                        return 0;
                for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                        char *t = trim(tok);
                        if (!*t)
                                continue;
                        if (cfg->n_disabled == TRACED_CONFIG_MAX_DISABLED)
                                return fail(k, "too many plugins in field \"%s\"", name);
                        cfg->disabled[cfg->n_disabled] = strdup(t);
                        if (!cfg->disabled[cfg->n_disabled])
                                return 0;
                        cfg->n_disabled++;
                }
                return 1;
        }
        return fail(k, "unknown field \"%s\" in section [%s]", name, section);
}

int traced_config_load(const char *path, struct traced_config *cfg, char **ret_error) {
        *cfg = (struct traced_config) { .plugins_enabled = true, .watchdog_sec = TRACED_CONFIG_DEFAULT_WATCHDOG_SEC,
                                        .start_timeout_sec = TRACED_CONFIG_DEFAULT_START_TIMEOUT_SEC,
                                        .idle_stop_sec = TRACED_CONFIG_DEFAULT_IDLE_STOP_SEC,
                                        .plugin_hosts_lazy = true };
        if (ret_error)
                *ret_error = NULL;
        FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        struct ctx k = { .cfg = cfg };
        int line = ini_parse_file(f, handler, &k);
        fclose(f);
        if (line != 0) {
                if (ret_error && asprintf(ret_error, "%s:%d: %s", path, line,
                                          k.error[0] ? k.error : "not a valid line (expected [section] or key = value)") < 0)
                        *ret_error = NULL;
                traced_config_done(cfg);
                return -EINVAL;
        }
        return 0;
}

void traced_config_done(struct traced_config *cfg) {
        free(cfg->plugin_dir);
        free(cfg->user);
        free(cfg->plugin_user);
        free(cfg->trace_dir);
        for (unsigned i = 0; i < cfg->n_disabled; i++)
                free(cfg->disabled[i]);
        for (unsigned i = 0; i < cfg->n_trusted_data_sources; i++)
                free(cfg->trusted_data_sources[i]);
        free(cfg->producer_sockets);
        free(cfg->relay_endpoint_on);
        free(cfg->sessions_dir);
        *cfg = (struct traced_config) { .plugins_enabled = true, .watchdog_sec = TRACED_CONFIG_DEFAULT_WATCHDOG_SEC,
                                        .start_timeout_sec = TRACED_CONFIG_DEFAULT_START_TIMEOUT_SEC,
                                        .idle_stop_sec = TRACED_CONFIG_DEFAULT_IDLE_STOP_SEC,
                                        .plugin_hosts_lazy = true };
}

const char *traced_config_sessions_directory(const struct traced_config *cfg) {
        if (cfg->no_sessions_dir)
                return NULL;
        return cfg->sessions_dir ? cfg->sessions_dir : TRACED_CONFIG_DEFAULT_SESSIONS_DIR;
}

const char *traced_config_trace_directory(const struct traced_config *cfg) {
        if (cfg->no_trace_dir)
                return NULL;
        return cfg->trace_dir ? cfg->trace_dir : TRACED_CONFIG_DEFAULT_TRACE_DIR;
}

bool traced_config_plugin_disabled(const struct traced_config *cfg, const char *name) {
        for (unsigned i = 0; i < cfg->n_disabled; i++)
                if (strcmp(cfg->disabled[i], name) == 0)
                        return true;
        return false;
}
