/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "plugins.h"

#define MAX_PLUGINS 64
#define EXIT_PLUGIN_REFUSED 78
#define BACKOFF_MAX_USEC (30u * 1000000u)

extern char **environ;

struct plugin_proc {
        struct plugins *owner;
        char *path;
        pid_t pid;
        sd_event_source *child;
        sd_event_source *restart;
        uint64_t backoff_usec;
        unsigned restarts;
        bool refused;
};

struct plugins {
        sd_event *event;
        char *host_binary;
        char *socket;
        struct plugin_proc procs[MAX_PLUGINS];
        size_t n;
        bool stopping;
};

static int spawn(struct plugin_proc *pp);

static int on_restart(sd_event_source *s, uint64_t usec, void *userdata) {
        struct plugin_proc *pp = userdata;
        pp->restart = sd_event_source_disable_unref(pp->restart);
        (void) spawn(pp);
        return 0;
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct plugin_proc *pp = userdata;
        struct plugins *ps = pp->owner;

        pp->child = sd_event_source_disable_unref(pp->child);
        pp->pid = 0;
        if (ps->stopping)
                return 0;
        if (si->si_code == CLD_EXITED && si->si_status == EXIT_PLUGIN_REFUSED) {
                pp->refused = true;
                log_error("Plugin %s was refused by its host; not restarting it.", pp->path);
                return 0;
        }
        if (si->si_code == CLD_EXITED)
                log_warning("Plugin host for %s exited with status %d; restarting in %.1fs.", pp->path,
                            si->si_status, (double) pp->backoff_usec / 1e6);
        else
                log_warning("Plugin host for %s died (signal %d); restarting in %.1fs.", pp->path, si->si_status,
                            (double) pp->backoff_usec / 1e6);
        (void) sd_event_add_time_relative(ps->event, &pp->restart, CLOCK_MONOTONIC, pp->backoff_usec, 100000,
                                          on_restart, pp);
        pp->backoff_usec = MIN(pp->backoff_usec * 2, (uint64_t) BACKOFF_MAX_USEC);
        pp->restarts++;
        return 0;
}

static int spawn(struct plugin_proc *pp) {
        struct plugins *ps = pp->owner;
        char *argv[] = { ps->host_binary, (char *) "--socket", ps->socket, pp->path, NULL };
        sigset_t none;
        posix_spawnattr_t attr;
        int r;

        /* The child starts with no blocked signals. */
        sigemptyset(&none);
        posix_spawnattr_init(&attr);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
        r = posix_spawn(&pp->pid, ps->host_binary, NULL, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        if (r != 0)
                return log_error_errno(r, "Failed to start the plugin host for %s: %m", pp->path);
        r = sd_event_add_child(ps->event, &pp->child, pp->pid, WEXITED, on_child, pp);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the plugin host for %s: %m", pp->path);
        log_info("Started plugin host %d for %s.", (int) pp->pid, pp->path);
        return 0;
}

int plugins_start(sd_event *event, const char *dir, const char *host_binary, const char *socket,
                  char *const *disabled, unsigned n_disabled, struct plugins **ret) {
        struct plugins *ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        ps->event = sd_event_ref(event);
        ps->host_binary = strdup(host_binary);
        ps->socket = strdup(socket);
        if (!ps->host_binary || !ps->socket) {
                plugins_stop(ps);
                return -ENOMEM;
        }
        *ret = ps;

        DIR *d = opendir(dir);
        if (!d) {
                log_notice_errno(errno, "No plugin directory %s: %m", dir);
                return 0;
        }
        struct dirent *de;
        while ((de = readdir(d)) && ps->n < MAX_PLUGINS) {
                size_t l = strlen(de->d_name);
                if (l < 4 || strcmp(de->d_name + l - 3, ".so") != 0)
                        continue;
                bool off = false;
                for (unsigned i = 0; i < n_disabled; i++)
                        if (strlen(disabled[i]) == l - 3 && strncmp(disabled[i], de->d_name, l - 3) == 0)
                                off = true;
                if (off) {
                        log_info("Plugin %s is disabled in the configuration.", de->d_name);
                        continue;
                }
                struct plugin_proc *pp = &ps->procs[ps->n];
                *pp = (struct plugin_proc) { .owner = ps, .backoff_usec = 1000000u };
                if (asprintf(&pp->path, "%s/%s", dir, de->d_name) < 0)
                        break;
                ps->n++;
                (void) spawn(pp);
        }
        closedir(d);
        return 0;
}

void plugins_stop(struct plugins *ps) {
        if (!ps)
                return;
        ps->stopping = true;
        for (size_t i = 0; i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                pp->restart = sd_event_source_disable_unref(pp->restart);
                if (pp->pid > 0) {
                        (void) kill(pp->pid, SIGTERM);
                        for (int k = 0; k < 200; k++) {
                                if (waitpid(pp->pid, NULL, WNOHANG) == pp->pid)
                                        break;
                                usleep(10000);
                                if (k == 199) {
                                        (void) kill(pp->pid, SIGKILL);
                                        (void) waitpid(pp->pid, NULL, 0);
                                }
                        }
                }
                pp->child = sd_event_source_disable_unref(pp->child);
                free(pp->path);
        }
        free(ps->host_binary);
        free(ps->socket);
        sd_event_unref(ps->event);
        free(ps);
}
