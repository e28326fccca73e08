/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "basic/macro.h"
#include "tracefs.h"

#define TRACEFS_MAGIC 0x74726163

static bool is_tracefs(const char *path) {
        struct stat st;
        char p[512];
        snprintf(p, sizeof(p), "%s/trace_pipe", path);
        return stat(p, &st) == 0;
}

int tracefs_find(char *ret, size_t size) {
        static const char *const candidates[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
        for (size_t i = 0; i < ELEMENTSOF(candidates); i++)
                if (is_tracefs(candidates[i])) {
                        snprintf(ret, size, "%s", candidates[i]);
                        return 0;
                }
        if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 && is_tracefs("/sys/kernel/tracing")) {
                snprintf(ret, size, "%s", "/sys/kernel/tracing");
                return 0;
        }
        return errno == EPERM ? -EPERM : -ENOENT;
}

static int write_file(const char *root, const char *rel, const char *value, int flags) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        int fd = open(p, O_WRONLY | O_CLOEXEC | flags);
        if (fd < 0)
                return negative_errno();
        size_t n = strlen(value);
        ssize_t w = write(fd, value, n);
        int r = w == (ssize_t) n ? 0 : (w < 0 ? negative_errno() : -EIO);
        close(fd);
        return r;
}

bool tracefs_instance_name_valid(const char *name) {
        return name[0] && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strchr(name, '/');
}

int tracefs_write(const char *root, const char *rel, const char *value) {
        return write_file(root, rel, value, O_TRUNC);
}

int tracefs_append(const char *root, const char *rel, const char *value) {
        return write_file(root, rel, value, O_APPEND);
}

int tracefs_read(const char *root, const char *rel, char *buf, size_t size) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, size - 1 - len);
                if (n < 0) {
                        int r = negative_errno();
                        close(fd);
                        return r;
                }
                if (n == 0 || len + (size_t) n >= size - 1) {
                        len += (size_t) n;
                        break;
                }
                len += (size_t) n;
        }
        buf[len] = '\0';
        close(fd);
        return (int) len;
}

int tracefs_instance_create(const char *root, const char *name, char *ret, size_t size) {
        snprintf(ret, size, "%s/instances/%s", root, name);
        if (mkdir(ret, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

int tracefs_instance_remove(const char *root, const char *name) {
        char p[512];
        snprintf(p, sizeof(p), "%s/instances/%s", root, name);
        /* Instances must be idle to go away. */
        char on[600];
        snprintf(on, sizeof(on), "instances/%s/tracing_on", name);
        (void) tracefs_write(root, on, "0");
        snprintf(on, sizeof(on), "instances/%s/events/enable", name);
        (void) tracefs_write(root, on, "0");
        if (rmdir(p) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

int tracefs_remove_stale_instances(const char *root) {
        char p[512];
        snprintf(p, sizeof(p), "%s/instances", root);
        DIR *d = opendir(p);
        if (!d)
                return negative_errno();
        struct dirent *de;
        int removed = 0;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, TRACEFS_INSTANCE_PREFIX, strlen(TRACEFS_INSTANCE_PREFIX)) != 0)
                        continue;
                /* traced_<pid>_<n>: stale when that process is gone. Any
                 * other name (a user's instance_name) is not ours. */
                char *end;
                long pid = strtol(de->d_name + strlen(TRACEFS_INSTANCE_PREFIX), &end, 10);
                if (pid <= 0 || *end != '_' || !end[1] || end[strspn(end + 1, "0123456789") + 1] != '\0')
                        continue;
                if (kill((pid_t) pid, 0) == 0 || errno != ESRCH)
                        continue;
                if (tracefs_instance_remove(root, de->d_name) == 0)
                        removed++;
        }
        closedir(d);
        return removed;
}
