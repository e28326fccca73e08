/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <limits.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/capability.h"
#include "basic/macro.h"
#include "log/log.h"
#include "supervisor/host-exec.h"
#include "supervisor/plugins.h"
#include "shared/control.h"

#define MAX_PLUGINS PLUGINS_MAX
#define EXIT_PLUGIN_REFUSED CONTROL_EXIT_PLUGIN_REFUSED
#define BACKOFF_FIRST_USEC 1000000u
#define BACKOFF_MAX_USEC (30u * 1000000u)
/* A host that ran this long before dying starts the backoff over. */
#define STABLE_USEC (60u * 1000000u)

struct plugin_proc {
        struct plugins *owner;
        char *path;
        char name[64];
        pid_t pid;
        sd_event_source *child;
        sd_event_source *restart;
        sd_event_source *beat_io;
        sd_event_source *beat_timer;
        int beat_fd;
        uint64_t started_usec;
        uint64_t backoff_usec;
        unsigned restarts;
        bool hung;
        uint64_t hung_usec;
        /* What the host wrote into its heartbeat pipe besides the beats
         * (NUL bytes): why it refuses its plugin. */
        char note[256];
        size_t note_len;
        struct plugins_declared decl; /* its capabilities, its host's user */
        /* [plugins] hosts=lazy: its host starts when a session needs it. */
        bool parked;
        bool refused; /* its host refused it: not started again */
        bool parking;     /* stopped as idle (plugins_stop_host) */
        bool start_again; /* asked for while parking */
};

struct plugins {
        sd_event *event;
        char *host_binary;
        struct host_identity id;
        bool user_required;
        uint64_t watchdog_usec;
        plugins_handoff_fn handoff;
        plugins_exited_fn exited;
        plugins_parked_fn parked;
        bool lazy;
        uint64_t idle_usec;
        void *userdata;
        struct plugin_proc procs[MAX_PLUGINS];
        size_t n;
        bool stopping;
};

static int spawn(struct plugin_proc *pp);

/* What a read from the heartbeat pipe held besides the beats. */
static void note_text(struct plugin_proc *pp, const char *buf, ssize_t n) {
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] != '\0' && buf[i] != '\n' && pp->note_len < sizeof(pp->note) - 1)
                        pp->note[pp->note_len++] = buf[i];
}

/* Reads what is left in the pipe of a host that exited. */
static void keep_note(struct plugin_proc *pp) {
        char buf[256];
        ssize_t n;
        if (pp->beat_fd < 0)
                return;
        while ((n = read(pp->beat_fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
                note_text(pp, buf, n);
}

static void stop_watching(struct plugin_proc *pp) {
        pp->beat_io = sd_event_source_disable_unref(pp->beat_io);
        pp->beat_timer = sd_event_source_disable_unref(pp->beat_timer);
        pp->beat_fd = safe_close(pp->beat_fd);
}

static int on_restart(sd_event_source *s, uint64_t usec, void *userdata) {
        struct plugin_proc *pp = userdata;
        pp->restart = sd_event_source_disable_unref(pp->restart);
        if (spawn(pp) < 0) {
                /* Try again later rather than give up on the plugin. */
                (void) sd_event_add_time_relative(pp->owner->event, &pp->restart, CLOCK_MONOTONIC, pp->backoff_usec,
                                                  100000, on_restart, pp);
                pp->backoff_usec = MIN(pp->backoff_usec * 2, (uint64_t) BACKOFF_MAX_USEC);
        }
        return 0;
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct plugin_proc *pp = userdata;
        struct plugins *ps = pp->owner;
        uint64_t now = 0;
        pid_t pid = pp->pid;

        pp->child = sd_event_source_disable_unref(pp->child);
        pp->pid = 0;
        /* The host's last words are read before the pipe goes. */
        keep_note(pp);
        stop_watching(pp);
        bool parking = pp->parking;
        pp->parking = false;
        struct control_exit how = {
                .code = si->si_code,
                .status = si->si_status,
                .hung_usec = pp->hung ? pp->hung_usec : 0,
                .stopping = ps->stopping || parking,
                .refused = si->si_code == CLD_EXITED && si->si_status == EXIT_PLUGIN_REFUSED,
        };
        snprintf(how.reason, sizeof(how.reason), "%.*s", (int) pp->note_len, pp->note);
        pp->note_len = 0;
        if (ps->exited)
                ps->exited(pid, pp->name, &how, ps->userdata);
        if (ps->stopping)
                return 0;
        if (parking && !pp->hung) {
                pp->parked = true;
                log_info("Plugin host %d for %s stopped: it served no session for %.0f s ([plugins] hosts=lazy).",
                         (int) pid, pp->path, (double) ps->idle_usec / 1e6);
                if (pp->start_again) {
                        pp->start_again = false;
                        log_info("Starting the plugin host for %s again: a session needs it.", pp->path);
                        if (spawn(pp) < 0)
                                (void) sd_event_add_time_relative(ps->event, &pp->restart, CLOCK_MONOTONIC,
                                                                  pp->backoff_usec, 100000, on_restart, pp);
                }
                return 0;
        }
        if (how.refused) {
                pp->refused = true;
                log_error("Plugin %s was refused by its host; not restarting it.", pp->path);
                return 0;
        }
        (void) sd_event_now(ps->event, CLOCK_MONOTONIC, &now);
        if (now - pp->started_usec >= STABLE_USEC)
                pp->backoff_usec = BACKOFF_FIRST_USEC;
        if (pp->hung)
                log_warning("Plugin host for %s was killed after it hung; restarting in %.1fs.", pp->path,
                            (double) pp->backoff_usec / 1e6);
        else if (si->si_code == CLD_EXITED)
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

static int on_beat_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct plugin_proc *pp = userdata;
        if (pp->pid <= 0 || pp->hung)
                return 0;
        log_error("Plugin host %d for %s has not shown a sign of life for %.1fs; killing it.", (int) pp->pid,
                  pp->path, (double) pp->owner->watchdog_usec / 1e6);
        pp->hung = true;
        pp->hung_usec = pp->owner->watchdog_usec;
        (void) kill(pp->pid, SIGKILL);
        return 0;
}

static int on_beat(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct plugin_proc *pp = userdata;
        char buf[256];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
                note_text(pp, buf, n);
                (void) sd_event_source_set_time_relative(pp->beat_timer, pp->owner->watchdog_usec);
                return 0;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        /* The host closed its end (exiting): the child handler takes over. */
        pp->beat_io = sd_event_source_disable_unref(pp->beat_io);
        return 0;
}

/* Moves fd to target in a freshly forked child, clearing close-on-exec. */
static int move_fd(int fd, int target) {
        if (fd == target)
                return fcntl(fd, F_SETFD, 0) < 0 ? -errno : 0;
        return dup2(fd, target) < 0 ? -errno : 0;
}

/* A plugin whose host its user cannot run, with plugin_user_required=yes:
 * not started, and refused as a host refuses its plugin (the service
 * lists it, QueryServiceState, and names it to a consumer asking for
 * its data sources). */
static void refuse_unreachable(struct plugin_proc *pp) {
        struct plugins *ps = pp->owner;
        struct control_exit how = {
                .code = CLD_EXITED,
                .status = EXIT_PLUGIN_REFUSED,
                .refused = true,
        };
        snprintf(how.reason, sizeof(how.reason), "%s", pp->decl.reason);
        if (ps->exited)
                ps->exited(0, pp->name, &how, ps->userdata);
}

static int spawn(struct plugin_proc *pp) {
        struct plugins *ps = pp->owner;
        _cleanup_close_ int sp0 = -EBADF, sp1 = -EBADF, beat_r = -EBADF, beat_w = -EBADF;
        int sv[2], pipefd[2], r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return log_error_errno(errno, "Failed to create the connection for plugin %s: %m", pp->path);
        sp0 = sv[0];
        sp1 = sv[1];
        if (ps->watchdog_usec > 0) {
                if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0)
                        return log_error_errno(errno, "Failed to create the heartbeat pipe for %s: %m", pp->path);
                beat_r = pipefd[0];
                beat_w = pipefd[1];
        }

        char usec[32];
        snprintf(usec, sizeof(usec), "%llu", (unsigned long long) ps->watchdog_usec);
        char *args[5];
        size_t k = 0;
        args[k++] = ps->host_binary;
        args[k++] = (char *) "--socket-fd=3";
        if (beat_w >= 0) {
                args[k++] = (char *) "--watchdog-fd=4";
                args[k++] = (char *) "--watchdog-usec";
                args[k++] = usec;
        }
        /* Asked again when the plugin or the host changed since. */
        plugins_declared_recheck(&pp->decl, pp->path, ps->host_binary, &ps->id, ps->user_required);
        if (pp->decl.refused) {
                pp->refused = true;
                refuse_unreachable(pp);
                return 0;
        }
        pp->parked = false;
        struct host_identity id = ps->id;
        if (pp->decl.as_root)
                id.switch_user = false;
        struct host_exec e;
        r = host_exec_prepare(&e, &id, pp->name, pp->path, pp->decl.caps, args, k);
        if (r < 0)
                return r;

        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                host_exec_done(&e);
                return log_error_errno(r, "Failed to start the plugin host for %s: %m", pp->path);
        }
        if (pid == 0) {
                /* Child: only async-signal-safe calls until exec. */
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                /* Park both ends above the target numbers first. */
                int a = fcntl(sp1, F_DUPFD_CLOEXEC, 10);
                int b = beat_w >= 0 ? fcntl(beat_w, F_DUPFD_CLOEXEC, 10) : -1;
                if (a < 0 || move_fd(a, 3) < 0)
                        _exit(127);
                if (b >= 0 && move_fd(b, 4) < 0)
                        _exit(127);
                host_exec_child(&e);
        }
        host_exec_done(&e);

        pp->pid = pid;
        pp->hung = false;
        pp->note_len = 0;
        (void) sd_event_now(ps->event, CLOCK_MONOTONIC, &pp->started_usec);
        r = sd_event_add_child(ps->event, &pp->child, pid, WEXITED, on_child, pp);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                pp->pid = 0;
                return log_error_errno(r, "Failed to watch the plugin host for %s: %m", pp->path);
        }
        sp1 = safe_close(sp1);
        beat_w = safe_close(beat_w);
        if (beat_r >= 0) {
                r = sd_event_add_io(ps->event, &pp->beat_io, beat_r, EPOLLIN, on_beat, pp);
                if (r >= 0)
                        r = sd_event_add_time_relative(ps->event, &pp->beat_timer, CLOCK_MONOTONIC,
                                                       ps->watchdog_usec, 100000, on_beat_timeout, pp);
                if (r < 0)
                        log_warning_errno(r, "Failed to watch plugin host %d for hangs: %m", (int) pid);
                else
                        pp->beat_fd = TAKE_FD(beat_r);
        }
        r = ps->handoff(TAKE_FD(sp0), pid, pp->name, ps->userdata);
        if (r < 0)
                log_error_errno(r, "Failed to connect plugin host %d (%s) to the service: %m", (int) pid, pp->path);
        log_info("Started plugin host %d for %s, as %s.", (int) pid, pp->path,
                 id.switch_user ? id.name : geteuid() == 0 ? "root" : "traced's user");
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool path_trusted(const char *path, bool want_dir, char *why, size_t why_size) {
        struct stat st;
        if (stat(path, &st) < 0) {
                snprintf(why, why_size, "%s: %s", path, strerror(errno));
                return false;
        }
        return host_exec_file_trusted(&st, path, want_dir, why, why_size);
}

int plugins_scan(const char *dir, char *const *disabled, unsigned n_disabled, char **ret_paths, unsigned max) {
        char why[512];
        if (!path_trusted(dir, true, why, sizeof(why))) {
                log_error("Not running plugins from %s: %s.", dir, why);
                return -EPERM;
        }
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < max) {
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
                /* A symbolic link is judged by the file it leads to and
                 * that file's directory. */
                char path[PATH_MAX], real[PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                if (!realpath(path, real)) {
                        log_error("Skipping plugin %s: %m", path);
                        continue;
                }
                char *slash = strrchr(real, '/');
                bool ok = path_trusted(real, false, why, sizeof(why));
                if (ok && slash && slash != real) {
                        *slash = '\0';
                        ok = path_trusted(real, true, why, sizeof(why));
                }
                if (!ok) {
                        log_error("Skipping plugin %s: %s.", path, why);
                        continue;
                }
                if (asprintf(&ret_paths[n], "%s/%s", dir, de->d_name) < 0) {
                        closedir(d);
                        for (unsigned i = 0; i < n; i++)
                                free(ret_paths[i]);
                        return -ENOMEM;
                }
                n++;
        }
        closedir(d);
        qsort(ret_paths, n, sizeof(char *), cmp_str);
        return (int) n;
}

/* [plugins] hosts=lazy: which data sources each plugin offers, asked of
 * them all at once; a plugin that answered is parked (the core told), one
 * that did not starts now, and its host says why it fails. */
static void park_all(struct plugins *ps) {
        const char *paths[MAX_PLUGINS];
        const struct plugins_declared *decls[MAX_PLUGINS];
        int r[MAX_PLUGINS];
        _cleanup_free_ char(*text)[1024] = calloc(MAX_PLUGINS, sizeof(*text));
        if (!text) {
                log_oom();
                return;
        }
        size_t n = 0, idx[MAX_PLUGINS];
        for (size_t i = 0; i < ps->n; i++) {
                /* One that did not answer its first probe, or is refused,
                 * is left to spawn(). */
                if (!ps->procs[i].decl.file[0] || ps->procs[i].decl.refused)
                        continue;
                idx[n] = i;
                paths[n] = ps->procs[i].path;
                decls[n] = &ps->procs[i].decl;
                n++;
        }
        if (plugins_probe_data_sources(paths, decls, n, ps->host_binary, &ps->id, text, r) < 0)
                return;
        for (size_t k = 0; k < n; k++) {
                struct plugin_proc *pp = &ps->procs[idx[k]];
                if (r[k] < 0)
                        continue;
                pp->parked = true;
                log_info("Plugin %s waits until a session needs it ([plugins] hosts=lazy).", pp->path);
                if (ps->parked)
                        ps->parked(pp->name, text[k], ps->userdata);
        }
}

int plugins_start(sd_event *event, const struct plugins_options *o, struct plugins **ret) {
        struct plugins *ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        ps->event = sd_event_ref(event);
        ps->host_binary = strdup(o->host_binary);
        ps->watchdog_usec = o->watchdog_usec;
        plugins_host_identity(o, &ps->id);
        ps->user_required = o->user_required;
        ps->handoff = o->handoff;
        ps->exited = o->exited;
        ps->parked = o->parked;
        ps->lazy = o->lazy;
        ps->idle_usec = o->idle_usec;
        ps->userdata = o->userdata;
        if (!ps->host_binary) {
                plugins_stop(ps);
                return -ENOMEM;
        }
        *ret = ps;

        char *paths[MAX_PLUGINS];
        int n = plugins_scan(o->dir, o->disabled, o->n_disabled, paths, MAX_PLUGINS);
        if (n < 0) {
                log_notice_errno(n, "No plugin directory %s: %m", o->dir);
                return 0;
        }
        if (!ps->id.switch_user && geteuid() != 0)
                log_notice("traced runs as uid %u, not root: its plugin hosts run as that user, each with what "
                           "traced holds of the capabilities its plugin declares.",
                           (unsigned) geteuid());
        else if (!ps->id.switch_user)
                log_notice("The plugin hosts' user is root: each runs as root, with only the capabilities its "
                           "plugin declares.");
        for (int i = 0; i < n; i++) {
                struct plugin_proc *pp = &ps->procs[ps->n++];
                *pp = (struct plugin_proc) {
                        .owner = ps,
                        .path = paths[i],
                        .backoff_usec = BACKOFF_FIRST_USEC,
                        .beat_fd = -EBADF,
                };
                const char *base = strrchr(paths[i], '/');
                base = base ? base + 1 : paths[i];
                snprintf(pp->name, sizeof(pp->name), "%.*s", (int) (strlen(base) - 3), base);
                /* What it declared when traced started (the supervisor
                 * holds no more than that since). */
                for (unsigned j = 0; j < o->n_declared; j++)
                        if (strcmp(o->declared[j].file, base) == 0)
                                pp->decl = o->declared[j];
        }
        if (ps->lazy)
                park_all(ps);
        for (size_t i = 0; i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                if (!pp->parked && spawn(pp) < 0)
                        (void) sd_event_add_time_relative(ps->event, &pp->restart, CLOCK_MONOTONIC,
                                                          pp->backoff_usec, 100000, on_restart, pp);
        }
        return 0;
}

int plugins_start_host(struct plugins *ps, const char *plugin) {
        if (!ps)
                return -ENOENT;
        for (size_t i = 0; i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                if (strcmp(pp->name, plugin) != 0)
                        continue;
                if (pp->refused)
                        return -EPERM;
                if (pp->parking) {
                        pp->start_again = true;
                        return 0;
                }
                if (pp->pid > 0 || pp->restart || ps->stopping)
                        return 0;
                log_info("Starting the plugin host for %s: a session needs it.", pp->path);
                int r = spawn(pp);
                if (r < 0)
                        (void) sd_event_add_time_relative(ps->event, &pp->restart, CLOCK_MONOTONIC,
                                                          pp->backoff_usec, 100000, on_restart, pp);
                return r;
        }
        return -ENOENT;
}

int plugins_stop_host(struct plugins *ps, const char *plugin, pid_t pid) {
        for (size_t i = 0; ps && ps->lazy && i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                if (strcmp(pp->name, plugin) != 0)
                        continue;
                if (pp->pid != pid || pid <= 0 || pp->parking || ps->stopping)
                        return -ESRCH;
                pp->parking = true;
                pp->start_again = false;
                (void) kill(pp->pid, SIGTERM);
                return 0;
        }
        return -ESRCH;
}

void plugins_set_watchdog(struct plugins *ps, uint64_t usec) {
        if (ps)
                ps->watchdog_usec = usec;
}

void plugins_stop_restarting(struct plugins *ps) {
        if (!ps)
                return;
        ps->stopping = true;
        for (size_t i = 0; i < ps->n; i++)
                ps->procs[i].restart = sd_event_source_disable_unref(ps->procs[i].restart);
}

void plugins_stop(struct plugins *ps) {
        if (!ps)
                return;
        ps->stopping = true;
        for (size_t i = 0; i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                pp->restart = sd_event_source_disable_unref(pp->restart);
                if (pp->pid > 0)
                        (void) kill(pp->pid, SIGTERM);
        }
        /* One deadline for all of them. */
        for (int k = 0; k < 200; k++) {
                bool left = false;
                for (size_t i = 0; i < ps->n; i++) {
                        struct plugin_proc *pp = &ps->procs[i];
                        if (pp->pid > 0 && waitpid(pp->pid, NULL, WNOHANG) == pp->pid)
                                pp->pid = 0;
                        left = left || pp->pid > 0;
                }
                if (!left)
                        break;
                usleep(10000);
        }
        for (size_t i = 0; i < ps->n; i++) {
                struct plugin_proc *pp = &ps->procs[i];
                if (pp->pid > 0) {
                        log_warning("Plugin host %d for %s did not stop; killing it.", (int) pp->pid, pp->path);
                        (void) kill(pp->pid, SIGKILL);
                        (void) waitpid(pp->pid, NULL, 0);
                }
                pp->child = sd_event_source_disable_unref(pp->child);
                stop_watching(pp);
                free(pp->path);
        }
        free(ps->host_binary);
        sd_event_unref(ps->event);
        free(ps);
}
