/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Deliberately broken and well-behaved plugins for the loader tests. One
 * source, built several times with -DVARIANT=... */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

/* The packet V_OVERSIZE tries first: more than a writer that drops when
 * the buffer is full (the default) carries with the host's 4 MiB buffer. */
#define OVERSIZE_BYTES (10u * 1024u * 1024u)

struct state {
        const struct traced_host_api *api;
        struct traced_host *host;
};

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
        int32_t r = api->register_data_source(host, "test.plugin", 0);
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
        /* Never returns: the host's loop stops, and with it its heartbeat. */
        while (VARIANT == V_HANG_ON_STOP)
                pause();
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
