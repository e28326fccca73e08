/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl records a "track_event" data source with upstream's text
 * config (track_event_config): the producer, on libtraced-client, gets
 * the track_event_config the text asked for and writes an SDK app's slices
 * (DrawGame, two DrawPlayer with a debug argument); the file has them, and
 * the config echoed in the trace carries the track_event_config. */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <traced/producer.h>

#include "basic/pbr.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/config/data_source_config.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(track_event, .init = setup, .fini = teardown, .timeout = 60);

/* TracePacket and TrackEvent field numbers (upstream's). */
enum {
        PACKET_TIMESTAMP = 8,
        PACKET_TRACK_EVENT = 11,
        PACKET_TRACE_CONFIG = 33,
        PACKET_SEQUENCE_FLAGS = 13,
        EVENT_TYPE = 9,
        EVENT_TRACK_UUID = 11,
        EVENT_CATEGORIES = 22,
        EVENT_NAME = 23,
        EVENT_DEBUG_ANNOTATIONS = 4,
        ANNOTATION_NAME = 10,
        ANNOTATION_INT = 4,
        SLICE_BEGIN = 1,
        SLICE_END = 2,
        SEQ_INCREMENTAL_STATE_CLEARED = 1,
};

struct app {
        int starts;
        char categories[64];
        uint64_t ts;
};

static void event(traced_trace_writer *w, struct app *a, int type, const char *name, int player) {
        traced_msg *root, *ev_msg, *arg;
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), 0);
        cr_assert_eq(traced_msg_append_varint(root, PACKET_TIMESTAMP, a->ts += 1000), 0);
        cr_assert_eq(traced_msg_append_varint(root, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED), 0);
        cr_assert_eq(traced_msg_begin_nested(root, PACKET_TRACK_EVENT, &ev_msg), 0);
        cr_assert_eq(traced_msg_append_varint(ev_msg, EVENT_TYPE, (uint64_t) type), 0);
        cr_assert_eq(traced_msg_append_varint(ev_msg, EVENT_TRACK_UUID, 1234), 0);
        if (name) {
                cr_assert_eq(traced_msg_append_bytes(ev_msg, EVENT_CATEGORIES, "rendering", 9), 0);
                cr_assert_eq(traced_msg_append_bytes(ev_msg, EVENT_NAME, name, strlen(name)), 0);
        }
        if (player >= 0) {
                cr_assert_eq(traced_msg_begin_nested(ev_msg, EVENT_DEBUG_ANNOTATIONS, &arg), 0);
                cr_assert_eq(traced_msg_append_bytes(arg, ANNOTATION_NAME, "player_number", 13), 0);
                cr_assert_eq(traced_msg_append_varint(arg, ANNOTATION_INT, (uint64_t) player), 0);
                cr_assert_eq(traced_msg_end_nested(arg), 0);
        }
        cr_assert_eq(traced_msg_end_nested(ev_msg), 0);
        cr_assert_eq(traced_trace_writer_end_packet(w), 0);
}

static void on_start(traced_producer *p, uint64_t instance_id, const char *ds, const uint8_t *config, size_t size,
                     void *userdata) {
        struct app *a = userdata;
        Perfetto__Protos__DataSourceConfig *c = perfetto__protos__data_source_config__unpack(NULL, size, config);
        cr_assert_not_null(c);
        if (c->track_event_config && c->track_event_config->n_enabled_categories > 0)
                snprintf(a->categories, sizeof(a->categories), "%s", c->track_event_config->enabled_categories[0]);
        perfetto__protos__data_source_config__free_unpacked(c, NULL);

        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, instance_id, &w), 0);
        event(w, a, SLICE_BEGIN, "DrawGame", -1);
        for (int i = 0; i < 2; i++) {
                event(w, a, SLICE_BEGIN, "DrawPlayer", i);
                event(w, a, SLICE_END, NULL, -1);
        }
        event(w, a, SLICE_END, NULL, -1);
        traced_trace_writer_free(w);
        a->starts++;
}

static void on_stop(traced_producer *p, uint64_t instance_id, void *userdata) {
}

static int run(const char *const *args, const char *out_path, unsigned timeout_ms) {
        char *argv[16];
        size_t n = 0;
        argv[n++] = (char *) TRACECTL_BINARY;
        argv[n++] = (char *) "--socket";
        argv[n++] = inst.consumer_path;
        for (size_t i = 0; args[i] && n < 15; i++)
                argv[n++] = (char *) args[i];
        argv[n] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        for (unsigned waited = 0; waited < timeout_ms; waited += 20) {
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid)
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                spin_ms(ev, 20);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
}

static uint8_t *slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "no file %s", path);
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        long n = ftell(f);
        rewind(f);
        uint8_t *buf = malloc((size_t) n + 1);
        cr_assert_eq(fread(buf, 1, (size_t) n, f), (size_t) n);
        fclose(f);
        *ret_len = (size_t) n;
        return buf;
}

static bool str_eq(const struct pbr_field *f, const char *s) {
        return f->len == strlen(s) && memcmp(f->data, s, f->len) == 0;
}

Test(track_event, tracectl_records_an_sdk_apps_slices_with_track_event_config) {
        struct app a = {};
        struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = on_start,
                .stop = on_stop,
        };
        struct traced_producer_options opts = {
                .struct_size = sizeof(opts),
                .socket_path = inst.producer_path,
                .name = "example_system_wide",
        };
        traced_producer *p;
        cr_assert_eq(traced_producer_connect(ev, &opts, &ops, &a, &p), 0);
        cr_assert_eq(traced_producer_register_data_source(p, "track_event", 0), 0);

        char cfg[512], trace[512], dry[512], out[512];
        snprintf(cfg, sizeof(cfg), "%s/track-event.cfg", inst.dir);
        snprintf(trace, sizeof(trace), "%s/trace.pftrace", inst.dir);
        snprintf(dry, sizeof(dry), "%s/dry-run.txt", inst.dir);
        snprintf(out, sizeof(out), "%s/record.txt", inst.dir);
        FILE *f = fopen(cfg, "we");
        cr_assert_not_null(f);
        fprintf(f, "buffers { size_kb: 1024 }\n"
                   "data_sources { config { name: \"track_event\" track_event_config { enabled_categories: \"*\" } } }\n"
                   "duration_ms: 500\n");
        fclose(f);

        /* What it would send, printed back. */
        cr_assert_eq(run((const char *const[]) { "record", "--dry-run", "--txt", "-c", cfg, NULL }, dry, 10000), 0);
        size_t len;
        char *text = (char *) slurp(dry, &len);
        text[len] = '\0';
        cr_assert(strstr(text, "track_event_config {\n      enabled_categories: \"*\"\n    }"), "--dry-run printed:\n%s",
                  text);
        free(text);

        int st = run((const char *const[]) { "record", "--txt", "-c", cfg, "-o", trace, "--no-summary", NULL }, out,
                     30000);
        cr_assert_eq(st, 0, "tracectl record exited %d", st);
        cr_assert_eq(a.starts, 1);
        cr_assert_str_eq(a.categories, "*", "the producer got enabled_categories \"%s\"", a.categories);

        uint8_t *buf = slurp(trace, &len);
        static struct pbr_field pkts[4096];
        int n = pbr_split_trace(buf, len, pkts, 4096);
        cr_assert_gt(n, 0, "%s is not a trace", trace);
        int draw_game = 0, draw_player = 0, ends = 0, players_seen = 0;
        bool config_echoed = false;
        for (int i = 0; i < n; i++) {
                struct pbr_field te, f1, f2;
                if (pbr_get(pkts[i].data, pkts[i].len, PACKET_TRACE_CONFIG, false, &te)) {
                        /* TraceConfig.data_sources[0].config.track_event_config */
                        if (pbr_get(te.data, te.len, 2, false, &f1) && pbr_get(f1.data, f1.len, 1, false, &f2) &&
                            pbr_get(f2.data, f2.len, 113, false, &f1) && pbr_get(f1.data, f1.len, 2, false, &f2))
                                config_echoed = str_eq(&f2, "*");
                        continue;
                }
                if (!pbr_get(pkts[i].data, pkts[i].len, PACKET_TRACK_EVENT, false, &te))
                        continue;
                cr_assert(pbr_get(te.data, te.len, EVENT_TYPE, false, &f1));
                if (f1.varint == SLICE_END) {
                        ends++;
                        continue;
                }
                cr_assert(pbr_get(te.data, te.len, EVENT_NAME, false, &f1));
                if (str_eq(&f1, "DrawGame"))
                        draw_game++;
                if (str_eq(&f1, "DrawPlayer")) {
                        draw_player++;
                        cr_assert(pbr_get(te.data, te.len, EVENT_DEBUG_ANNOTATIONS, false, &f1));
                        cr_assert(pbr_get(f1.data, f1.len, ANNOTATION_INT, false, &f2));
                        players_seen |= 1 << f2.varint;
                }
        }
        free(buf);
        cr_assert_eq(draw_game, 1);
        cr_assert_eq(draw_player, 2);
        cr_assert_eq(players_seen, 3, "the player_number arguments were not 0 and 1");
        cr_assert_eq(ends, 3);
        cr_assert(config_echoed, "the trace's TraceConfig has no track_event_config { enabled_categories: \"*\" }");
        traced_producer_free(p);
}
