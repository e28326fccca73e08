/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The packet-building paths of linux.ftrace and linux.sys_stats, N times
 * over fixed input, for bench/packet-cost.sh to count their instructions
 * (callgrind) per packet. No kernel, no service: the host is a fake whose
 * begin_packet/end_packet (and write_packet) put the packet in one 1 MiB
 * "chunk", as the plugin host puts it in a trace writer's chunk.
 *
 *   packet-cost ftrace|ftrace-compact|sysstats N DATADIR
 *
 * ftrace:         the two pages of DATADIR/ftrace/cpu0.pages (sched_switch,
 *                 sched_waking, print, captured from a kernel) through
 *                 ftrace_drain_page(), then ftrace_drain_emit(): one
 *                 FtraceEventBundle packet per round
 * ftrace-compact: the same with compact_sched
 * sysstats:       one SysStats packet per round, as linux.sys_stats polls
 *                 (every counter): DATADIR/sysstats/meminfo, vmstat,
 *                 stat, buddyinfo, diskstats and pressure-memory
 *
 * Prints the packets and bytes written. Exit status 1 when a packet was
 * not written whole.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "counters.h"
#include "ftrace-session.h"
#include "parse.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "traced/plugin.h"

#define CHUNK_SIZE (1u << 20)

static uint8_t chunk[CHUNK_SIZE];
static struct traced_pb_stream stream;
static uint64_t packets, bytes, failed;

static int32_t fake_write_packet(struct traced_writer *w, const void *p, size_t n) {
        (void) w;
        if (n > sizeof(chunk)) {
                failed++;
                return -ENOBUFS;
        }
        memcpy(chunk, p, n);
        packets++;
        bytes += n;
        return 0;
}

static int32_t fake_begin_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        (void) w;
        traced_pb_stream_init_buffer(&stream, chunk, sizeof(chunk));
        traced_pb_msg_init(root, &stream);
        return 0;
}

static int32_t fake_end_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        (void) w;
        if (traced_pb_msg_finish(root) < 0) {
                failed++;
                return stream.error;
        }
        packets++;
        bytes += traced_pb_msg_size(root);
        return 0;
}

static const struct traced_host_api api = {
        .struct_size = sizeof(struct traced_host_api),
        .abi_minor = TRACED_PLUGIN_ABI_MINOR,
        .write_packet = fake_write_packet,
        .begin_packet = fake_begin_packet,
        .end_packet = fake_end_packet,
};

static char *slurp(const char *dir, const char *name, size_t *ret_len) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        if (!f) {
                fprintf(stderr, "packet-cost: %s: %m\n", path);
                exit(2);
        }
        char *buf = malloc(1 << 20);
        size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        if (!buf || n == 0) {
                fprintf(stderr, "packet-cost: %s: empty or unreadable\n", path);
                exit(2);
        }
        buf[n] = '\0';
        *ret_len = n;
        return buf;
}

static void run_ftrace(const char *data, unsigned long n, bool compact) {
        static struct plugin pl = { .api = &api };
        struct ftrace_session *s = calloc(1, sizeof(*s));
        static const char *const formats[][2] = {
                { "format-sched_switch", "sched" },
                { "format-sched_waking", "sched" },
                { "format-print", "ftrace" },
        };
        if (!s || !(s->formats = calloc(ELEMENTSOF(formats), sizeof(*s->formats))) ||
            (compact && !(s->intern = calloc(MAX_INTERN, sizeof(*s->intern))))) {
                fprintf(stderr, "packet-cost: out of memory\n");
                exit(2);
        }
        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                size_t len;
                char *text = slurp(data, formats[i][0], &len);
                if (format_parse(text, formats[i][1], &s->formats[i]) < 0) {
                        fprintf(stderr, "packet-cost: %s/%s does not parse\n", data, formats[i][0]);
                        exit(2);
                }
                free(text);
        }
        s->n_formats = ELEMENTSOF(formats);
        s->pl = &pl;
        s->writer = (struct traced_writer *) chunk;
        s->splice_pipe[0] = s->splice_pipe[1] = -1;
        s->compact = compact;
        ftrace_drain_init(s);
        size_t len;
        uint8_t *pages = (uint8_t *) slurp(data, "cpu0.pages", &len);
        for (unsigned long i = 0; i < n; i++) {
                for (size_t off = 0; off + 4096 <= len; off += 4096)
                        (void) ftrace_drain_page(s, pages + off, 4096);
                ftrace_drain_emit(s);
        }
        free(pages);
        ftrace_drain_free(s);
        free(s->formats);
        free(s);
}

/* One poll of linux.sys_stats (plugins/sysstats/sys-stats.c, poll_once)
 * on text already read. */
struct poll_input {
        const char *text[6];
        size_t len[6];
        struct key_set meminfo, vmstat;
};

static void poll_packet(struct poll_input *in, uint64_t ts) {
        TracePacket pkt;
        SysStats st;
        if (api.begin_packet((struct traced_writer *) chunk, &pkt.msg) < 0)
                return;
        TracePacket_set_timestamp(&pkt, ts);
        TracePacket_begin_sys_stats(&pkt, &st);
        parse_meminfo(in->text[0], in->len[0], &in->meminfo, &st);
        parse_vmstat(in->text[1], in->len[1], &in->vmstat, &st);
        parse_stat(in->text[2], in->len[2], UINT32_MAX, 10000000, &st);
        parse_buddyinfo(in->text[3], in->len[3], &st);
        parse_diskstats(in->text[4], in->len[4], &st);
        parse_psi(in->text[5], in->len[5], SysStats_PsiSample_PSI_RESOURCE_MEMORY_SOME, &st);
        SysStats_set_collection_end_timestamp(&st, ts + 1000);
        TracePacket_end_sys_stats(&pkt, &st);
        (void) api.end_packet((struct traced_writer *) chunk, &pkt.msg);
}

static void run_sysstats(const char *data, unsigned long n) {
        static const char *const files[6] = { "meminfo", "vmstat", "stat", "buddyinfo", "diskstats", "pressure-memory" };
        struct poll_input in = {};
        for (size_t i = 0; i < 6; i++)
                in.text[i] = slurp(data, files[i], &in.len[i]);
        if (key_set_init(&in.meminfo, false, NULL, 0, NULL) < 0 || key_set_init(&in.vmstat, true, NULL, 0, NULL) < 0) {
                fprintf(stderr, "packet-cost: out of memory\n");
                exit(2);
        }
        for (unsigned long i = 0; i < n; i++)
                poll_packet(&in, 1000000000ull + i * 10000000ull);
        key_set_done(&in.meminfo);
        key_set_done(&in.vmstat);
        for (size_t i = 0; i < 6; i++)
                free((void *) in.text[i]);
}

int main(int argc, char **argv) {
        char *end;
        if (argc != 4) {
                fprintf(stderr, "usage: %s ftrace|ftrace-compact|sysstats N DATADIR\n", argv[0]);
                return 2;
        }
        unsigned long n = strtoul(argv[2], &end, 10);
        if (*end || end == argv[2]) {
                fprintf(stderr, "packet-cost: N must be a number, not %s\n", argv[2]);
                return 2;
        }
        char dir[4096];
        if (strcmp(argv[1], "ftrace") == 0 || strcmp(argv[1], "ftrace-compact") == 0) {
                snprintf(dir, sizeof(dir), "%s/ftrace", argv[3]);
                run_ftrace(dir, n, strcmp(argv[1], "ftrace-compact") == 0);
        } else if (strcmp(argv[1], "sysstats") == 0) {
                snprintf(dir, sizeof(dir), "%s/sysstats", argv[3]);
                run_sysstats(dir, n);
        } else {
                fprintf(stderr, "packet-cost: unknown path %s (ftrace, ftrace-compact or sysstats)\n", argv[1]);
                return 2;
        }
        printf("%llu packets, %llu bytes\n", (unsigned long long) packets, (unsigned long long) bytes);
        if (failed || packets != n) {
                fprintf(stderr, "packet-cost: %llu of %lu packets written whole\n", (unsigned long long) packets, n);
                return 1;
        }
        return 0;
}
