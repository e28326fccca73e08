/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbtxt/pbtxt.h"
#include "summary.h"
#include "trace-reader.h"
#include "tracectl.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define LINE_MAX_CHARS 240

static void print_short(const ProtobufCMessage *m) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return;
        pbtxt_print_line(f, m);
        fclose(f);
        if (len > LINE_MAX_CHARS)
                printf("%.*s ...", LINE_MAX_CHARS, buf);
        else
                fputs(buf, stdout);
        free(buf);
}

static const char *data_name(const Perfetto__Protos__TracePacket *p, const ProtobufCMessage **ret_sub) {
        *ret_sub = NULL;
        for (unsigned i = 0; i < p->base.descriptor->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &p->base.descriptor->fields[i];
                if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->id != (unsigned) p->data_case ||
                    f->quantifier_offset != offsetof(Perfetto__Protos__TracePacket, data_case))
                        continue;
                if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                        *ret_sub = *(const ProtobufCMessage *const *) ((const uint8_t *) p + f->offset);
                return f->name;
        }
        return p->base.n_unknown_fields ? "unknown" : "empty";
}

int cmd_print(int argc, char **argv) {
        if (argc != 2 || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl print FILE\n\nPrints every packet of a trace on a line: index, timestamp,\n"
                       "sequence, type and its fields; ftrace events one per line below.\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        struct trace_reader rd;
        int r = trace_reader_open(&rd, argv[1]);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot open %s: %s\n", argv[1], strerror(-r));
                return EXIT_OTHER;
        }
        const uint8_t *data;
        size_t len;
        uint64_t idx = 0;
        while ((r = trace_reader_next(&rd, &data, &len)) > 0) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, len, data);
                if (!p) {
                        printf("%6" PRIu64 " undecodable packet (%zu bytes)\n", idx++, len);
                        continue;
                }
                const ProtobufCMessage *sub;
                const char *name = data_name(p, &sub);
                printf("%6" PRIu64 " ts=%-16" PRIu64 " seq=%-4u %s%s: ", idx++, p->has_timestamp ? p->timestamp : 0,
                       p->trusted_packet_sequence_id, p->has_previous_packet_dropped && p->previous_packet_dropped ? "[loss] " : "",
                       name);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                        const Perfetto__Protos__FtraceEventBundle *b = p->ftrace_events;
                        printf("cpu %u, %zu events%s\n", b->cpu, b->n_event, b->compact_sched ? ", compact sched" : "");
                        for (size_t i = 0; i < b->n_event; i++) {
                                printf("         %" PRIu64 " pid %u ", b->event[i]->timestamp, b->event[i]->pid);
                                const Perfetto__Protos__FtraceEvent *e = b->event[i];
                                const ProtobufCMessage *ev = NULL;
                                const char *en = "unknown";
                                for (unsigned k = 0; k < e->base.descriptor->n_fields; k++) {
                                        const ProtobufCFieldDescriptor *f = &e->base.descriptor->fields[k];
                                        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->id == (unsigned) e->event_case) {
                                                en = f->name;
                                                ev = *(const ProtobufCMessage *const *) ((const uint8_t *) e + f->offset);
                                        }
                                }
                                printf("%s ", en);
                                if (ev)
                                        print_short(ev);
                                putchar('\n');
                        }
                } else if (sub) {
                        print_short(sub);
                        putchar('\n');
                } else
                        putchar('\n');
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
        trace_reader_close(&rd);
        if (r < 0) {
                fprintf(stderr, "tracectl: %s is damaged after %" PRIu64 " packets\n", argv[1], idx);
                return EXIT_OTHER;
        }
        return EXIT_OK;
}

int print_trace_summary(const char *path, unsigned top_n) {
        struct trace_reader rd;
        struct summary s;
        int r = trace_reader_open(&rd, path);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot open %s: %s\n", path, strerror(-r));
                return EXIT_OTHER;
        }
        summary_init(&s);
        const uint8_t *data;
        size_t len;
        while ((r = trace_reader_next(&rd, &data, &len)) > 0)
                summary_add_packet(&s, data, len);
        summary_finish(&s);
        printf("File:           %s (%" PRIu64 " bytes)\n", path, rd.offset);
        summary_print(stdout, &s, top_n);
        if (r < 0)
                printf("Warning:        the file is damaged after %" PRIu64 " packets\n", rd.n_packets);
        trace_reader_close(&rd);
        summary_done(&s);
        return r < 0 ? EXIT_OTHER : EXIT_OK;
}

int cmd_summary(int argc, char **argv) {
        if (argc != 2 || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl summary FILE\n\nPackets per type and sequence, time span, per-CPU ftrace event\n"
                       "counts, the threads that used the most CPU (from sched_switch) and\n"
                       "the service's statistics.\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        return print_trace_summary(argv[1], 15);
}
