/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What each plugin declares, and whether the plugin hosts' user can run
 * its host (plugins.h, supervisor/host-probe.h). */

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/capability.h"
#include "basic/macro.h"
#include "log/log.h"
#include "supervisor/plugins.h"

void plugins_host_identity(const struct plugins_options *o, struct host_identity *ret) {
        *ret = (struct host_identity) { .switch_user = o->switch_user, .uid = o->host_uid, .gid = o->host_gid };
        struct passwd pw, *found = NULL;
        char buf[1024];
        if (getpwuid_r(o->host_uid, &pw, buf, sizeof(buf), &found) == 0 && found)
                snprintf(ret->name, sizeof(ret->name), "%s", found->pw_name);
        else
                snprintf(ret->name, sizeof(ret->name), "%u", (unsigned) o->host_uid);
}

/* One plugin's questions to the host, asked of all plugins at once (each
 * host loads its plugin to answer: the start waits for the slowest, not
 * for the sum). */
struct job {
        const char *path;
        bool ask; /* in the current round */
        struct host_probe probe;
        int r;
        uint64_t caps; /* what it declares; given to a --check */
        char why[256]; /* the probe's last line of error output */
        char *output;  /* all of it */
};

static void run_round(struct job *jobs, size_t n, const char *host_binary, const struct host_identity *id,
                      enum host_probe_mode mode) {
        for (size_t i = 0; i < n; i++)
                if (jobs[i].ask)
                        jobs[i].r = host_probe_start(&jobs[i].probe, host_binary, id, jobs[i].path, mode,
                                                     mode == HOST_PROBE_CHECK ? jobs[i].caps : 0);
        for (size_t i = 0; i < n; i++) {
                struct job *j = &jobs[i];
                if (!j->ask)
                        continue;
                free(j->output);
                j->output = NULL;
                j->why[0] = '\0';
                if (j->r < 0) {
                        snprintf(j->why, sizeof(j->why), "it could not be started: %s", strerror(-j->r));
                        continue;
                }
                j->r = host_probe_finish(&j->probe, mode == HOST_PROBE_CAPABILITIES ? &j->caps : NULL, j->why,
                                         sizeof(j->why), &j->output);
                if (j->r < 0 && !j->why[0])
                        snprintf(j->why, sizeof(j->why), "it failed (%s)", strerror(-j->r));
        }
}

/* What a probe said, into traced's log as it was said. */
static void pass_on(struct job *j) {
        if (!j->output)
                return;
        size_t len = strlen(j->output);
        ssize_t k = write(STDERR_FILENO, j->output, len);
        (void) k;
        free(j->output);
        j->output = NULL;
}

static void note_reachable(struct plugins_declared *d) {
        d->as_root = false;
        d->refused = false;
        d->reason[0] = '\0';
}

/* The hosts' user (id) cannot run d's plugin (at path): why says what
 * failed. One message, with the way out. */
static void note_unreachable(struct plugins_declared *d, const char *path, const struct host_identity *id,
                             bool user_required, const char *why) {
        char names[512];
        if (user_required) {
                d->refused = true;
                snprintf(d->reason, sizeof(d->reason),
                         "plugin_user_required=yes, and the plugin hosts' user %s cannot run it: %s", id->name, why);
                log_error("Refusing plugin %s: the plugin hosts' user %s (uid %u) cannot run its host: %s. Install "
                          "traced, or build it in a directory the %s user can search, or set "
                          "plugin_user_required=no in traced.conf to run such a host as root.",
                          path, id->name, (unsigned) id->uid, why, id->name);
                return;
        }
        d->as_root = true;
        d->refused = false;
        d->reason[0] = '\0';
        log_warning("Plugin %s: its host runs as root, holding only the capabilities it declares (%s), not as the "
                    "plugin hosts' user %s (uid %u), "
                    "who cannot run it: %s. Install traced, or build it in a directory the %s user can search, or "
                    "set plugin_user=root in traced.conf to silence this.",
                    path, capability_mask_names(d->caps, names, sizeof(names)), id->name, (unsigned) id->uid, why,
                    id->name);
}

static void stamp(struct plugins_declared *d, const char *path, const char *host_binary) {
        host_probe_stamp(path, &d->plugin_stamp);
        host_probe_stamp(host_binary, &d->host_stamp);
}

int plugins_declared_capabilities(struct plugins_options *o, uint64_t *ret) {
        char *paths[PLUGINS_MAX];
        struct job jobs[PLUGINS_MAX] = {};
        struct host_identity user, root = { .switch_user = false };
        uint64_t all = 0;
        int n = plugins_scan(o->dir, o->disabled, o->n_disabled, paths, PLUGINS_MAX);
        if (n < 0)
                return n;
        plugins_host_identity(o, &user);
        o->n_declared = 0;
        for (int i = 0; i < n; i++)
                jobs[i] = (struct job) { .path = paths[i], .ask = true };

        /* What each declares, asked as the hosts' user holding nothing. */
        run_round(jobs, (size_t) n, o->host_binary, &user, HOST_PROBE_CAPABILITIES);
        /* Those that failed as that user are asked as root: a plugin that
         * answers there is one the user cannot reach... */
        bool again = false;
        for (int i = 0; i < n; i++) {
                jobs[i].ask = jobs[i].r < 0 && user.switch_user;
                again = again || jobs[i].ask;
                if (!jobs[i].ask)
                        pass_on(&jobs[i]);
        }
        char why_user[PLUGINS_MAX][256];
        bool unreachable[PLUGINS_MAX] = {};
        if (again) {
                for (int i = 0; i < n; i++)
                        if (jobs[i].ask) {
                                memcpy(why_user[i], jobs[i].why, sizeof(why_user[i]));
                                free(jobs[i].output);
                                jobs[i].output = NULL;
                        }
                run_round(jobs, (size_t) n, o->host_binary, &root, HOST_PROBE_CAPABILITIES);
                /* ...holding nothing: one that declares capabilities may
                 * reach it with them (CAP_DAC_OVERRIDE), as its host
                 * would hold them. */
                bool check = false;
                for (int i = 0; i < n; i++) {
                        if (!jobs[i].ask)
                                continue;
                        pass_on(&jobs[i]);
                        if (jobs[i].r < 0)
                                jobs[i].ask = false;
                        else {
                                jobs[i].caps = capability_for_kernel(jobs[i].caps);
                                unreachable[i] = jobs[i].caps == 0;
                                jobs[i].ask = !unreachable[i];
                                check = check || jobs[i].ask;
                        }
                }
                uint64_t declared[PLUGINS_MAX];
                for (int i = 0; i < n; i++)
                        declared[i] = jobs[i].caps;
                if (check)
                        run_round(jobs, (size_t) n, o->host_binary, &user, HOST_PROBE_CHECK);
                for (int i = 0; i < n; i++) {
                        if (!jobs[i].ask)
                                continue;
                        if (jobs[i].r < 0) {
                                unreachable[i] = true;
                                memcpy(why_user[i], jobs[i].why, sizeof(why_user[i]));
                                free(jobs[i].output);
                                jobs[i].output = NULL;
                        } else
                                pass_on(&jobs[i]);
                        jobs[i].r = 0;
                        jobs[i].caps = declared[i];
                }
        }

        for (int i = 0; i < n; i++) {
                struct job *j = &jobs[i];
                int r = j->r;
                if (r == -EPERM)
                        log_warning("Plugin %s was refused by the plugin host (its message above says why); it "
                                    "will not run.", paths[i]);
                else if (r < 0)
                        log_warning("Plugin %s could not be asked for its capabilities: %s.", paths[i], j->why);
                else {
                        uint64_t caps = capability_for_kernel(j->caps);
                        all |= caps;
                        struct plugins_declared *d = &o->declared[o->n_declared++];
                        *d = (struct plugins_declared) { .caps = caps };
                        const char *base = strrchr(paths[i], '/');
                        snprintf(d->file, sizeof(d->file), "%s", base ? base + 1 : paths[i]);
                        stamp(d, paths[i], o->host_binary);
                        if (unreachable[i])
                                note_unreachable(d, paths[i], &user, o->user_required,
                                                 why_user[i][0] ? why_user[i] : "its probe failed");
                }
                free(j->output);
                free(paths[i]);
        }
        *ret = all;
        return 0;
}

void plugins_declared_recheck(struct plugins_declared *d, const char *path, const char *host_binary,
                              const struct host_identity *id, bool user_required) {
        struct plugins_declared now = *d;
        /* A plugin that did not answer at the start is left to its host,
         * which says why it fails. */
        if (!id->switch_user || !d->file[0])
                return;
        stamp(&now, path, host_binary);
        if (host_probe_stamp_equal(&now.plugin_stamp, &d->plugin_stamp) &&
            host_probe_stamp_equal(&now.host_stamp, &d->host_stamp))
                return;
        d->plugin_stamp = now.plugin_stamp;
        d->host_stamp = now.host_stamp;
        struct job j = { .path = path, .ask = true, .caps = d->caps };
        run_round(&j, 1, host_binary, id, HOST_PROBE_CHECK);
        bool was_root = d->as_root, was_refused = d->refused;
        if (j.r == 0) {
                pass_on(&j);
                note_reachable(d);
                if (was_root || was_refused)
                        log_notice("Plugin %s changed: the plugin hosts' user %s can run it now.", path, id->name);
                free(j.output);
                return;
        }
        /* Not as that user: as root? (Else the plugin or the host is
         * broken for all, and its host says why.) */
        char why[256];
        memcpy(why, j.why, sizeof(why));
        const struct host_identity root = { .switch_user = false };
        run_round(&j, 1, host_binary, &root, HOST_PROBE_CAPABILITIES);
        if (j.r < 0)
                note_reachable(d);
        else
                note_unreachable(d, path, id, user_required, why[0] ? why : "its probe failed");
        free(j.output);
}

int plugins_probe_data_sources(const char *const *paths, const struct plugins_declared *const *decls, size_t n,
                               const char *host_binary, const struct host_identity *id, char (*ret_text)[1024],
                               int *ret_r) {
        struct host_probe probes[PLUGINS_MAX];
        if (n > PLUGINS_MAX)
                return -E2BIG;
        /* All at once, each as its host would run (its user, what it
         * declares): the start waits for the slowest. */
        for (size_t i = 0; i < n; i++) {
                struct host_identity as = *id;
                if (decls[i]->as_root)
                        as.switch_user = false;
                ret_r[i] = decls[i]->refused ? -EPERM
                                             : host_probe_start(&probes[i], host_binary, &as, paths[i],
                                                                HOST_PROBE_DATA_SOURCES, decls[i]->caps);
        }
        for (size_t i = 0; i < n; i++) {
                if (ret_r[i] < 0)
                        continue;
                char why[256] = "";
                _cleanup_free_ char *output = NULL;
                ret_r[i] = host_probe_finish_text(&probes[i], ret_text[i], sizeof(ret_text[i]), why, sizeof(why),
                                                  &output);
                if (ret_r[i] < 0)
                        log_warning("Plugin %s could not be asked for its data sources (%s): its host starts now, "
                                    "not when a session needs it.",
                                    paths[i], why[0] ? why : strerror(-ret_r[i]));
                else if (!ret_text[i][0]) {
                        log_notice("Plugin %s offers no data source here: its host is not started.", paths[i]);
                        ret_r[i] = 0;
                }
        }
        return 0;
}
