/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

static ssize_t read_file(const char *root, int pid, const char *name, char *buf, size_t size) {
        char path[512];
        if (size == 0)
                return -EINVAL;
        snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, size - 1 - len);
                if (n < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                if (n == 0 || len + (size_t) n == size - 1) {
                        len += (size_t) n;
                        break;
                }
                len += (size_t) n;
        }
        close(fd);
        buf[len] = '\0';
        return (ssize_t) len;
}

static int64_t kb_value(const char *text, const char *key) {
        /* "\nKey:\t  1234 kB" */
        char pat[32];
        snprintf(pat, sizeof(pat), "\n%s:", key);
        const char *at = strstr(text, pat);
        if (!at)
                return PROC_NO_VALUE;
        char *end;
        errno = 0;
        long long v = strtoll(at + strlen(pat), &end, 10);
        if (errno || end == at + strlen(pat))
                return PROC_NO_VALUE;
        return v;
}

int proc_read_status(const char *root, int pid, struct proc_status *ret) {
        char buf[8192];
        ssize_t n = read_file(root, pid, "status", buf + 1, sizeof(buf) - 1);
        if (n < 0)
                return (int) n;
        buf[0] = '\n';
        return proc_parse_status(buf, ret);
}

int proc_parse_status(const char *buf, struct proc_status *ret) {
        *ret = (struct proc_status) { .tgid = -1, .ppid = -1, .uid = -1, .kthread = -1 };
        const char *name = strstr(buf, "\nName:");
        if (name) {
                name += 6;
                while (*name == ' ' || *name == '\t')
                        name++;
                size_t l = strcspn(name, "\n");
                snprintf(ret->name, sizeof(ret->name), "%.*s", (int) (l < sizeof(ret->name) ? l : sizeof(ret->name) - 1),
                         name);
        }
        int64_t v;
        if ((v = kb_value(buf, "Tgid")) != PROC_NO_VALUE && v >= 0 && v <= INT32_MAX)
                ret->tgid = (int32_t) v;
        if ((v = kb_value(buf, "PPid")) != PROC_NO_VALUE && v >= 0 && v <= INT32_MAX)
                ret->ppid = (int32_t) v;
        if ((v = kb_value(buf, "Uid")) != PROC_NO_VALUE && v >= 0 && v <= INT32_MAX)
                ret->uid = (int32_t) v;
        if ((v = kb_value(buf, "Kthread")) != PROC_NO_VALUE && (v == 0 || v == 1))
                ret->kthread = (int8_t) v;
        ret->vm_size = kb_value(buf, "VmSize");
        ret->vm_rss = kb_value(buf, "VmRSS");
        ret->rss_anon = kb_value(buf, "RssAnon");
        ret->rss_file = kb_value(buf, "RssFile");
        ret->rss_shmem = kb_value(buf, "RssShmem");
        ret->vm_swap = kb_value(buf, "VmSwap");
        ret->vm_locked = kb_value(buf, "VmLck");
        ret->vm_hwm = kb_value(buf, "VmHWM");
        return ret->tgid >= 0 ? 0 : -EBADMSG;
}

int proc_read_comm(const char *root, int pid, char *name, size_t size) {
        char buf[64];
        ssize_t n = read_file(root, pid, "comm", buf, sizeof(buf) - 1);
        if (n < 0)
                return (int) n;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        snprintf(name, size, "%s", buf);
        return 0;
}

int proc_read_times(const char *root, int pid, uint64_t *ret_utime, uint64_t *ret_stime) {
        char buf[2048];
        ssize_t n = read_file(root, pid, "stat", buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        return proc_parse_times(buf, ret_utime, ret_stime);
}

int proc_parse_times(const char *buf, uint64_t *ret_utime, uint64_t *ret_stime) {
        /* "pid (comm) state ppid ...": comm may hold spaces and ')', so
         * fields count from the last ')'. utime and stime are fields 14
         * and 15, the 12th and 13th after it. */
        const char *p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        p++;
        for (int field = 3; field <= 15; field++) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EBADMSG;
                if (field == 14 || field == 15) {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(p, &end, 10);
                        if (errno || end == p)
                                return -EBADMSG;
                        if (field == 14)
                                *ret_utime = v;
                        else
                                *ret_stime = v;
                }
                while (*p && *p != ' ')
                        p++;
        }
        return 0;
}

int proc_read_oom_score_adj(const char *root, int pid, int64_t *ret) {
        char buf[64];
        ssize_t n = read_file(root, pid, "oom_score_adj", buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        return proc_parse_oom_score_adj(buf, ret);
}

int proc_parse_oom_score_adj(const char *buf, int64_t *ret) {
        char *end;
        errno = 0;
        long v = strtol(buf, &end, 10);
        if (errno || end == buf || v < -1000 || v > 1000)
                return -EBADMSG;
        *ret = v;
        return 0;
}

ssize_t proc_read_cmdline(const char *root, int pid, char *buf, size_t size) {
        return read_file(root, pid, "cmdline", buf, size);
}
