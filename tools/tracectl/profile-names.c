/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The names a profile shows: its distinct frames (interned by name,
 * module and ring), the processes and threads of the trace's process
 * tree, a guess for processes it does not name, and node labels. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "profile-internal.h"
#include "summary.h"

static uint64_t sym_key(const char *name, const char *module, bool kernel, uint32_t map, uint64_t rel_pc,
                        uint64_t salt) {
        uint64_t h = fnv1a64(name, strlen(name));
        if (module)
                h ^= fnv1a64(module, strlen(module)) * 31;
        if (map != UINT32_MAX)
                h ^= (rel_pc * 0xff51afd7ed558ccdULL) ^ ((uint64_t) map << 40);
        return h + kernel + salt * 0x9e3779b97f4a7c15ULL;
}

static bool streq_null(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void sym_free(struct profile_sym *s) {
        free(s->name);
        free(s->module);
        free(s->path);
        free(s->build_id);
}

static uint32_t intern_sym(struct profile *p, const char *name, const char *module, bool kernel, bool symbolized,
                           const char *path, const char *build_id, uint32_t map, uint64_t rel_pc) {
        uint64_t salt = 0;
        for (;; salt++) {
                uint64_t i;
                if (!hashmap_get(&p->sym_index, sym_key(name, module, kernel, map, rel_pc, salt), &i))
                        break;
                const struct profile_sym *s = &p->syms[i];
                if (strcmp(s->name, name) == 0 && streq_null(s->module, module) && s->kernel == kernel &&
                    s->map == map && s->rel_pc == rel_pc)
                        return (uint32_t) i;
        }
        if (GREEDY_REALLOC_MIN(p->syms, p->cap_syms, p->n_syms + 1, 256) < 0)
                return UINT32_MAX;
        struct profile_sym s = {
                .name = strdup(name),
                .module = module ? strdup(module) : NULL,
                .path = path ? strdup(path) : NULL,
                .build_id = build_id ? strdup(build_id) : NULL,
                .kernel = kernel,
                .symbolized = symbolized,
                .map = map,
                .rel_pc = rel_pc,
        };
        uint32_t id = (uint32_t) p->n_syms;
        if (!s.name || (module && !s.module) || (path && !s.path) || (build_id && !s.build_id) ||
            hashmap_put(&p->sym_index, sym_key(name, module, kernel, map, rel_pc, salt), id) < 0) {
                sym_free(&s);
                return UINT32_MAX;
        }
        p->syms[p->n_syms++] = s;
        return id;
}

uint32_t profile_intern_name(struct profile *p, const char *name, const char *module, bool kernel, bool symbolized,
                             const char *path, const char *build_id) {
        return intern_sym(p, name, module, kernel, symbolized, path, build_id, UINT32_MAX, 0);
}

static const char *basename_of(const char *path) {
        const char *s = strrchr(path, '/');
        return s && s[1] ? s + 1 : path;
}

uint32_t profile_intern_frame(struct profile *p, const char *name, uint32_t map, uint64_t rel_pc, bool kernel,
                              bool symbolized) {
        const struct profile_map *m = map != UINT32_MAX ? &p->maps[map] : NULL;
        const char *path = m && m->path && m->path[0] ? m->path : NULL;
        bool by_address = p->filter.addresses && m;
        return intern_sym(p, name, path ? basename_of(path) : NULL, kernel, symbolized, path, m ? m->build_id : NULL,
                          by_address ? map : UINT32_MAX, by_address ? rel_pc : 0);
}

static uint64_t map_key(const struct profile_map *m, uint64_t salt) {
        uint64_t h = m->path ? fnv1a64(m->path, strlen(m->path)) : 0;
        if (m->build_id)
                h ^= fnv1a64(m->build_id, strlen(m->build_id)) * 31;
        h = fnv1a64_step(h, m->start);
        h = fnv1a64_step(h, m->end);
        h = fnv1a64_step(h, m->exact_offset);
        return h + salt * 0x9e3779b97f4a7c15ULL;
}

uint32_t profile_intern_map(struct profile *p, const struct profile_map *m) {
        uint64_t salt = 0;
        for (;; salt++) {
                uint64_t i;
                if (!hashmap_get(&p->map_index, map_key(m, salt), &i))
                        break;
                const struct profile_map *o = &p->maps[i];
                if (streq_null(o->path, m->path) && streq_null(o->build_id, m->build_id) && o->start == m->start &&
                    o->end == m->end && o->exact_offset == m->exact_offset && o->load_bias == m->load_bias &&
                    o->kernel == m->kernel)
                        return (uint32_t) i;
        }
        if (GREEDY_REALLOC_MIN(p->maps, p->cap_maps, p->n_maps + 1, 64) < 0)
                return UINT32_MAX;
        struct profile_map c = *m;
        c.path = m->path ? strdup(m->path) : NULL;
        c.build_id = m->build_id ? strdup(m->build_id) : NULL;
        if ((m->path && !c.path) || (m->build_id && !c.build_id) ||
            hashmap_put(&p->map_index, map_key(m, salt), p->n_maps) < 0) {
                free(c.path);
                free(c.build_id);
                return UINT32_MAX;
        }
        p->maps[p->n_maps] = c;
        return (uint32_t) p->n_maps++;
}

static struct profile_task *task_get(struct profile *p, bool process, int32_t id, bool create) {
        uint64_t key = ((uint64_t) process << 32) | (uint32_t) id;
        uint64_t i;
        if (hashmap_get(&p->task_index, key, &i))
                return &p->tasks[i];
        if (!create)
                return NULL;
        if (GREEDY_REALLOC_MIN(p->tasks, p->cap_tasks, p->n_tasks + 1, 64) < 0)
                return NULL;
        if (hashmap_put(&p->task_index, key, p->n_tasks) < 0)
                return NULL;
        struct profile_task *t = &p->tasks[p->n_tasks++];
        *t = (struct profile_task) { .id = id };
        return t;
}

static const char *task_name(const struct profile_task *t) {
        if (!t)
                return NULL;
        return t->sampled ? name_history_at(&t->names, t->last_sample_ts) : name_history_last(&t->names);
}

static void task_mark_sampled(struct profile_task *t, bool have_ts, uint64_t ts) {
        if (t && have_ts && (!t->sampled || ts > t->last_sample_ts)) {
                t->last_sample_ts = ts;
                t->sampled = true;
        }
}

/* One task at a time: task_get() may move p->tasks, so a pointer from one
 * call does not outlive the next. */
void profile_task_sampled(struct profile *p, int32_t pid, int32_t tid, bool have_ts, uint64_t ts, bool cut) {
        struct profile_task *t = task_get(p, true, pid, true);
        if (t) {
                t->stacks++;
                t->stacks_cut += cut;
        }
        task_mark_sampled(t, have_ts, ts);
        task_mark_sampled(task_get(p, false, tid, true), have_ts, ts);
}

const char *profile_process_name(const struct profile *p, int32_t pid) {
        const struct profile_task *t = task_get((struct profile *) p, true, pid, false);
        const char *n = task_name(t);
        if (n)
                return n;
        if ((n = task_name(task_get((struct profile *) p, false, pid, false))))
                return n;
        if (t && t->guess)
                return t->guess;
        return pid == 0 ? "[idle]" : "[unknown]";
}

void profile_process_stacks(const struct profile *p, int32_t pid, uint64_t *ret_stacks, uint64_t *ret_cut) {
        const struct profile_task *t = task_get((struct profile *) p, true, pid, false);
        *ret_stacks = t ? t->stacks : 0;
        *ret_cut = t ? t->stacks_cut : 0;
}

const char *profile_thread_name(const struct profile *p, int32_t tid) {
        const struct profile_task *t = task_get((struct profile *) p, false, tid, false);
        const char *n = task_name(t);
        if (n)
                return n;
        t = task_get((struct profile *) p, true, tid, false);
        if ((n = task_name(t)))
                return n;
        if (t && t->guess)
                return t->guess;
        return tid == 0 ? "[idle]" : "[unknown]";
}

const char *profile_node_label(const struct profile *p, const struct profile_node *n, char *buf, size_t size) {
        const char *s;
        switch (n->kind) {
        case NODE_ROOT:
                s = "all";
                break;
        case NODE_PROCESS:
                s = profile_process_name(p, (int32_t) n->value);
                break;
        case NODE_THREAD:
                s = profile_thread_name(p, (int32_t) n->value);
                break;
        default:
                s = n->value < p->n_syms ? p->syms[n->value].name : "[unknown]";
        }
        size_t i = 0;
        for (; s[i] && i + 1 < size; i++)
                buf[i] = s[i] == ';' ? ':' : (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
        buf[i] = 0;
        return buf;
}

void profile_process_tree(struct profile *p, uint64_t ts, const uint8_t *d, size_t n) {
        size_t pos = 0;
        struct pbr_field f, g;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.wire_type != 2 || (f.number != 1 && f.number != 2))
                        continue;
                int32_t id = -1, tgid = -1, ppid = -1;
                bool is_comm = false;
                const uint8_t *name = NULL;
                size_t name_len = 0;
                size_t q = 0;
                while (pbr_next(f.data, f.len, &q, &g) > 0) {
                        if (g.number == 1 && g.wire_type == 0)
                                id = (int32_t) g.varint;
                        else if (f.number == 2 && g.number == 3 && g.wire_type == 0)
                                tgid = (int32_t) g.varint;
                        else if (f.number == 1 && g.number == 2 && g.wire_type == 0)
                                ppid = (int32_t) g.varint;
                        else if (f.number == 1 && (g.number == 8 || g.number == 9) && g.wire_type == 0)
                                is_comm |= g.varint != 0; /* is_kthread, cmdline_is_comm */
                        else if (g.wire_type == 2 && ((f.number == 2 && g.number == 2) || (f.number == 1 && g.number == 3))) {
                                if (f.number == 1 && name)
                                        continue; /* argv[0] only */
                                name = g.data;
                                name_len = g.len;
                        }
                }
                if (id < 0)
                        continue;
                struct profile_task *t = task_get(p, f.number == 1, id, true);
                if (!t)
                        continue;
                if (tgid >= 0)
                        t->tgid = tgid;
                if (name && name_len) {
                        char raw[256], shown[256];
                        snprintf(raw, sizeof(raw), "%.*s", (int) name_len, (const char *) name);
                        if (f.number == 1)
                                summary_cmdline_name(raw, is_comm, ppid, shown, sizeof(shown));
                        else
                                snprintf(shown, sizeof(shown), "%s", raw);
                        (void) name_history_add(&t->names, ts, shown);
                }
        }
}

/* Names a process that has none from the executable in its stack (the
 * outermost one). A library says nothing of the process (a stack cut
 * short ends in libc.so.6 in any program): then its pid. */
int profile_guess_name(struct profile *p, int32_t pid, const uint32_t *syms, size_t nf) {
        struct profile_task *proc = task_get(p, true, pid, true);
        if (!proc)
                return -ENOMEM;
        if (proc->names.n || proc->guess)
                return 0;
        const char *exe = NULL;
        for (size_t i = 0; i < nf && !exe; i++) {
                const struct profile_sym *sy = &p->syms[syms[i]];
                if (!sy->kernel && sy->module && sy->module[0] != '[' && !strstr(sy->module, ".so"))
                        exe = sy->module;
        }
        char buf[32];
        if (!exe && pid > 0) {
                snprintf(buf, sizeof(buf), "[pid %d]", (int) pid);
                exe = buf;
        }
        if (exe) {
                proc->guess = strdup(exe);
                if (!proc->guess)
                        return -ENOMEM;
        }
        return 0;
}

void profile_names_done(struct profile *p) {
        for (size_t i = 0; i < p->n_syms; i++)
                sym_free(&p->syms[i]);
        free(p->syms);
        hashmap_clear(&p->sym_index);
        for (size_t i = 0; i < p->n_maps; i++) {
                free(p->maps[i].path);
                free(p->maps[i].build_id);
        }
        free(p->maps);
        hashmap_clear(&p->map_index);
        for (size_t i = 0; i < p->n_tasks; i++) {
                name_history_done(&p->tasks[i].names);
                free(p->tasks[i].guess);
        }
        free(p->tasks);
        hashmap_clear(&p->task_index);
}
