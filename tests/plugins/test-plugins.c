/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Deliberately broken and well-behaved plugins for the loader tests. One
 * source, built several times with -DVARIANT=... */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "traced/plugin.h"

#define V_GOOD 0
#define V_BAD_MAGIC 1
#define V_FUTURE_MAJOR 2
#define V_NEWER_MINOR 3
#define V_NO_ENTRY 4
#define V_CREATE_FAILS 5
#define V_CRASH_ON_START 6
#define V_HANG_ON_STOP 7
#define V_CRASH_AFTER_COMMIT 8
#define V_CRASH_AT_LOAD 9
#define V_SLOW_CREATE 10
#define V_HANG_ON_START 11
#define V_NULL_DESCRIPTOR 12
#define V_OVERSIZE 13
#define V_SANDBOX 14
#define V_FLOOD_STALL 15 /* data source test.flood_stall, registered to stall when full */
#define V_FLOOD_DROP 16  /* test.flood_drop, built against ABI 1.2: drops when full */

/* The packet V_OVERSIZE tries first: more than a writer that drops when
 * the buffer is full (the default) carries with the host's 4 MiB buffer. */
#define OVERSIZE_BYTES (10u * 1024u * 1024u)

/* V_FLOOD_*: packets of this size, on the loop thread without pause. The
 * session's legacy_config says how many and when: "packets=N" (N of them
 * in start), or "until-refused" (from a timer, once the instance runs,
 * until a write fails or FLOOD_MAX were written). */
#define FLOOD_PACKET_BYTES 1000u
#define FLOOD_MAX 2000000u

struct state {
        const struct traced_host_api *api;
        struct traced_host *host;
        /* V_FLOOD_*: the writer, what its writes returned (logged at
         * stop), and the timer of "until-refused". */
        struct traced_writer *flood;
        unsigned flood_packets, flood_written, flood_failed;
        int32_t flood_error;
        struct traced_source *flood_timer;
};

#if VARIANT == V_FLOOD_STALL || VARIANT == V_FLOOD_DROP
/* The data source the flood variants register: the stalling one with the
 * flag of ABI 1.3, after checking that a bit the host does not know is
 * still refused; the dropping one is built as against ABI 1.2, whose
 * hosts knew no such flag, and checks that this host refuses it as those
 * did. */
static int32_t register_flood(const struct traced_host_api *api, struct traced_host *host) {
        if (api->register_data_source(host, "test.unknown_flag", 0x8u) != -EINVAL)
                return -EPROTO;
        if (VARIANT == V_FLOOD_DROP) {
                if (api->register_data_source(host, "test.flood_drop", TRACED_PLUGIN_DS_STALL_WHEN_FULL) != -EINVAL)
                        return -EPROTO;
                return api->register_data_source(host, "test.flood_drop", 0);
        }
        return api->register_data_source(host, "test.flood_stall", TRACED_PLUGIN_DS_STALL_WHEN_FULL);
}
#endif

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        if (VARIANT == V_CREATE_FAILS)
                return -ENODEV;
        if (VARIANT == V_CRASH_AT_LOAD)
                raise(SIGSEGV); /* every start of its host: a crash loop */
        if (VARIANT == V_SLOW_CREATE) {
                /* A plugin that takes its time to set up (a loaded machine,
                 * a large program to load): it registers 1.5 s late. */
                struct timespec t = { .tv_sec = 1, .tv_nsec = 500 * 1000 * 1000 };
                while (nanosleep(&t, &t) < 0 && errno == EINTR)
                        ;
        }
        struct state *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->api = api;
        s->host = host;
#if VARIANT == V_FLOOD_STALL || VARIANT == V_FLOOD_DROP
        int32_t r = register_flood(api, host);
#else
        int32_t r = api->register_data_source(host, "test.plugin", 0);
#endif
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static void destroy(void *state) {
        free(state);
}

/* TracePacket { for_testing { str: msg } } for msg under 120 bytes. */
static size_t test_packet(uint8_t pkt[128], const char *msg) {
        size_t len = strlen(msg);
        pkt[0] = 0xa2; /* field 900, wire type 2 */
        pkt[1] = 0x38;
        pkt[2] = (uint8_t) (len + 2);
        pkt[3] = 0x0a;
        pkt[4] = (uint8_t) len;
        memcpy(pkt + 5, msg, len);
        return len + 5;
}

/* TracePacket { for_testing { str: text padded with '.' } }: size bytes
 * in all, for size from 200 to 16000. */
static void flood_packet(uint8_t *pkt, size_t size, const char *text) {
        size_t str = size - 7, test = str + 3;
        pkt[0] = 0xa2; /* for_testing (900), length-delimited */
        pkt[1] = 0x38;
        pkt[2] = (uint8_t) (0x80 | (test & 0x7f));
        pkt[3] = (uint8_t) (test >> 7);
        pkt[4] = 0x0a; /* str (1) */
        pkt[5] = (uint8_t) (0x80 | (str & 0x7f));
        pkt[6] = (uint8_t) (str >> 7);
        memset(pkt + 7, '.', str);
        memcpy(pkt + 7, text, strlen(text));
}

#define FLOOD_NAME (VARIANT == V_FLOOD_STALL ? "stall" : "drop")

/* V_FLOOD_*: packets "flood stall N" (or drop) for N from 0, counting
 * what the writes returned; until_refused: up to the first failure. */
static void write_flood(struct state *s, bool until_refused) {
        uint8_t pkt[FLOOD_PACKET_BYTES];
        char text[32];
        for (unsigned i = 0; i < s->flood_packets; i++) {
                snprintf(text, sizeof(text), "flood %s %u ", FLOOD_NAME, i);
                flood_packet(pkt, sizeof(pkt), text);
                int32_t r = s->api->write_packet(s->flood, pkt, sizeof(pkt));
                if (r == 0)
                        s->flood_written++;
                else {
                        s->flood_failed++;
                        s->flood_error = r;
                        if (until_refused)
                                break;
                }
        }
        s->api->flush_writer(s->flood);
}

static void flood_tick(void *userdata) {
        struct state *s = userdata;
        s->api->remove_source(s->host, s->flood_timer);
        s->flood_timer = NULL;
        write_flood(s, true);
}

/* "packets=N": once the loop ran (and the service took what the flood
 * left in the buffer), one more packet, which says whether packets before
 * it were lost. */
static void flood_tail(void *userdata) {
        struct state *s = userdata;
        uint8_t pkt[128];
        char text[32];
        s->api->remove_source(s->host, s->flood_timer);
        s->flood_timer = NULL;
        snprintf(text, sizeof(text), "flood %s tail", FLOOD_NAME);
        (void) s->api->write_packet(s->flood, pkt, test_packet(pkt, text));
        s->api->flush_writer(s->flood);
}

/* The string of DataSourceConfig.legacy_config (1000) in config, or "". */
static void legacy_config(const uint8_t *cfg, size_t n, char *buf, size_t size) {
        size_t k = 0;
        buf[0] = 0;
        while (k < n) {
                uint64_t key = 0, len = 0;
                for (unsigned sh = 0; k < n && sh < 64; sh += 7) {
                        key |= (uint64_t) (cfg[k] & 0x7f) << sh;
                        if (!(cfg[k++] & 0x80))
                                break;
                }
                if ((key & 7) == 0) {
                        while (k < n && (cfg[k++] & 0x80))
                                ;
                        continue;
                }
                if ((key & 7) != 2)
                        return; /* no other wire types in what the tests send */
                for (unsigned sh = 0; k < n && sh < 64; sh += 7) {
                        len |= (uint64_t) (cfg[k] & 0x7f) << sh;
                        if (!(cfg[k++] & 0x80))
                                break;
                }
                if (len > n - k)
                        return;
                if (key >> 3 == 1000) {
                        snprintf(buf, size, "%.*s", (int) len, (const char *) cfg + k);
                        return;
                }
                k += len;
        }
}

static void start_flood(struct state *s, struct traced_writer *w, const uint8_t *cfg, size_t n) {
        char how[64];
        legacy_config(cfg, n, how, sizeof(how));
        s->flood = w;
        s->flood_written = s->flood_failed = 0;
        s->flood_error = 0;
        if (strcmp(how, "until-refused") == 0) {
                s->flood_packets = FLOOD_MAX;
                if (s->api->add_timer(s->host, 10, flood_tick, s, &s->flood_timer) < 0)
                        s->flood_timer = NULL;
                return;
        }
        if (sscanf(how, "packets=%u", &s->flood_packets) != 1)
                s->flood_packets = 0;
        write_flood(s, false);
        if (s->api->add_timer(s->host, 200, flood_tail, s, &s->flood_timer) < 0)
                s->flood_timer = NULL;
}

/* V_OVERSIZE: a packet bigger than any writer carries, then the usual
 * one, and a packet saying what each write returned. */
static void write_oversize(const struct traced_host_api *api, struct traced_writer *w) {
        uint8_t *big = calloc(1, OVERSIZE_BYTES);
        int32_t r_big = -ENOMEM, r_next = -1;
        uint8_t pkt[128];
        char text[100];
        if (big) {
                /* for_testing (field 900) over the rest of the packet (6
                 * bytes of key and length; its contents do not matter). */
                size_t body = OVERSIZE_BYTES - 6, k = 2;
                big[0] = 0xa2;
                big[1] = 0x38;
                for (size_t v = body; v >= 0x80; v >>= 7)
                        big[k++] = (uint8_t) (v | 0x80);
                big[k] = (uint8_t) (body >> (7 * (k - 2)));
                r_big = api->write_packet(w, big, OVERSIZE_BYTES);
                free(big);
        }
        r_next = api->write_packet(w, pkt, test_packet(pkt, "hello from a plugin"));
        snprintf(text, sizeof(text), "oversize: %d then: %d", (int) r_big, (int) r_next);
        (void) api->write_packet(w, pkt, test_packet(pkt, text));
}

/* What a plugin declaring no capability may do, as "sandbox uid=U
 * shadow=E etc=E": U its uid, E 0 when it read /etc/shadow or created a
 * file in /etc (removed at once), else the errno. */
static void sandbox_report(char *buf, size_t size) {
        int shadow = 0, etc = 0;
        int fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
        char c;
        if (fd < 0 || read(fd, &c, 1) < 0)
                shadow = errno;
        if (fd >= 0)
                close(fd);
        char path[64];
        snprintf(path, sizeof(path), "/etc/traced-sandbox-test.%d", (int) getpid());
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                etc = errno;
        else {
                close(fd);
                unlink(path);
        }
        snprintf(buf, size, "sandbox uid=%u shadow=%d etc=%d", (unsigned) getuid(), shadow, etc);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct state *s = state;
        struct traced_writer *w;
        uint8_t pkt[128];
        if (VARIANT == V_CRASH_ON_START)
                raise(SIGSEGV);
        /* Never returns: the host's loop stops, and with it its heartbeat. */
        while (VARIANT == V_HANG_ON_START)
                pause();
        if (s->api->new_writer(s->host, id, &w) < 0)
                return;
        if (VARIANT == V_FLOOD_STALL || VARIANT == V_FLOOD_DROP) {
                start_flood(s, w, cfg, n);
                return;
        }
        char msg[100] = "hello from a plugin";
        if (VARIANT == V_SANDBOX)
                sandbox_report(msg, sizeof(msg));
        if (VARIANT == V_OVERSIZE)
                write_oversize(s->api, w);
        else
                s->api->write_packet(w, pkt, test_packet(pkt, msg));
        s->api->flush_writer(w);
        /* Its packet is committed; now it dies. */
        if (VARIANT == V_CRASH_AFTER_COMMIT)
                raise(SIGSEGV);
        s->api->free_writer(w);
}

static void stop(void *state, uint64_t id) {
        struct state *s = state;
        /* Never returns: the host's loop stops, and with it its heartbeat. */
        while (VARIANT == V_HANG_ON_STOP)
                pause();
        if (s->flood) {
                /* What the writes returned, in traced's log. */
                char text[100];
                snprintf(text, sizeof(text), "flood %s: written %u failed %u error %d", FLOOD_NAME, s->flood_written,
                         s->flood_failed, (int) s->flood_error);
                s->api->log(s->host, TRACED_LOG_INFO, text);
                if (s->flood_timer)
                        s->api->remove_source(s->host, s->flood_timer);
                s->flood_timer = NULL;
                s->api->free_writer(s->flood);
                s->flood = NULL;
        }
}

static const struct traced_plugin_ops ops = {
        .struct_size = sizeof(struct traced_plugin_ops),
        .create = create,
        .destroy = destroy,
        .start = start,
        .stop = stop,
};

#if VARIANT == V_NO_ENTRY
/* No entry point at all. */
int traced_plugin_not_the_entry(void);
int traced_plugin_not_the_entry(void) {
        return ops.struct_size > 0;
}
#elif VARIANT == V_GOOD || VARIANT == V_CREATE_FAILS || VARIANT == V_CRASH_ON_START || VARIANT == V_HANG_ON_STOP || \
        VARIANT == V_CRASH_AFTER_COMMIT || VARIANT == V_CRASH_AT_LOAD || VARIANT == V_HANG_ON_START ||              \
        VARIANT == V_OVERSIZE || VARIANT == V_SANDBOX
TRACED_PLUGIN_DEFINE("test", "1.0", 0, ops)
#elif VARIANT == V_FLOOD_STALL
TRACED_PLUGIN_DEFINE("flood-stall", "1.0", 0, ops)
#elif VARIANT == V_FLOOD_DROP
/* As built against ABI 1.2. */
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void);
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void) {
        static const struct traced_plugin_descriptor d = {
                TRACED_PLUGIN_MAGIC, TRACED_PLUGIN_ABI_MAJOR, 2, sizeof(struct traced_plugin_descriptor),
                "flood-drop",        "1.0",                   0, &ops,
        };
        return &d;
}
#elif VARIANT == V_NULL_DESCRIPTOR
/* An entry point that gives no descriptor. */
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void);
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void) {
        return ops.struct_size ? NULL : NULL;
}
#else
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void);
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void) {
        static const struct traced_plugin_descriptor d = {
                VARIANT == V_BAD_MAGIC ? 0x12345678u : TRACED_PLUGIN_MAGIC,
                VARIANT == V_FUTURE_MAJOR ? TRACED_PLUGIN_ABI_MAJOR + 1 : TRACED_PLUGIN_ABI_MAJOR,
                VARIANT == V_NEWER_MINOR ? TRACED_PLUGIN_ABI_MINOR + 5 : TRACED_PLUGIN_ABI_MINOR,
                sizeof(struct traced_plugin_descriptor),
                "broken",
                "0",
                0,
                &ops,
        };
        return &d;
}
#endif
