/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The profile as pprof's profile.proto: one Sample per distinct stack of
 * a thread (the leaves of the call trees, so memory follows the distinct
 * stacks, never the samples), its locations leaf first, labelled with the
 * process and thread (ids and the names report shows); one Location per
 * address, with the lines and inlined frames the binary's DWARF has
 * (debuginfo.c); Mappings as the trace recorded them, build IDs kept, so
 * that an address no one could name can be symbolized later by pprof or
 * a backend. Sample types: on-CPU samples and their CPU time, off-CPU
 * samples and their blocked time, as the trace has them. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/hashmap.h"
#include "debuginfo.h"
#include "pprof-fields.h"
#include "pprof-writer.h"
#include "profile.h"

enum { COL_SAMPLES, COL_CPU, COL_OFF_SAMPLES, COL_OFF_TIME, _COL_MAX };

struct function_key {
        int64_t name, system_name, file;
};

struct pprof_build {
        struct pprof_writer *w;
        struct profile *p;
        int col[_COL_MAX]; /* index in the sample's values, -1: absent */
        unsigned n_cols;
        uint8_t *sym_used; /* per sym: a sample refers to it */
        uint8_t *map_used; /* per map: a location is on it */
        struct map_debug {
                bool functions, filenames, lines, inlines;
                uint64_t lo, hi; /* addresses of its locations */
                uint64_t locations;
        } * map_debug;
        struct function_key *functions;
        size_t n_functions, cap_functions;
        struct hashmap function_index;
        uint64_t *stack;
        size_t cap_stack;
        struct pbw msg, sub;
        struct pprof_stats stats;
};

/* The names a frame's function goes by: as shown, and as the binary has
 * it (mangled). One place to put a demangler in. */
static void function_names(const char *raw, const char **ret_name, const char **ret_system_name) {
        *ret_name = raw;
        *ret_system_name = raw;
}

static void value_type(struct pprof_build *b, uint32_t field, const char *type, const char *unit) {
        pbw_reset(&b->sub);
        pbw_varint(&b->sub, PPROF_VALUE_TYPE_TYPE, (uint64_t) pprof_string(b->w, type));
        pbw_varint(&b->sub, PPROF_VALUE_TYPE_UNIT, (uint64_t) pprof_string(b->w, unit));
        pprof_write_message(b->w, field, &b->sub);
}

static void add_column(struct pprof_build *b, int col, const char *type, const char *unit) {
        b->col[col] = (int) b->n_cols++;
        value_type(b, PPROF_PROFILE_SAMPLE_TYPE, type, unit);
}

static void label(struct pprof_build *b, const char *key, const char *str, int64_t num, const char *unit) {
        pbw_reset(&b->sub);
        pbw_varint(&b->sub, PPROF_LABEL_KEY, (uint64_t) pprof_string(b->w, key));
        if (str)
                pbw_varint(&b->sub, PPROF_LABEL_STR, (uint64_t) pprof_string(b->w, str));
        else {
                pbw_varint(&b->sub, PPROF_LABEL_NUM, (uint64_t) num);
                if (unit)
                        pbw_varint(&b->sub, PPROF_LABEL_NUM_UNIT, (uint64_t) pprof_string(b->w, unit));
        }
        pbw_message(&b->msg, PPROF_SAMPLE_LABEL, &b->sub);
}

/* One Sample for the leaf node n of tree t (of kind k). */
static int sample(struct pprof_build *b, const struct profile_tree *t, enum profile_kind k, uint32_t n) {
        const struct profile_node *node = &t->nodes[n];
        size_t depth = 0;
        uint32_t i = n;
        for (; t->nodes[i].kind == NODE_FRAME; i = t->nodes[i].parent) {
                if (GREEDY_REALLOC_MIN(b->stack, b->cap_stack, depth + 1, 64) < 0)
                        return -ENOMEM;
                uint32_t sym = t->nodes[i].value;
                b->sym_used[sym] = 1;
                b->stack[depth++] = (uint64_t) sym + 1; /* location ids: sym + 1 */
        }
        if (t->nodes[i].kind != NODE_THREAD)
                return 0;
        int32_t tid = (int32_t) t->nodes[i].value, pid = (int32_t) t->nodes[t->nodes[i].parent].value;

        pbw_reset(&b->msg);
        pbw_tag(&b->msg, PPROF_SAMPLE_LOCATION_ID, 2);
        size_t len = 0;
        for (size_t d = 0; d < depth; d++)
                len += pbw_varint_size(b->stack[d]);
        pbw_raw_varint(&b->msg, len);
        for (size_t d = 0; d < depth; d++)
                pbw_raw_varint(&b->msg, b->stack[d]);
        uint64_t v[_COL_MAX] = {};
        if (k == PROFILE_ON_CPU) {
                v[COL_SAMPLES] = node->self[0];
                v[COL_CPU] = b->p->sample_ns ? node->self[1] : node->self[0] * b->p->sample_period;
        } else {
                v[COL_OFF_SAMPLES] = node->self[0];
                v[COL_OFF_TIME] = node->self[1];
        }
        uint64_t vals[_COL_MAX];
        for (int c = 0; c < _COL_MAX; c++)
                if (b->col[c] >= 0)
                        vals[b->col[c]] = v[c];
        len = 0;
        for (unsigned c = 0; c < b->n_cols; c++)
                len += pbw_varint_size(vals[c]);
        pbw_tag(&b->msg, PPROF_SAMPLE_VALUE, 2);
        pbw_raw_varint(&b->msg, len);
        for (unsigned c = 0; c < b->n_cols; c++)
                pbw_raw_varint(&b->msg, vals[c]);
        label(b, "pid", NULL, pid, NULL);
        label(b, "tid", NULL, tid, NULL);
        label(b, "process", profile_process_name(b->p, pid), 0, NULL);
        label(b, "thread", profile_thread_name(b->p, tid), 0, NULL);
        pprof_write_message(b->w, PPROF_PROFILE_SAMPLE, &b->msg);
        b->stats.samples++;
        return 0;
}

static uint64_t function_hash(const struct function_key *f, uint64_t salt) {
        return fnv1a64(f, sizeof(*f)) + salt * 0x9e3779b97f4a7c15ULL;
}

/* The Function's id (written on first use); 0 on ENOMEM. */
static uint64_t function_id(struct pprof_build *b, const char *name, const char *system_name, const char *file) {
        struct function_key f = {
                .name = pprof_string(b->w, name),
                .system_name = pprof_string(b->w, system_name),
                .file = pprof_string(b->w, file),
        };
        uint64_t salt = 0, i;
        for (;; salt++) {
                if (!hashmap_get(&b->function_index, function_hash(&f, salt), &i))
                        break;
                if (memcmp(&b->functions[i], &f, sizeof(f)) == 0)
                        return i + 1;
        }
        if (GREEDY_REALLOC_MIN(b->functions, b->cap_functions, b->n_functions + 1, 256) < 0 ||
            hashmap_put(&b->function_index, function_hash(&f, salt), b->n_functions) < 0)
                return 0;
        b->functions[b->n_functions++] = f;
        uint64_t id = b->n_functions;
        pbw_reset(&b->sub);
        pbw_varint(&b->sub, PPROF_FUNCTION_ID, id);
        pbw_varint(&b->sub, PPROF_FUNCTION_NAME, (uint64_t) f.name);
        pbw_varint(&b->sub, PPROF_FUNCTION_SYSTEM_NAME, (uint64_t) f.system_name);
        if (f.file)
                pbw_varint(&b->sub, PPROF_FUNCTION_FILENAME, (uint64_t) f.file);
        pprof_write_message(b->w, PPROF_PROFILE_FUNCTION, &b->sub);
        b->stats.functions++;
        return id;
}

static int line(struct pprof_build *b, const char *name, const char *system_name, const char *file, uint32_t lineno) {
        uint64_t f = function_id(b, name, system_name, file);
        if (!f)
                return -ENOMEM;
        struct pbw *l = &b->sub;
        pbw_reset(l);
        pbw_varint(l, PPROF_LINE_FUNCTION_ID, f);
        if (lineno)
                pbw_varint(l, PPROF_LINE_LINE, lineno);
        pbw_message(&b->msg, PPROF_LOCATION_LINE, l);
        return 0;
}

/* The address of a frame in its process: rel_pc is a virtual address of
 * the file; the mapping maps file offset exact_offset at start, and
 * load_bias is p_vaddr - p_offset of the executable segment. Kernel
 * frames carry the address itself. */
static uint64_t frame_address(const struct profile_map *m, uint64_t rel_pc) {
        if (m->kernel || (m->start == 0 && m->end == 0))
                return rel_pc;
        uint64_t a = m->start + rel_pc - m->load_bias - m->exact_offset;
        return a >= m->start && a < m->end ? a : m->start + rel_pc;
}

static int location(struct pprof_build *b, uint32_t sym_index) {
        const struct profile_sym *s = &b->p->syms[sym_index];
        const struct profile_map *m = s->map != UINT32_MAX ? &b->p->maps[s->map] : NULL;
        struct map_debug *md = m ? &b->map_debug[s->map] : NULL;
        pbw_reset(&b->msg);
        pbw_varint(&b->msg, PPROF_LOCATION_ID, (uint64_t) sym_index + 1);
        if (m) {
                uint64_t a = frame_address(m, s->rel_pc);
                pbw_varint(&b->msg, PPROF_LOCATION_MAPPING_ID, (uint64_t) s->map + 1);
                pbw_varint(&b->msg, PPROF_LOCATION_ADDRESS, a);
                b->map_used[s->map] = 1;
                if (md->locations++ == 0 || a < md->lo)
                        md->lo = a;
                if (a >= md->hi)
                        md->hi = a + 1;
        }
        const struct debuginfo_line *dl = NULL;
        size_t n = 0;
        if (m && !s->kernel && b->p->debuginfo)
                n = debuginfo_lines(b->p->debuginfo, m->path, m->build_id, s->rel_pc, &dl);
        const char *name, *system_name;
        int r = 0;
        bool with_line = false;
        for (size_t i = 0; i < n && r >= 0; i++) {
                /* The outermost function is the symbol the trace (or the
                 * file's symbol table) named: the one report shows. */
                bool outer = i + 1 == n;
                if (outer && s->symbolized)
                        function_names(s->name, &name, &system_name);
                else {
                        name = dl[i].function ? dl[i].function : dl[i].linkage_name;
                        system_name = dl[i].linkage_name ? dl[i].linkage_name : name;
                        if (!name)
                                name = system_name = s->symbolized ? s->name : "??";
                }
                r = line(b, name, system_name, dl[i].file, dl[i].line);
                with_line |= dl[i].line != 0;
                if (md) {
                        md->filenames |= dl[i].file != NULL;
                        md->lines |= dl[i].line != 0;
                        md->functions = true;
                }
        }
        if (n == 0 && s->symbolized) {
                function_names(s->name, &name, &system_name);
                r = line(b, name, system_name, NULL, 0);
                if (md)
                        md->functions = true;
        }
        /* Not symbolized: no line, so that pprof or a backend names it
         * later from the mapping's file and build ID. */
        if (md && n > 1)
                md->inlines = true;
        b->stats.locations++;
        b->stats.locations_with_lines += with_line;
        pprof_write_message(b->w, PPROF_PROFILE_LOCATION, &b->msg);
        return r;
}

static void mapping(struct pprof_build *b, uint32_t i) {
        const struct profile_map *m = &b->p->maps[i];
        const struct map_debug *md = &b->map_debug[i];
        bool synthetic = m->kernel || (m->start == 0 && m->end == 0);
        pbw_reset(&b->msg);
        pbw_varint(&b->msg, PPROF_MAPPING_ID, (uint64_t) i + 1);
        pbw_varint(&b->msg, PPROF_MAPPING_MEMORY_START, synthetic ? md->lo : m->start);
        pbw_varint(&b->msg, PPROF_MAPPING_MEMORY_LIMIT, synthetic ? md->hi : m->end);
        pbw_varint(&b->msg, PPROF_MAPPING_FILE_OFFSET, synthetic ? 0 : m->exact_offset);
        pbw_varint(&b->msg, PPROF_MAPPING_FILENAME, (uint64_t) pprof_string(b->w, m->path));
        pbw_varint(&b->msg, PPROF_MAPPING_BUILD_ID, (uint64_t) pprof_string(b->w, m->build_id));
        pbw_varint(&b->msg, PPROF_MAPPING_HAS_FUNCTIONS, md->functions);
        pbw_varint(&b->msg, PPROF_MAPPING_HAS_FILENAMES, md->filenames);
        pbw_varint(&b->msg, PPROF_MAPPING_HAS_LINE_NUMBERS, md->lines);
        pbw_varint(&b->msg, PPROF_MAPPING_HAS_INLINE_FRAMES, md->inlines);
        pprof_write_message(b->w, PPROF_PROFILE_MAPPING, &b->msg);
        b->stats.mappings++;
}

/* pprof takes the first mapping for the main binary: the user mapping
 * that is not a shared library with the most locations. */
static uint32_t main_mapping(const struct pprof_build *b) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < b->p->n_maps; i++) {
                const struct profile_map *m = &b->p->maps[i];
                if (!b->map_used[i] || m->kernel || !m->path || m->path[0] != '/' || strstr(m->path, ".so"))
                        continue;
                if (best == UINT32_MAX || b->map_debug[i].locations > b->map_debug[best].locations)
                        best = i;
        }
        return best;
}

static void header(struct pprof_build *b, bool on, bool off) {
        struct profile *p = b->p;
        for (int c = 0; c < _COL_MAX; c++)
                b->col[c] = -1;
        if (on) {
                add_column(b, COL_SAMPLES, "samples", "count");
                if (p->sample_ns)
                        add_column(b, COL_CPU, "cpu", "nanoseconds");
                else if (p->sample_period)
                        add_column(b, COL_CPU, p->sample_event ? p->sample_event : "events", "count");
        }
        if (off) {
                add_column(b, COL_OFF_SAMPLES, "off_cpu_samples", "count");
                add_column(b, COL_OFF_TIME, "off_cpu", "nanoseconds");
        }
        /* What tracectl report shows by default. */
        pprof_write_varint(b->w, PPROF_PROFILE_DEFAULT_SAMPLE_TYPE,
                           (uint64_t) pprof_string(b->w, on ? "samples" : "off_cpu"));
        if (on && p->sample_ns) {
                value_type(b, PPROF_PROFILE_PERIOD_TYPE, "cpu", "nanoseconds");
                pprof_write_varint(b->w, PPROF_PROFILE_PERIOD, p->sample_ns);
        } else if (on && p->sample_period) {
                value_type(b, PPROF_PROFILE_PERIOD_TYPE, p->sample_event ? p->sample_event : "events", "count");
                pprof_write_varint(b->w, PPROF_PROFILE_PERIOD, p->sample_period);
        } else
                /* Off-CPU samples have no period: each weighs what it waited. */
                value_type(b, PPROF_PROFILE_PERIOD_TYPE, on ? "samples" : "off_cpu", on ? "count" : "nanoseconds");
        if (p->have_first_ts) {
                uint64_t from = p->first_ts, to = p->last_ts;
                if (p->filter.have_since && p->filter.since_ns < to - from)
                        from = p->first_ts + p->filter.since_ns;
                if (p->filter.have_until && p->filter.until_ns < to - p->first_ts)
                        to = p->first_ts + p->filter.until_ns;
                if (p->have_realtime)
                        pprof_write_varint(b->w, PPROF_PROFILE_TIME_NANOS, from + (uint64_t) p->realtime_delta);
                pprof_write_varint(b->w, PPROF_PROFILE_DURATION_NANOS, to > from ? to - from : 0);
        }
        if (p->timebase)
                pprof_write_varint(b->w, PPROF_PROFILE_COMMENT, (uint64_t) pprof_string(b->w, p->timebase));
}

int report_pprof(struct pprof_writer *w, struct profile *p, struct pprof_stats *ret_stats) {
        struct pprof_build b = {
                .w = w,
                .p = p,
                .sym_used = calloc(p->n_syms + 1, 1),
                .map_used = calloc(p->n_maps + 1, 1),
                .map_debug = calloc(p->n_maps + 1, sizeof(struct map_debug)),
        };
        int r = 0;
        if (!b.sym_used || !b.map_used || !b.map_debug) {
                r = -ENOMEM;
                goto out;
        }
        bool kinds[_PROFILE_KIND_MAX];
        for (int k = 0; k < _PROFILE_KIND_MAX; k++)
                kinds[k] = p->filter.kind_explicit ? p->kind == (enum profile_kind) k : p->samples_kind[k] > 0;
        header(&b, kinds[PROFILE_ON_CPU], kinds[PROFILE_OFF_CPU]);
        for (int k = 0; k < _PROFILE_KIND_MAX && r >= 0; k++) {
                if (!kinds[k])
                        continue;
                const struct profile_tree *t = &p->trees[k];
                for (uint32_t n = 0; n < t->n_nodes && r >= 0; n++)
                        if (t->nodes[n].self[0] && (t->nodes[n].kind == NODE_FRAME || t->nodes[n].kind == NODE_THREAD))
                                r = sample(&b, t, (enum profile_kind) k, n);
        }
        if (r >= 0 && b.stats.samples == 0)
                r = -ENODATA;
        for (uint32_t i = 0; i < p->n_syms && r >= 0; i++)
                if (b.sym_used[i])
                        r = location(&b, i);
        if (r >= 0) {
                uint32_t first = main_mapping(&b);
                if (first != UINT32_MAX)
                        mapping(&b, first);
                for (uint32_t i = 0; i < p->n_maps; i++)
                        if (b.map_used[i] && i != first)
                                mapping(&b, i);
        }
out:
        if (ret_stats)
                *ret_stats = b.stats;
        free(b.sym_used);
        free(b.map_used);
        free(b.map_debug);
        free(b.functions);
        hashmap_clear(&b.function_index);
        free(b.stack);
        pbw_done(&b.msg);
        pbw_done(&b.sub);
        return r;
}
