/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int record_target_check_pids(const pid_t *pids, size_t n, pid_t *ret_missing) {
        for (size_t i = 0; i < n; i++)
                /* EPERM: it exists, owned by someone else. */
                if (kill(pids[i], 0) < 0 && errno == ESRCH) {
                        *ret_missing = pids[i];
                        return -ESRCH;
                }
        return 0;
}

static int check_executable(const char *path) {
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
                return -EACCES;
        return 0;
}

int record_command_find(const char *name) {
        if (!name[0])
                return -ENOENT;
        if (strchr(name, '/'))
                return check_executable(name);
        const char *path = getenv("PATH");
        int best = -ENOENT;
        for (const char *dir = path ? path : "/bin:/usr/bin"; dir;) {
                const char *colon = strchr(dir, ':');
                size_t len = colon ? (size_t) (colon - dir) : strlen(dir);
                _cleanup_free_ char *full = NULL;
                /* An empty element is the current directory, as for execvp. */
                if (asprintf(&full, "%.*s%s%s", (int) len, dir, len ? "/" : "", name) < 0)
                        return -ENOMEM;
                int r = check_executable(full);
                if (r == 0)
                        return 0;
                if (r == -EACCES)
                        best = r; /* execvp reports EACCES when only such were found */
                dir = colon ? colon + 1 : NULL;
        }
        return best;
}

int record_command_fork(struct record_command *c, char **argv) {
        int p[2], e[2];
        *c = (struct record_command) { .pid = -1, .release_fd = -EBADF, .exec_fd = -EBADF };
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(e, O_CLOEXEC) < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                close(e[0]);
                close(e[1]);
                return r;
        }
        if (pid == 0) {
                char go;
                close(p[1]);
                close(e[0]);
                /* Released, or tracectl gone (end of file): no tracing, no run. */
                if (read(p[0], &go, 1) != 1)
                        _exit(127);
                (void) signal(SIGPIPE, SIG_DFL);
                /* tracectl's handlers are not inherited through exec, but
                 * what it ignores would be. */
                (void) signal(SIGINT, SIG_DFL);
                (void) signal(SIGTERM, SIG_DFL);
                execvp(argv[0], argv);
                /* The exec error for tracectl; a successful exec closes
                 * the pipe instead. */
                int err = errno;
                (void) !write(e[1], &err, sizeof(err));
                _exit(127);
        }
        close(p[0]);
        close(e[1]);
        c->pid = pid;
        c->release_fd = p[1];
        c->exec_fd = e[0];
        return 0;
}

void record_command_release(struct record_command *c) {
        if (c->released || c->release_fd < 0)
                return;
        (void) !write(c->release_fd, "g", 1);
        c->release_fd = safe_close(c->release_fd);
        c->released = true;
}

/* The child is gone: did its exec fail? (It wrote the errno before it
 * exited, so the pipe holds it or is at its end.) */
static void exited(struct record_command *c) {
        int err = 0;
        c->exited = true;
        if (c->released && c->exec_fd >= 0 && read(c->exec_fd, &err, sizeof(err)) == (ssize_t) sizeof(err))
                c->exec_error = err > 0 ? err : EIO;
        c->exec_fd = safe_close(c->exec_fd);
}

bool record_command_poll(struct record_command *c) {
        if (c->pid > 0 && !c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
                exited(c);
        return c->exited;
}

void record_command_finish(struct record_command *c) {
        if (c->pid <= 0)
                return;
        /* Never released: closing the pipe ends it without running. */
        c->release_fd = safe_close(c->release_fd);
        if (c->abandoned) {
                c->exec_fd = safe_close(c->exec_fd);
                return;
        }
        if (c->exited)
                return;
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
                ;
        exited(c);
}

bool record_command_wait(struct record_command *c, int wake_fd, bool (*give_up)(void *userdata), void *userdata) {
        while (!record_command_poll(c)) {
                if (give_up(userdata)) {
                        c->abandoned = true;
                        return false;
                }
                struct pollfd pfd = { .fd = wake_fd, .events = POLLIN };
                if (poll(&pfd, wake_fd >= 0 ? 1 : 0, 200) > 0) {
                        char buf[64];
                        while (read(wake_fd, buf, sizeof(buf)) > 0)
                                ;
                }
        }
        return true;
}
