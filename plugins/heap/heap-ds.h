/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The heap plugin: data source android.heapprofd, served to processes
 * that run with libtraced-heap.so preloaded (lib/heap/, heap-wire.h).
 *
 *   heap-server.c  the state page, the socket, one client per process that
 *                  connected: which instance targets it, its ring;
 *   heap-ds.c      the instances: their config, reading the rings
 *                  (unwinding each sample out of process with
 *                  lib/profiling, heap-callsites.c the totals) and the
 *                  dumps (ProfilePacket, interned callstacks).
 *
 * Everything runs on the host's event loop thread.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/plugin-common.h"
#include "heap-callsites.h"
#include "heap-config.h"
#include "heap/heap-ring.h"
#include "heap/heap-template.h"
#include "heap/heap-wire.h"
#include "profiling/intern.h"
#include "profiling/procmaps.h"
#include "profiling/symbolizer.h"
#include "profiling/unwind.h"

#define HEAP_DS_NAME "android.heapprofd"
/* How often the rings are read while a session runs. */
#define HEAP_DRAIN_MS 20u

struct heap_instance;

struct heap_client {
        struct heap_client *next;
        struct heap_plugin *pl;
        struct heap_instance *inst; /* NULL until it said hello, and after its instance ended */
        int fd;
        struct traced_source *src;
        pid_t pid;
        bool hello_done, disconnected, corrupted, from_startup;
        void *ring_mem;
        size_t ring_size;
        struct heap_ring ring;
        /* Its stack templates (heap-wire.h), or NULL. */
        struct heap_template *templates;
        uint64_t read_pos;
        uint64_t text_start, text_end;
        struct heap_callsites cs;
        uint64_t samples, unwind_errors, no_stack, reloads, last_reload_ns;
        /* Samples that came with a template's words only; templates made;
         * those that died (a walk read a word they lack). */
        uint64_t sparse_samples, templates_made, templates_killed;
        uint64_t start_ns; /* CLOCK_MONOTONIC_COARSE, when it joined */
};

struct heap_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        struct plugin_instance *instances;
        char dir[200];
        int state_fd;
        struct heap_state *state;
        int listen_fd;
        struct traced_source *listen_src, *drain_timer;
        struct heap_client *clients;
};

struct heap_instance {
        struct plugin_instance base;
        struct heap_plugin *pl;
        struct heap_config cfg;
        struct traced_writer *writer;
        struct proc_table *procs;
        struct elf_cache *elves;
        struct symbolizer sym;
        struct unwinder *unw;
        struct intern_writer *iw;
        struct traced_source *dump_timer;
        uint64_t start_ticks; /* boot time in clock ticks at the start (/proc/PID/stat's unit) */
        uint64_t dumps, packets;
        uint64_t write_errors;
        bool dump_phase_pending;
};

/* heap-server.c */
/* The state page: created (or taken over) at the plugin's creation. */
int heap_server_setup(struct heap_plugin *pl);
void heap_server_free(struct heap_plugin *pl);
/* Listening while an instance runs. */
int heap_server_listen(struct heap_plugin *pl);
void heap_server_unlisten(struct heap_plugin *pl);
/* Processes look again at whom the plugin targets. */
void heap_server_bump(struct heap_plugin *pl);
/* Ends a client: its connection closed, its ring unmapped. */
void heap_client_free(struct heap_plugin *pl, struct heap_client *c);

/* heap-ds.c */
void heap_instance_start(struct heap_plugin *pl, uint64_t id, const uint8_t *config, size_t size);
void heap_instance_stop(struct heap_plugin *pl, uint64_t id);
void heap_instance_flush(struct heap_plugin *pl, uint64_t id);
void heap_instance_clear(struct heap_plugin *pl, uint64_t id);
void heap_instances_free(struct heap_plugin *pl);
/* The instance that profiles process pid, of that command line, started
 * at start_ticks; NULL when none does. */
struct heap_instance *heap_instance_for(struct heap_plugin *pl, pid_t pid, const char *cmdline, size_t size,
                                        uint64_t start_ticks);
/* Reads what the client's ring holds. */
void heap_client_drain(struct heap_client *c);
void heap_on_drain_timer(void *userdata);
