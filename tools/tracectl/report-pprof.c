/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The profile as pprof's profile.proto: one Sample per distinct stack of
 * a thread (the leaves of the call trees, so memory follows the distinct
 * stacks, never the samples), its locations leaf first, labelled with the
 * process and thread (ids and the names report shows); one Location per
 * address, with the lines and inlined frames the binary's DWARF has
 * (debuginfo.c); Mappings as the trace recorded them, build IDs kept, so
 * that an address no one could name can be symbolized later by pprof or
 * a backend. Sample types: on-CPU samples and their CPU time, off-CPU
 * samples and their blocked time, and heap profiles' objects and bytes
 * allocated and in use (as Go's heap profiles name them), as the trace
 * has them. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/hashmap.h"
#include "debuginfo.h"
#include "pprof-writer.h"
#include "profile.h"

enum {
        COL_SAMPLES,
        COL_CPU,
        COL_OFF_SAMPLES,
        COL_OFF_TIME,
        COL_ALLOC_OBJECTS,
        COL_ALLOC_SPACE,
        COL_INUSE_OBJECTS,
        COL_INUSE_SPACE,
        _COL_MAX
};

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
        struct location_line {
                uint64_t function;
                uint32_t line;
        } * lines; /* of the location being written */
        size_t cap_lines;
        struct pprof_stats stats;
};

/* The names a frame's function goes by: as shown, and as the binary has
 * it (mangled). One place to put a demangler in. */
static void function_names(const char *raw, const char **ret_name, const char **ret_system_name) {
        *ret_name = raw;
        *ret_system_name = raw;
}

static void value_type(struct pprof_build *b, perftools_profiles_ValueType *vt, const char *type, const char *unit) {
        perftools_profiles_ValueType_set_type(vt, pprof_string(b->w, type));
        perftools_profiles_ValueType_set_unit(vt, pprof_string(b->w, unit));
}

static void add_column(struct pprof_build *b, int col, const char *type, const char *unit) {
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_ValueType vt;
        b->col[col] = (int) b->n_cols++;
        perftools_profiles_Profile_begin_sample_type(pr, &vt);
        value_type(b, &vt, type, unit);
        perftools_profiles_Profile_end_sample_type(pr, &vt);
        pprof_writer_flush(b->w);
}

static void label(struct pprof_build *b, perftools_profiles_Sample *s, const char *key, const char *str, int64_t num,
                  const char *unit) {
        perftools_profiles_Label l;
        perftools_profiles_Sample_begin_label(s, &l);
        perftools_profiles_Label_set_key(&l, pprof_string(b->w, key));
        if (str)
                perftools_profiles_Label_set_str(&l, pprof_string(b->w, str));
        else {
                perftools_profiles_Label_set_num(&l, num);
                if (unit)
                        perftools_profiles_Label_set_num_unit(&l, pprof_string(b->w, unit));
        }
        perftools_profiles_Sample_end_label(s, &l);
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

        uint64_t v[_COL_MAX] = {};
        if (k == PROFILE_ON_CPU) {
                v[COL_SAMPLES] = node->self[0];
                v[COL_CPU] = b->p->sample_ns ? node->self[1] : node->self[0] * b->p->sample_period;
        } else if (k == PROFILE_OFF_CPU) {
                v[COL_OFF_SAMPLES] = node->self[0];
                v[COL_OFF_TIME] = node->self[1];
        } else if (k == PROFILE_HEAP_ALLOC) {
                v[COL_ALLOC_OBJECTS] = node->self[0];
                v[COL_ALLOC_SPACE] = node->self[1];
        } else {
                v[COL_INUSE_OBJECTS] = node->self[0];
                v[COL_INUSE_SPACE] = node->self[1];
        }
        int64_t vals[_COL_MAX];
        for (int c = 0; c < _COL_MAX; c++)
                if (b->col[c] >= 0)
                        vals[b->col[c]] = (int64_t) v[c];
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_Sample s;
        perftools_profiles_Profile_begin_sample(pr, &s);
        perftools_profiles_Sample_set_location_id(&s, b->stack, depth);
        perftools_profiles_Sample_set_value(&s, vals, b->n_cols);
        label(b, &s, "pid", NULL, pid, NULL);
        label(b, &s, "process", profile_process_name(b->p, pid), 0, NULL);
        if (!profile_kind_heap(k)) { /* a heap's callsites are the process's */
                label(b, &s, "tid", NULL, tid, NULL);
                label(b, &s, "thread", profile_thread_name(b->p, tid), 0, NULL);
        }
        perftools_profiles_Profile_end_sample(pr, &s);
        pprof_writer_flush(b->w);
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
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_Function fn;
        perftools_profiles_Profile_begin_function(pr, &fn);
        perftools_profiles_Function_set_id(&fn, id);
        perftools_profiles_Function_set_name(&fn, f.name);
        perftools_profiles_Function_set_system_name(&fn, f.system_name);
        if (f.file)
                perftools_profiles_Function_set_filename(&fn, f.file);
        perftools_profiles_Profile_end_function(pr, &fn);
        pprof_writer_flush(b->w);
        b->stats.functions++;
        return id;
}

/* One more line of the location being written: its function (the
 * Function written on first use, before the Location) and line number. */
static int add_line(struct pprof_build *b, size_t *n_lines, const char *name, const char *system_name,
                    const char *file, uint32_t lineno) {
        uint64_t f = function_id(b, name, system_name, file);
        if (!f || GREEDY_REALLOC_MIN(b->lines, b->cap_lines, *n_lines + 1, 8) < 0)
                return -ENOMEM;
        b->lines[(*n_lines)++] = (struct location_line){ .function = f, .line = lineno };
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
        uint64_t a = 0;
        if (m) {
                a = frame_address(m, s->rel_pc);
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
        size_t n_lines = 0;
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
                r = add_line(b, &n_lines, name, system_name, dl[i].file, dl[i].line);
                with_line |= dl[i].line != 0;
                if (md) {
                        md->filenames |= dl[i].file != NULL;
                        md->lines |= dl[i].line != 0;
                        md->functions = true;
                }
        }
        if (n == 0 && s->symbolized) {
                function_names(s->name, &name, &system_name);
                r = add_line(b, &n_lines, name, system_name, NULL, 0);
                if (md)
                        md->functions = true;
        }
        /* Not symbolized: no line, so that pprof or a backend names it
         * later from the mapping's file and build ID. */
        if (md && n > 1)
                md->inlines = true;
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_Location loc;
        perftools_profiles_Profile_begin_location(pr, &loc);
        perftools_profiles_Location_set_id(&loc, (uint64_t) sym_index + 1);
        if (m) {
                perftools_profiles_Location_set_mapping_id(&loc, (uint64_t) s->map + 1);
                perftools_profiles_Location_set_address(&loc, a);
        }
        for (size_t i = 0; i < n_lines; i++) {
                perftools_profiles_Line l;
                perftools_profiles_Location_begin_line(&loc, &l);
                perftools_profiles_Line_set_function_id(&l, b->lines[i].function);
                if (b->lines[i].line)
                        perftools_profiles_Line_set_line(&l, b->lines[i].line);
                perftools_profiles_Location_end_line(&loc, &l);
        }
        perftools_profiles_Profile_end_location(pr, &loc);
        pprof_writer_flush(b->w);
        b->stats.locations++;
        b->stats.locations_with_lines += with_line;
        return r;
}

static void mapping(struct pprof_build *b, uint32_t i) {
        const struct profile_map *m = &b->p->maps[i];
        const struct map_debug *md = &b->map_debug[i];
        bool synthetic = m->kernel || (m->start == 0 && m->end == 0);
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_Mapping mp;
        perftools_profiles_Profile_begin_mapping(pr, &mp);
        perftools_profiles_Mapping_set_id(&mp, (uint64_t) i + 1);
        perftools_profiles_Mapping_set_memory_start(&mp, synthetic ? md->lo : m->start);
        perftools_profiles_Mapping_set_memory_limit(&mp, synthetic ? md->hi : m->end);
        perftools_profiles_Mapping_set_file_offset(&mp, synthetic ? 0 : m->exact_offset);
        perftools_profiles_Mapping_set_filename(&mp, pprof_string(b->w, m->path));
        perftools_profiles_Mapping_set_build_id(&mp, pprof_string(b->w, m->build_id));
        perftools_profiles_Mapping_set_has_functions(&mp, md->functions);
        perftools_profiles_Mapping_set_has_filenames(&mp, md->filenames);
        perftools_profiles_Mapping_set_has_line_numbers(&mp, md->lines);
        perftools_profiles_Mapping_set_has_inline_frames(&mp, md->inlines);
        perftools_profiles_Profile_end_mapping(pr, &mp);
        pprof_writer_flush(b->w);
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

static void header(struct pprof_build *b, const bool *kinds) {
        struct profile *p = b->p;
        bool on = kinds[PROFILE_ON_CPU], off = kinds[PROFILE_OFF_CPU];
        bool alloc = kinds[PROFILE_HEAP_ALLOC], inuse = kinds[PROFILE_HEAP_INUSE];
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
        if (alloc) {
                add_column(b, COL_ALLOC_OBJECTS, "alloc_objects", "count");
                add_column(b, COL_ALLOC_SPACE, "alloc_space", "bytes");
        }
        if (inuse) {
                add_column(b, COL_INUSE_OBJECTS, "inuse_objects", "count");
                add_column(b, COL_INUSE_SPACE, "inuse_space", "bytes");
        }
        perftools_profiles_Profile *pr = pprof_writer_profile(b->w);
        perftools_profiles_ValueType vt;
        /* What tracectl report shows by default. */
        const char *def = on ? "samples" : off ? "off_cpu" : p->kind == PROFILE_HEAP_ALLOC || !inuse ? "alloc_space"
                                                                                                     : "inuse_space";
        perftools_profiles_Profile_set_default_sample_type(pr, pprof_string(b->w, def));
        struct profile_heap_totals h;
        profile_heap_totals(p, &h);
        perftools_profiles_Profile_begin_period_type(pr, &vt);
        if (on && p->sample_ns) {
                value_type(b, &vt, "cpu", "nanoseconds");
                perftools_profiles_Profile_end_period_type(pr, &vt);
                perftools_profiles_Profile_set_period(pr, (int64_t) p->sample_ns);
        } else if (on && p->sample_period) {
                value_type(b, &vt, p->sample_event ? p->sample_event : "events", "count");
                perftools_profiles_Profile_end_period_type(pr, &vt);
                perftools_profiles_Profile_set_period(pr, (int64_t) p->sample_period);
        } else if (!on && !off) {
                /* A heap profile: sampled every so many bytes. */
                value_type(b, &vt, "space", "bytes");
                perftools_profiles_Profile_end_period_type(pr, &vt);
                if (h.interval_min)
                        perftools_profiles_Profile_set_period(pr, (int64_t) h.interval_min);
        } else {
                /* Off-CPU samples have no period: each weighs what it waited. */
                value_type(b, &vt, on ? "samples" : "off_cpu", on ? "count" : "nanoseconds");
                perftools_profiles_Profile_end_period_type(pr, &vt);
        }
        if (p->have_first_ts) {
                uint64_t from = p->first_ts, to = p->last_ts;
                if (p->filter.have_since && p->filter.since_ns < to - from)
                        from = p->first_ts + p->filter.since_ns;
                if (p->filter.have_until && p->filter.until_ns < to - p->first_ts)
                        to = p->first_ts + p->filter.until_ns;
                if (p->have_realtime)
                        perftools_profiles_Profile_set_time_nanos(pr, (int64_t) (from + (uint64_t) p->realtime_delta));
                perftools_profiles_Profile_set_duration_nanos(pr, (int64_t) (to > from ? to - from : 0));
        }
        if (p->timebase) {
                int64_t comment = pprof_string(b->w, p->timebase);
                perftools_profiles_Profile_set_comment(pr, &comment, 1);
        }
        pprof_writer_flush(b->w);
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
        header(&b, kinds);
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
        free(b.lines);
        return r;
}
