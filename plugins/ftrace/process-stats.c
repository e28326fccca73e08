/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.process_stats: the process tree (pid, ppid, uid, cmdline; threads
 * with their names) read from /proc when an instance starts. */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/pbw.h"
#include "ftrace-ds.h"

#define PROCESSES_PER_PACKET 200

static ssize_t read_file(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n >= 0)
                buf[n] = '\0';
        return n;
}

static void read_status(int pid, int *ppid, int *uid) {
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        *ppid = 0;
        *uid = -1;
        if (read_file(path, buf, sizeof(buf)) <= 0)
                return;
        char *p = strstr(buf, "\nPPid:");
        if (p)
                *ppid = atoi(p + 6);
        p = strstr(buf, "\nUid:");
        if (p)
                *uid = atoi(p + 5);
}

static void read_comm(const char *path, char *buf, size_t size) {
        if (read_file(path, buf, size) <= 0) {
                buf[0] = '\0';
                return;
        }
        buf[strcspn(buf, "\n")] = '\0';
}

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void emit(struct plugin *pl, struct traced_writer *w, struct pbw *tree) {
        struct pbw pkt = {};
        pbw_varint(&pkt, 8, boottime_ns());
        pbw_message(&pkt, 2, tree); /* TracePacket.process_tree */
        if (!pkt.error)
                (void) pl->api->write_packet(w, pkt.buf, pkt.len);
        pbw_done(&pkt);
        pbw_done(tree);
}

int process_stats_dump(struct plugin *pl, uint64_t instance_id) {
        struct traced_writer *w;
        int r = pl->api->new_writer(pl->host, instance_id, &w);
        if (r < 0)
                return r;
        DIR *d = opendir("/proc");
        if (!d) {
                pl->api->free_writer(w);
                return -errno;
        }
        struct pbw tree = {};
        unsigned in_packet = 0, total = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char) de->d_name[0]))
                        continue;
                int pid = atoi(de->d_name), ppid, uid;
                char path[128], buf[4096];
                read_status(pid, &ppid, &uid);
                struct pbw proc = {};
                pbw_varint(&proc, 1, (uint64_t) pid);
                pbw_varint(&proc, 2, (uint64_t) ppid);
                snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
                ssize_t n = read_file(path, buf, sizeof(buf));
                if (n > 0) {
                        for (ssize_t off = 0; off < n;) {
                                size_t l = strnlen(buf + off, (size_t) (n - off));
                                pbw_bytes(&proc, 3, buf + off, l);
                                off += (ssize_t) l + 1;
                        }
                } else {
                        /* Kernel threads have no cmdline: use the comm. */
                        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
                        read_comm(path, buf, sizeof(buf));
                        pbw_string(&proc, 3, buf);
                        pbw_varint(&proc, 9, 1); /* cmdline_is_comm */
                }
                if (uid >= 0)
                        pbw_varint(&proc, 5, (uint64_t) uid);
                pbw_message(&tree, 1, &proc);
                pbw_done(&proc);

                snprintf(path, sizeof(path), "/proc/%d/task", pid);
                DIR *t = opendir(path);
                struct dirent *te;
                while (t && (te = readdir(t))) {
                        if (!isdigit((unsigned char) te->d_name[0]))
                                continue;
                        int tid = atoi(te->d_name);
                        char cpath[160], comm[64];
                        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/comm", pid, tid);
                        read_comm(cpath, comm, sizeof(comm));
                        struct pbw th = {};
                        pbw_varint(&th, 1, (uint64_t) tid);
                        pbw_string(&th, 2, comm);
                        pbw_varint(&th, 3, (uint64_t) pid);
                        pbw_message(&tree, 2, &th);
                        pbw_done(&th);
                }
                if (t)
                        closedir(t);
                total++;
                if (++in_packet == PROCESSES_PER_PACKET) {
                        emit(pl, w, &tree);
                        in_packet = 0;
                }
        }
        closedir(d);
        if (in_packet)
                emit(pl, w, &tree);
        pbw_done(&tree);
        (void) pl->api->flush_writer(w);
        pl->api->free_writer(w);
        plugin_log(pl, TRACED_LOG_INFO, "linux.process_stats instance %llu: %u processes",
                   (unsigned long long) instance_id, total);
        return 0;
}
