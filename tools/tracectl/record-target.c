/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "record-target.h"

int record_target_parse_pids(const char *s, pid_t *pids, size_t *n) {
        while (*s) {
                char *end;
                errno = 0;
                long v = strtol(s, &end, 10);
                if (errno || end == s || v <= 0 || v > INT32_MAX || (*end && *end != ','))
                        return -EINVAL;
                if (*n >= RECORD_TARGET_MAX_PIDS)
                        return -E2BIG;
                pids[(*n)++] = (pid_t) v;
                s = *end ? end + 1 : end;
        }
        return 0;
}

static int add_pids(int32_t **list, size_t *n_list, const pid_t *pids, size_t n) {
        int32_t *l = realloc(*list, (*n_list + n) * sizeof(**list));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                l[(*n_list)++] = (int32_t) pids[i];
        *list = l;
        return 0;
}

static int narrow_perf(Perfetto__Protos__DataSourceConfig *ds, const pid_t *pids, size_t n) {
        if (!ds->perf_event_config) {
                ds->perf_event_config = calloc(1, sizeof(*ds->perf_event_config));
                if (!ds->perf_event_config)
                        return -ENOMEM;
                perfetto__protos__perf_event_config__init(ds->perf_event_config);
        }
        Perfetto__Protos__PerfEventConfig *pc = ds->perf_event_config;
        if (!pc->callstack_sampling)
                return add_pids(&pc->target_pid, &pc->n_target_pid, pids, n);
        if (!pc->callstack_sampling->scope) {
                pc->callstack_sampling->scope = calloc(1, sizeof(*pc->callstack_sampling->scope));
                if (!pc->callstack_sampling->scope)
                        return -ENOMEM;
                perfetto__protos__perf_event_config__scope__init(pc->callstack_sampling->scope);
        }
        Perfetto__Protos__PerfEventConfig__Scope *sc = pc->callstack_sampling->scope;
        return add_pids(&sc->target_pid, &sc->n_target_pid, pids, n);
}

static int narrow_bpf_stack(Perfetto__Protos__DataSourceConfig *ds, const pid_t *pids, size_t n) {
        if (!ds->bpf_stack_config) {
                ds->bpf_stack_config = calloc(1, sizeof(*ds->bpf_stack_config));
                if (!ds->bpf_stack_config)
                        return -ENOMEM;
                perfetto__protos__bpf_stack_config__init(ds->bpf_stack_config);
        }
        Perfetto__Protos__BpfStackConfig *bc = ds->bpf_stack_config;
        char **f = realloc(bc->filter, (bc->n_filter + n) * sizeof(*f));
        if (!f)
                return -ENOMEM;
        bc->filter = f;
        for (size_t i = 0; i < n; i++) {
                if (asprintf(&f[bc->n_filter], "pid=%d", (int) pids[i]) < 0)
                        return -ENOMEM;
                bc->n_filter++;
        }
        return 0;
}

int record_target_apply(Perfetto__Protos__TraceConfig *cfg, const pid_t *pids, size_t n) {
        int narrowed = 0;
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                Perfetto__Protos__DataSourceConfig *ds = cfg->data_sources[i]->config;
                int r = 0;
                if (!ds || !ds->name)
                        continue;
                if (strcmp(ds->name, "linux.perf") == 0)
                        r = narrow_perf(ds, pids, n);
                else if (strcmp(ds->name, "linux.bpf_stack") == 0)
                        r = narrow_bpf_stack(ds, pids, n);
                else
                        continue;
                if (r < 0)
                        return r;
                narrowed++;
        }
        return narrowed;
}

int record_command_fork(struct record_command *c, char **argv) {
        int p[2];
        *c = (struct record_command) { .pid = -1, .release_fd = -EBADF };
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                char go;
                close(p[1]);
                /* Released, or tracectl gone (end of file): no tracing, no run. */
                if (read(p[0], &go, 1) != 1)
                        _exit(127);
                (void) signal(SIGPIPE, SIG_DFL);
                execvp(argv[0], argv);
                fprintf(stderr, "tracectl: cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(p[0]);
        c->pid = pid;
        c->release_fd = p[1];
        return 0;
}

void record_command_release(struct record_command *c) {
        if (c->released || c->release_fd < 0)
                return;
        (void) !write(c->release_fd, "g", 1);
        c->release_fd = safe_close(c->release_fd);
        c->released = true;
}

bool record_command_poll(struct record_command *c) {
        if (c->pid > 0 && !c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
                c->exited = true;
        return c->exited;
}

void record_command_finish(struct record_command *c) {
        if (c->pid <= 0)
                return;
        /* Never released: closing the pipe ends it without running. */
        c->release_fd = safe_close(c->release_fd);
        while (!c->exited && waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
                ;
        c->exited = true;
}
