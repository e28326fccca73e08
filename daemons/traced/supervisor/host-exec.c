/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "supervisor/host-exec.h"
#include "supervisor/privileges.h"
#include "supervisor/selinux-label.h"

extern char **environ;

#define CACHE_ENV "CACHE_DIRECTORY="

bool host_exec_file_trusted(const struct stat *st, const char *path, bool want_dir, char *why, size_t why_size) {
        if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
                snprintf(why, why_size, "%s is not a %s", path, want_dir ? "directory" : "regular file");
                return false;
        }
        if (st->st_uid != 0 && st->st_uid != geteuid()) {
                snprintf(why, why_size, "%s is owned by uid %u, not by root", path, (unsigned) st->st_uid);
                return false;
        }
        if (st->st_mode & S_IWOTH) {
                snprintf(why, why_size, "%s is writable by every user", path);
                return false;
        }
        return true;
}

/* Moves fd to at least 10, so that the child's placing of 3 and up
 * cannot overwrite it. */
static int park(int fd) {
        if (fd >= 10)
                return fd;
        int k = fcntl(fd, F_DUPFD_CLOEXEC, 10);
        int r = -errno;
        safe_close(fd);
        return k < 0 ? r : k;
}

static int open_plugin(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open plugin %s: %m", path);
        struct stat st;
        char why[512];
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                safe_close(fd);
                return log_error_errno(r, "Failed to check plugin %s: %m", path);
        }
        if (!host_exec_file_trusted(&st, path, false, why, sizeof(why))) {
                safe_close(fd);
                log_error("Not running plugin %s: %s.", path, why);
                return -EPERM;
        }
        return park(fd);
}

/* The host's own directory under $CACHE_DIRECTORY (its first entry):
 * root's, of the hosts' group, mode 2770 (made and given its group with
 * that group as the supervisor's file system group: no CAP_CHOWN);
 * -ENOENT when traced has none. */
static int open_cache(const char *name, gid_t gid) {
        const char *env = getenv("CACHE_DIRECTORY");
        if (!env || env[0] != '/')
                return -ENOENT;
        char parent[4096];
        if ((size_t) snprintf(parent, sizeof(parent), "%.*s", (int) strcspn(env, ":"), env) >= sizeof(parent))
                return -ENAMETOOLONG;
        _cleanup_close_ int dir = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        gid_t saved = (gid_t) setfsgid(gid);
        int r = (gid_t) setfsgid((gid_t) -1) == gid ? 0 : -EPERM;
        if (r == 0 && mkdirat(dir, name, 02770) < 0 && errno != EEXIST)
                r = -errno;
        int fd = r < 0 ? -EBADF : openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r == 0 && fd < 0)
                r = -errno;
        struct stat st;
        if (r == 0 && fstat(fd, &st) < 0)
                r = -errno;
        else if (r == 0 && st.st_uid != geteuid())
                r = -EPERM; /* not made here: left alone */
        else if (r == 0 && ((st.st_gid != gid && fchown(fd, (uid_t) -1, gid) < 0) ||
                            ((st.st_mode & 07777) != 02770 && fchmod(fd, 02770) < 0)))
                r = -errno;
        (void) setfsgid(saved);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        return park(fd);
}

/* environ without CACHE_DIRECTORY, and ours. */
static int cache_env(struct host_exec *e) {
        size_t n = 0;
        while (environ[n])
                n++;
        char **envp = calloc(n + 2, sizeof(char *));
        if (!envp)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], CACHE_ENV, strlen(CACHE_ENV)) != 0)
                        envp[k++] = environ[i];
        if (e->cache_fd >= 0)
                envp[k++] = (char *) CACHE_ENV "/proc/self/fd/" HOST_EXEC_CACHE_FD_STR;
        envp[k] = NULL;
        e->envp = envp;
        e->own_envp = true;
        return 0;
}

int host_exec_prepare(struct host_exec *e, const struct host_identity *id, const char *name,
                      const char *plugin_path, uint64_t caps, char *const *args, size_t n_args) {
        *e = (struct host_exec) {
                .envp = environ,
                .plugin_fd = -EBADF,
                .cache_fd = -EBADF,
                .switch_user = id->switch_user,
                .uid = id->uid,
                .gid = id->gid,
                .caps = caps,
        };
        assert(n_args >= 1 && n_args <= ELEMENTSOF(e->argv) - 3);
        int r = selinux_label_host_context(plugin_path, e->exec_context, sizeof(e->exec_context));
        if (r < 0)
                return log_error_errno(r, "Failed to find the SELinux domain of the plugin host for %s: %m",
                                       plugin_path);
        e->plugin_fd = open_plugin(plugin_path);
        if (e->plugin_fd < 0)
                return e->plugin_fd;
        size_t k = 0;
        for (size_t i = 0; i < n_args; i++)
                e->argv[k++] = args[i];
        e->argv[k++] = (char *) "--plugin-fd=" HOST_EXEC_PLUGIN_FD_STR;
        e->argv[k++] = (char *) plugin_path;
        e->argv[k] = NULL;
        if (!e->switch_user)
                return 0;
        r = name ? open_cache(name, e->gid) : -ENOENT;
        if (r >= 0)
                e->cache_fd = r;
        else if (r != -ENOENT)
                log_warning_errno(r, "Failed to give the plugin host for %s a cache directory; it runs without: %m",
                                  plugin_path);
        r = cache_env(e);
        if (r < 0) {
                host_exec_done(e);
                return log_oom();
        }
        return 0;
}

/* Appends s to buf (of size, holding *len), async-signal-safe. */
static void append(char *buf, size_t size, size_t *len, const char *s) {
        while (*s && *len + 1 < size)
                buf[(*len)++] = *s++;
        buf[*len] = '\0';
}

static void append_uint(char *buf, size_t size, size_t *len, unsigned long v) {
        char digits[24];
        size_t n = sizeof(digits) - 1;
        digits[n] = '\0';
        do
                digits[--n] = (char) ('0' + v % 10);
        while ((v /= 10) && n > 0);
        append(buf, size, len, digits + n);
}

/* The exec of the host failed with error: says on the child's standard
 * error (traced's log, or a probe's) which path this process (the hosts'
 * user) could not reach: the first directory on the way it may not
 * search, else the file. Async-signal-safe. */
static void say_exec_failed(const char *path, int error) {
        char msg[PATH_MAX + 256], prefix[PATH_MAX];
        size_t len = 0, k;
        const char *reach = path;
        for (k = 1; path[k] && k < sizeof(prefix); k++) {
                if (path[k] != '/')
                        continue;
                memcpy(prefix, path, k);
                prefix[k] = '\0';
                if (access(prefix, X_OK) < 0) {
                        reach = prefix;
                        error = errno;
                        break;
                }
        }
        append(msg, sizeof(msg), &len, "cannot execute ");
        append(msg, sizeof(msg), &len, path);
        append(msg, sizeof(msg), &len, " as uid ");
        append_uint(msg, sizeof(msg), &len, (unsigned long) getuid());
        append(msg, sizeof(msg), &len, ": ");
        append(msg, sizeof(msg), &len, reach);
        append(msg, sizeof(msg), &len,
               error == EACCES ? ": permission denied"
               : error == ENOENT ? ": no such file or directory"
               : ": error ");
        if (error != EACCES && error != ENOENT)
                append_uint(msg, sizeof(msg), &len, (unsigned long) error);
        append(msg, sizeof(msg), &len, "\n");
        ssize_t w = write(STDERR_FILENO, msg, len);
        (void) w;
}

_Noreturn void host_exec_child(struct host_exec *e) {
        if (dup2(e->plugin_fd, HOST_EXEC_PLUGIN_FD) < 0)
                _exit(127);
        if (e->cache_fd >= 0 && dup2(e->cache_fd, HOST_EXEC_CACHE_FD) < 0)
                _exit(127);
        if (selinux_label_set_exec(e->exec_context) < 0)
                _exit(127);
        if (e->switch_user && privileges_enter_host(e->uid, e->gid, e->caps) < 0)
                _exit(127);
        /* Set after the switch of user, which clears it. */
        (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
        execve(e->argv[0], e->argv, e->envp);
        say_exec_failed(e->argv[0], errno);
        _exit(127);
}

void host_exec_done(struct host_exec *e) {
        e->plugin_fd = safe_close(e->plugin_fd);
        e->cache_fd = safe_close(e->cache_fd);
        if (e->own_envp)
                free(e->envp);
        e->envp = environ;
        e->own_envp = false;
}
