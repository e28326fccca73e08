/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.systemd_journald instances (see journald-ds.h). */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "journald-config.h"
#include "journald-ds.h"
#include "journald-entry.h"
#include "journald/journald-dirs.h"

/* Entries written per wake-up of the loop; what is left (a look-back, a
 * burst) is taken on a 1 ms timer, so the loop keeps serving the others. */
#define BATCH_MAX 2000u
#define BACKLOG_MS 1

#define LOG_NOTICE_PRIO 5
#define REOPEN_MS 1000u

struct journald_session {
        struct plugin_instance inst; /* first: the list holds these */
        struct journald_plugin *pl;
        struct journald_config cfg;
        sd_journal *j; /* NULL: no journal to read */
        struct traced_source *io, *backlog;
        /* No journal files yet: opened again every REOPEN_MS until there
         * are (sd-journal watches only directories that existed when it
         * opened), then read from from_usec on. */
        struct traced_source *reopen;
        uint64_t from_usec;
        struct traced_writer *writer;
        struct pb_buf ev; /* an entry's event, read whole before it is written */
        uint64_t total, failed, before_boot, write_errors;
        int first_error;
};

static struct journald_session *session_of(struct plugin_instance *i) {
        return (struct journald_session *) i;
}

static void failed(struct journald_session *s, int r) {
        s->failed++;
        if (!s->first_error)
                s->first_error = r;
}

/* Begins a packet at ts and its SystemdJournaldEvent, straight into the
 * writer's shared memory. */
static int begin_event(struct journald_session *s, uint64_t ts, TracePacket *pkt, SystemdJournaldEvent *ev) {
        int r = s->pl->api->begin_packet(s->writer, &pkt->msg);
        if (r < 0) {
                s->write_errors++;
                return r;
        }
        TracePacket_set_timestamp(pkt, ts);
        TracePacket_begin_journald_event(pkt, ev);
        return 0;
}

static int end_event(struct journald_session *s, TracePacket *pkt, SystemdJournaldEvent *ev) {
        TracePacket_end_journald_event(pkt, ev);
        int r = s->pl->api->end_packet(s->writer, &pkt->msg);
        if (r < 0)
                s->write_errors++;
        return r;
}

/* sd_journal_get_data gives "FIELD=value": the value. */
static int get_field(void *userdata, const char *field, const void **ret, size_t *ret_len) {
        const void *d;
        size_t n, k = strlen(field);
        int r = sd_journal_get_data(userdata, field, &d, &n);
        if (r < 0)
                return r;
        if (n <= k || memcmp(d, field, k) != 0 || ((const char *) d)[k] != '=')
                return -EBADMSG;
        *ret = (const char *) d + k + 1;
        *ret_len = n - k - 1;
        return 0;
}

/* The current entry of the journal, at ts. */
static int write_entry(struct journald_session *s, uint64_t ts) {
        SystemdJournaldEvent ev;
        TracePacket pkt;
        pb_buf_reset(&s->ev);
        SystemdJournaldEvent_init(&ev, pb_buf_stream(&s->ev));
        int r = journald_entry_encode(get_field, s->j, &ev);
        if (r < 0)
                return r;
        r = s->pl->api->begin_packet(s->writer, &pkt.msg);
        if (r < 0) {
                s->write_errors++;
                return r;
        }
        TracePacket_set_timestamp(&pkt, ts);
        TracePacket_set_journald_event_serialized(&pkt, pb_buf_data(&s->ev), pb_buf_len(&s->ev));
        r = s->pl->api->end_packet(s->writer, &pkt.msg);
        if (r < 0)
                s->write_errors++;
        return r;
}

/* Writes up to limit entries; whether more may follow. */
static bool drain(struct journald_session *s, unsigned limit) {
        int64_t offset = journald_clock_offset();
        for (unsigned n = 0; n < limit; n++) {
                int r = sd_journal_next(s->j);
                if (r <= 0) {
                        if (r < 0)
                                failed(s, r);
                        return false;
                }
                uint64_t us, ts;
                r = sd_journal_get_realtime_usec(s->j, &us);
                if (r < 0) {
                        failed(s, r);
                        continue;
                }
                if (!journald_realtime_to_boottime(us, offset, &ts)) {
                        s->before_boot++;
                        continue;
                }
                r = write_entry(s, ts);
                if (r < 0)
                        failed(s, r);
                else
                        s->total++;
        }
        return true;
}

static void on_backlog(void *userdata);

static void pump(struct journald_session *s) {
        struct journald_plugin *pl = s->pl;
        bool more = drain(s, BATCH_MAX);
        if (more && !s->backlog) {
                if (pl->api->add_timer(pl->host, BACKLOG_MS, on_backlog, s, &s->backlog) < 0)
                        s->backlog = NULL; /* taken at the next wake-up, flush or stop */
        } else if (!more && s->backlog) {
                pl->api->remove_source(pl->host, s->backlog);
                s->backlog = NULL;
        }
}

static void on_backlog(void *userdata) {
        pump(userdata);
}

static void on_journal(int fd, uint32_t revents, void *userdata) {
        struct journald_session *s = userdata;
        (void) fd;
        (void) revents;
        /* Reads the inotify events: new entries, files added or rotated. */
        int r = sd_journal_process(s->j);
        if (r < 0 && !s->first_error)
                s->first_error = r;
        pump(s);
}

/* Everything the journal holds now. */
static void drain_all(struct journald_session *s) {
        if (!s->j)
                return;
        (void) sd_journal_process(s->j);
        while (drain(s, BATCH_MAX))
                ;
}

static void write_stats(struct journald_session *s) {
        TracePacket pkt;
        SystemdJournaldEvent ev;
        if (begin_event(s, journald_boottime_now(), &pkt, &ev) < 0)
                return;
        journald_stats_encode(&ev, s->total, s->failed);
        (void) end_event(s, &pkt, &ev);
}

static void note(struct journald_session *s, const char *message) {
        plugin_log(s->pl, TRACED_LOG_WARNING, "%s instance %llu: %s", JOURNALD_DS_NAME,
                   (unsigned long long) s->inst.id, message);
        TracePacket pkt;
        SystemdJournaldEvent ev;
        if (begin_event(s, journald_boottime_now(), &pkt, &ev) < 0)
                return;
        journald_note_encode(&ev, LOG_NOTICE_PRIO, (uint32_t) getpid(), message);
        (void) end_event(s, &pkt, &ev);
}

static int add_matches(struct journald_session *s) {
        char **m;
        size_t n;
        int r = journald_config_matches(&s->cfg, &m, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++)
                r = sd_journal_add_match(s->j, m[i], 0);
        journald_matches_free(m);
        return r;
}

/* Opens the journal into s->j, read from s->from_usec on and watched. */
static int open_journal(struct journald_session *s) {
        struct journald_plugin *pl = s->pl;
        const char *ns = s->cfg.journal_namespace;
        int r = ns ? sd_journal_open_namespace(&s->j, ns, SD_JOURNAL_LOCAL_ONLY)
                   : sd_journal_open(&s->j, SD_JOURNAL_LOCAL_ONLY);
        if (r < 0)
                return r;
        /* The inotify watches first: a file created from here on is seen. */
        int fd = sd_journal_get_fd(s->j);
        if (fd < 0)
                return fd;
        if ((r = add_matches(s)) < 0)
                return r;
        if ((r = sd_journal_seek_realtime_usec(s->j, s->from_usec)) < 0)
                return r;
        return pl->api->add_fd(pl->host, fd, EPOLLIN, on_journal, s, &s->io);
}

static void close_journal(struct journald_session *s) {
        struct journald_plugin *pl = s->pl;
        if (s->io)
                pl->api->remove_source(pl->host, s->io);
        if (s->backlog)
                pl->api->remove_source(pl->host, s->backlog);
        s->io = s->backlog = NULL;
        if (s->j)
                sd_journal_close(s->j);
        s->j = NULL;
}

static bool has_files(struct journald_session *s) {
        uint64_t bytes = 0;
        return s->j && sd_journal_get_usage(s->j, &bytes) >= 0 && bytes > 0;
}

/* Journald (or its namespace) started after the data source: its
 * directories did not exist to be watched. Opened again, the journal has
 * them, and is read from the data source's start on. */
static void on_reopen(void *userdata) {
        struct journald_session *s = userdata;
        struct journald_plugin *pl = s->pl;
        if (!has_files(s)) {
                /* Most often journald does not run at all: its
                 * directories are not there, and sd-journal is not
                 * opened (its inotify watches set up and torn down) for
                 * nothing each period. A namespace's files lie in the
                 * same directories. */
                static const char *const dirs[] = {JOURNALD_RUNTIME_DIR, JOURNALD_PERSISTENT_DIR};
                if (!journald_dirs_have_entries(dirs, ELEMENTSOF(dirs)))
                        return;
                close_journal(s);
                if (open_journal(s) < 0 || !has_files(s)) {
                        close_journal(s);
                        return; /* again at the next period */
                }
                plugin_log(pl, TRACED_LOG_INFO, "%s instance %llu: journal files appeared; reading them",
                           JOURNALD_DS_NAME, (unsigned long long) s->inst.id);
                pump(s);
        }
        pl->api->remove_source(pl->host, s->reopen);
        s->reopen = NULL;
}

static void session_free(struct journald_session *s) {
        struct journald_plugin *pl = s->pl;
        close_journal(s);
        if (s->reopen)
                pl->api->remove_source(pl->host, s->reopen);
        if (s->writer)
                pl->api->free_writer(s->writer);
        pb_buf_done(&s->ev);
        journald_config_done(&s->cfg);
        free(s);
}

int journald_session_start(struct journald_plugin *pl, uint64_t id, const uint8_t *config, size_t size) {
        char err[256], msg[512];
        struct journald_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->inst.id = id;
        int r = journald_config_parse(config, size, &s->cfg, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        plugin_log(pl, TRACED_LOG_ERR, "%s instance %llu refused: journald_config.%s",
                                   JOURNALD_DS_NAME, (unsigned long long) id, err);
                free(s);
                return r;
        }
        if ((r = pl->api->new_writer(pl->host, id, &s->writer)) < 0) {
                session_free(s);
                return r;
        }
        const char *ns = s->cfg.journal_namespace;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        s->from_usec = (uint64_t) now.tv_sec * 1000000u + (uint64_t) now.tv_nsec / 1000u -
                       (uint64_t) s->cfg.lookback_ms * 1000u;
        r = open_journal(s);
        uint64_t bytes = 0;
        if (r < 0) {
                close_journal(s);
                snprintf(msg, sizeof(msg), "the journal%s%s cannot be read (%s): nothing is recorded",
                         ns ? " of namespace " : "", ns ? ns : "", strerror(-r));
                note(s, msg);
        } else if (sd_journal_get_usage(s->j, &bytes) >= 0 && bytes == 0) {
                snprintf(msg, sizeof(msg),
                         "no journal files%s%s under /run/log/journal or /var/log/journal (is systemd-journald "
                         "running?): entries are recorded once it writes them there",
                         ns ? " of namespace " : "", ns ? ns : "");
                note(s, msg);
                if ((r = pl->api->add_timer(pl->host, REOPEN_MS, on_reopen, s, &s->reopen)) < 0)
                        s->reopen = NULL;
        }
        plugin_instance_add(&pl->sessions, &s->inst);
        plugin_log(pl, TRACED_LOG_INFO,
                   "%s instance %llu: reading the journal%s%s, priorities 0..%u, %zu identifiers, %zu units, "
                   "from %u ms before the start",
                   JOURNALD_DS_NAME, (unsigned long long) id, ns ? " of namespace " : "", ns ? ns : "",
                   s->cfg.min_prio, s->cfg.n_identifiers, s->cfg.n_units, s->cfg.lookback_ms);
        if (s->j)
                pump(s);
        return 0;
}

void journald_session_flush(struct journald_plugin *pl, uint64_t id) {
        struct journald_session *s = session_of(plugin_instance_find(pl->sessions, id));
        if (!s)
                return;
        drain_all(s);
        write_stats(s);
        (void) pl->api->flush_writer(s->writer);
}

static void stop_session(struct journald_session *s) {
        drain_all(s);
        write_stats(s);
        int first = s->first_error;
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "%s instance %llu stopped: %llu entries written, %llu failed (%llu refused by the writer), "
                   "%llu skipped from before the boot%s%s%s",
                   JOURNALD_DS_NAME, (unsigned long long) s->inst.id, (unsigned long long) s->total,
                   (unsigned long long) s->failed, (unsigned long long) s->write_errors,
                   (unsigned long long) s->before_boot, first ? " (first error: " : "", first ? strerror(-first) : "",
                   first ? ")" : "");
}

void journald_session_stop(struct journald_plugin *pl, uint64_t id) {
        struct journald_session *s = session_of(plugin_instance_take(&pl->sessions, id));
        if (!s)
                return;
        stop_session(s);
        session_free(s);
}

void journald_sessions_free(struct journald_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->sessions))) {
                stop_session(session_of(i));
                session_free(session_of(i));
        }
}
