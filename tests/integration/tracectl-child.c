/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "test-consumer.h"
#include "tracectl-child.h"

extern char **environ;

void tracectl_child_spawn(struct tracectl_child *c, const char *dir, const char *socket, const char *const *args,
                          unsigned flags) {
        char *argv[48];
        size_t n = 0;
        argv[n++] = (char *) TRACECTL_BINARY;
        argv[n++] = (char *) "--socket";
        argv[n++] = (char *) socket;
        for (size_t i = 0; args[i] && n < ELEMENTSOF(argv) - 1; i++)
                argv[n++] = (char *) args[i];
        argv[n] = NULL;
        /* Each its own files: two may run at once. */
        static unsigned n_spawned;
        snprintf(c->out, sizeof(c->out), "%s/tracectl-child-%u.stdout", dir, n_spawned);
        snprintf(c->err_path, sizeof(c->err_path), "%s/tracectl-child-%u.stderr", dir, n_spawned++);
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, c->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawnattr_init(&attr);
        /* Ignored dispositions are inherited through exec: set them in
         * this process around the spawn. */
        struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_term;
        if (flags & TRACECTL_CHILD_SIGNALS_IGNORED) {
                sigaction(SIGINT, &ign, &old_int);
                sigaction(SIGTERM, &ign, &old_term);
        }
        int r = posix_spawn(&c->pid, TRACECTL_BINARY, &fa, &attr, argv, environ);
        if (flags & TRACECTL_CHILD_SIGNALS_IGNORED) {
                sigaction(SIGINT, &old_int, NULL);
                sigaction(SIGTERM, &old_term, NULL);
        }
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(r, 0, "cannot run %s: %s", TRACECTL_BINARY, strerror(r));
}

int tracectl_child_wait(struct tracectl_child *c, sd_event *event, unsigned timeout_ms) {
        for (unsigned waited = 0; waited < timeout_ms; waited += 20) {
                int st;
                if (waitpid(c->pid, &st, WNOHANG) == c->pid)
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                spin_ms(event, 20);
        }
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        return -ETIMEDOUT;
}

bool tracectl_child_wait_stderr(struct tracectl_child *c, sd_event *event, const char *text, unsigned timeout_ms) {
        for (unsigned waited = 0; waited < timeout_ms; waited += 20) {
                char *se = test_slurp(c->err_path, NULL);
                bool found = se && strstr(se, text);
                free(se);
                if (found)
                        return true;
                siginfo_t si = {};
                if (waitid(P_PID, (id_t) c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == c->pid)
                        return false; /* it exited (left to tracectl_child_wait to reap) */
                spin_ms(event, 20);
        }
        return false;
}

char *test_slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                n += fread(buf + n, 1, cap - n, f);
                if (n < cap)
                        break;
                char *b = realloc(buf, 2 * cap + 1);
                if (!b) {
                        free(buf);
                        buf = NULL;
                        break;
                }
                buf = b;
                cap *= 2;
        }
        fclose(f);
        if (!buf)
                return NULL;
        buf[n] = '\0';
        if (ret_len)
                *ret_len = n;
        return buf;
}

bool tracectl_check_json(sd_event *event, const char *dir, const char *socket, const char *args, const char *check) {
        return tracectl_check_json_status(event, dir, socket, args, 0, check);
}

bool tracectl_check_json_status(sd_event *event, const char *dir, const char *socket, const char *args, int status,
                                const char *check) {
        char path[512], *cmd = NULL;
        snprintf(path, sizeof(path), "%s/check.py", dir);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fprintf(f, "import json, sys\nd = json.load(sys.stdin)\n%s\n", check);
        fclose(f);
        cr_assert_gt(asprintf(&cmd, "%s --socket %s %s | python3 %s; s=(\"${PIPESTATUS[@]}\"); "
                                    "[ \"${s[0]}\" = %d ] && [ \"${s[1]}\" = 0 ]",
                              TRACECTL_BINARY, socket, args, path, status),
                     0);
        char *argv[] = { (char *) "bash", (char *) "-c", cmd, NULL };
        pid_t pid;
        cr_assert_eq(posix_spawnp(&pid, "bash", NULL, NULL, argv, environ), 0);
        int st;
        /* The loop serves the session while tracectl asks. */
        while (waitpid(pid, &st, WNOHANG) != pid)
                spin_ms(event, 20);
        free(cmd);
        (void) unlink(path);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
