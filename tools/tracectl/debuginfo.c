/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dwarf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/hashmap.h"
#include "basic/macro.h"
#include "debuginfo.h"
#include "profiling/elf-image.h"

#define URLS_ENV "DEBUGINFOD_URLS"
#define MAX_INLINE 32
#define MAX_PROBLEMS 8

enum origin { ORIGIN_NONE, ORIGIN_LOCAL, ORIGIN_DEBUGINFOD };

struct dmod {
        char *key;  /* build id, else path */
        char *path; /* as the trace named it */
        Dwfl *dwfl;
        Dwfl_Module *mod;
        GElf_Addr bias;
        struct elf_image *img; /* the same file, for its sorted symbols */
        int dwfl_names;        /* libdwfl has symbols img has not (-1: not known yet) */
        enum origin origin;
        bool build_id_differs;
};

struct debuginfo {
        char *urls;
        unsigned timeout_s;
        debuginfod_client *client;
        struct timespec deadline;
        bool gave_up;
        struct dmod *mods;
        size_t n_mods, cap_mods;
        struct hashmap index; /* salted hash of key -> mods[] */
        struct elf_cache *elves;
        struct debuginfo_stats stats;
        /* the lines of the last lookup */
        struct debuginfo_line lines[MAX_INLINE];
        /* every address looked up: (module, address) -> its lines in pool
         * (a trace re-interns its frames after each clearing of its
         * incremental state; DWARF is walked once per address) */
        struct addr_entry {
                uint64_t rel_pc;
                uint32_t mod, first, n;
        } *addrs;
        size_t n_addrs, cap_addrs;
        struct hashmap addr_index;
        struct debuginfo_line *pool;
        size_t n_pool, cap_pool;
        /* and the function names asked for (libdwfl's look-up walks the
         * whole symbol table) */
        struct name_entry {
                uint64_t rel_pc;
                uint32_t mod;
                const char *name;
        } *names;
        size_t n_names, cap_names;
        struct hashmap name_index;
        char *problems[MAX_PROBLEMS];
        size_t n_problems, more_problems;
};

/* --- opting in ---------------------------------------------------------- */

static int urls_from_etc(char **ret) {
        glob_t g = {};
        *ret = NULL;
        if (glob("/etc/debuginfod/*.urls", 0, NULL, &g) != 0)
                return 0;
        char *all = NULL;
        size_t len = 0;
        for (size_t i = 0; i < g.gl_pathc; i++) {
                FILE *f = fopen(g.gl_pathv[i], "re");
                char line[1024];
                while (f && fgets(line, sizeof(line), f)) {
                        line[strcspn(line, " \t\r\n#")] = 0;
                        if (!line[0])
                                continue;
                        size_t k = strlen(line);
                        char *n = realloc(all, len + k + 2);
                        if (!n) {
                                fclose(f);
                                free(all);
                                globfree(&g);
                                return -ENOMEM;
                        }
                        all = n;
                        if (len)
                                all[len++] = ' ';
                        memcpy(all + len, line, k + 1);
                        len += k;
                }
                if (f)
                        fclose(f);
        }
        globfree(&g);
        *ret = all;
        return 0;
}

int debuginfo_opt_in(const char *urls, bool want, bool refuse, char **ret_urls) {
        const char *env = getenv(URLS_ENV);
        char *chosen = NULL;
        int r = 0;
        *ret_urls = NULL;
        if (refuse)
                ;
        else if (urls && urls[0])
                chosen = strdup(urls);
        else if (env && env[0])
                chosen = strdup(env);
        else if (want) {
                if ((r = urls_from_etc(&chosen)) < 0)
                        return r;
                if (!chosen)
                        r = -ENOENT;
        }
        if (!refuse && (urls || (env && env[0])) && !chosen)
                r = -ENOMEM;
        (void) unsetenv(URLS_ENV);
        if (r < 0) {
                free(chosen);
                return r;
        }
        *ret_urls = chosen;
        return 0;
}

/* --- debuginfod --------------------------------------------------------- */

static int progress(debuginfod_client *c, long a, long b) {
        (void) a;
        (void) b;
        struct debuginfo *d = debuginfod_get_user_data(c);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return now.tv_sec > d->deadline.tv_sec ||
               (now.tv_sec == d->deadline.tv_sec && now.tv_nsec >= d->deadline.tv_nsec);
}

/* A file for build_id from the servers: an fd, or -errno. A failure other
 * than "not there" (a timeout, a refused connection) stops all asking. */
static int ask_server(struct debuginfo *d, const char *build_id, bool executable, char **ret_path) {
        *ret_path = NULL;
        if (!d->urls || d->gave_up || !build_id)
                return -ENOENT;
        if (!d->client) {
                d->client = debuginfod_begin();
                if (!d->client) {
                        d->gave_up = true;
                        return -ENOMEM;
                }
                debuginfod_set_user_data(d->client, d);
                debuginfod_set_progressfn(d->client, progress);
        }
        char timeout[16];
        snprintf(timeout, sizeof(timeout), "%u", d->timeout_s);
        bool own_timeout = !getenv("DEBUGINFOD_TIMEOUT");
        if (setenv(URLS_ENV, d->urls, 1) < 0 || (own_timeout && setenv("DEBUGINFOD_TIMEOUT", timeout, 1) < 0))
                return -ENOMEM;
        clock_gettime(CLOCK_MONOTONIC, &d->deadline);
        d->deadline.tv_sec += d->timeout_s;
        int fd = executable ? debuginfod_find_executable(d->client, (const unsigned char *) build_id, 0, ret_path)
                            : debuginfod_find_debuginfo(d->client, (const unsigned char *) build_id, 0, ret_path);
        (void) unsetenv(URLS_ENV);
        if (own_timeout)
                (void) unsetenv("DEBUGINFOD_TIMEOUT");
        if (fd >= 0) {
                d->stats.files_debuginfod++;
                return fd;
        }
        if (fd != -ENOENT) {
                d->stats.debuginfod_failures++;
                d->gave_up = true;
        }
        return fd;
}

/* --- files -------------------------------------------------------------- */

/* libdwfl asks for a separate debug file: the standard places on this
 * machine (no server: DEBUGINFOD_URLS is not set), else the servers. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base, const char *file_name,
                          const char *debuglink_file, GElf_Word debuglink_crc, char **debuginfo_file_name) {
        int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                              debuginfo_file_name);
        if (fd >= 0)
                return fd;
        struct debuginfo *d = *userdata;
        const unsigned char *bits;
        GElf_Addr vaddr;
        int n = dwfl_module_build_id(mod, &bits, &vaddr);
        if (!d || n <= 0)
                return -1;
        char hex[2 * 64 + 1];
        if (n > 64)
                return -1;
        for (int i = 0; i < n; i++)
                sprintf(hex + 2 * i, "%02x", bits[i]);
        char *path;
        fd = ask_server(d, hex, false, &path);
        if (fd < 0)
                return -1;
        if (*debuginfo_file_name == NULL)
                *debuginfo_file_name = path;
        else
                free(path);
        return fd;
}

static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = find_debuginfo,
        .section_address = dwfl_offline_section_address,
};

static bool module_build_id_is(Dwfl_Module *mod, const char *want) {
        const unsigned char *bits;
        GElf_Addr vaddr;
        int n = dwfl_module_build_id(mod, &bits, &vaddr);
        if (n <= 0 || (size_t) n * 2 != strlen(want))
                return false;
        for (int i = 0; i < n; i++) {
                char b[3];
                snprintf(b, sizeof(b), "%02x", bits[i]);
                if (strncasecmp(b, want + 2 * i, 2) != 0)
                        return false;
        }
        return true;
}

/* Reports the file open at fd (taken) as m's module. */
static bool report(struct debuginfo *d, struct dmod *m, const char *file, int fd) {
        m->dwfl = dwfl_begin(&callbacks);
        if (!m->dwfl) {
                close(fd);
                return false;
        }
        dwfl_report_begin(m->dwfl);
        const char *base = strrchr(file, '/');
        m->mod = dwfl_report_elf(m->dwfl, base ? base + 1 : file, file, fd, 0, false);
        dwfl_report_end(m->dwfl, NULL, NULL);
        if (!m->mod) {
                dwfl_end(m->dwfl);
                m->dwfl = NULL;
                return false;
        }
        void **ud;
        if (dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
                *ud = d;
        if (!dwfl_module_getelf(m->mod, &m->bias)) {
                dwfl_end(m->dwfl);
                m->dwfl = NULL;
                m->mod = NULL;
                return false;
        }
        /* Names by binary search (profiling/elf-image.h): libdwfl's look-up
         * walks the whole symbol table for each address. */
        int fd2 = d->elves ? open(file, O_RDONLY | O_CLOEXEC) : -1;
        if (fd2 >= 0)
                (void) elf_cache_get_fd(d->elves, fd2, 0, 0, file, &m->img);
        return true;
}

static void note_problem(struct debuginfo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_problem(struct debuginfo *d, const char *fmt, ...) {
        if (d->n_problems == MAX_PROBLEMS) {
                d->more_problems++;
                return;
        }
        char *s;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) >= 0)
                d->problems[d->n_problems++] = s;
        va_end(ap);
}

static void open_module(struct debuginfo *d, struct dmod *m, const char *build_id) {
        const char *path = m->path;
        if (path && path[0] == '/') {
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd >= 0 && report(d, m, path, fd)) {
                        if (!build_id || module_build_id_is(m->mod, build_id)) {
                                m->origin = ORIGIN_LOCAL;
                                d->stats.files_local++;
                                return;
                        }
                        dwfl_end(m->dwfl);
                        m->dwfl = NULL;
                        m->mod = NULL;
                        m->build_id_differs = true;
                        d->stats.files_build_id_differs++;
                }
        }
        char *got = NULL;
        int fd = ask_server(d, build_id, true, &got);
        if (fd < 0)
                fd = ask_server(d, build_id, false, &got);
        if (fd >= 0 && report(d, m, got, fd)) {
                m->origin = ORIGIN_DEBUGINFOD;
                free(got);
                return;
        }
        free(got);
        /* Memory that was never a file on disk (memfd, a deleted file)
         * without a build ID: nothing anyone could find. */
        if (!build_id && path && (strncmp(path, "/memfd:", 7) == 0 || strstr(path, " (deleted)")))
                return;
        d->stats.files_missing++;
        if (m->build_id_differs)
                note_problem(d, "%s: its build ID is not the trace's %s (the file changed since)", path, build_id);
        else
                note_problem(d, "%s%s%s: not found", path ? path : "", build_id ? " build ID " : "",
                             build_id ? build_id : "");
}

static uint64_t key_hash(const char *k, uint64_t salt) {
        return fnv1a64(k, strlen(k)) + salt * 0x9e3779b97f4a7c15ULL;
}

static struct dmod *module_get(struct debuginfo *d, const char *path, const char *build_id) {
        const char *key = build_id && build_id[0] ? build_id : path;
        if (!key || !key[0] || key[0] == '[')
                return NULL;
        uint64_t salt = 0, i;
        for (;; salt++) {
                if (!hashmap_get(&d->index, key_hash(key, salt), &i))
                        break;
                if (strcmp(d->mods[i].key, key) == 0)
                        return d->mods[i].mod ? &d->mods[i] : NULL;
        }
        if (GREEDY_REALLOC_MIN(d->mods, d->cap_mods, d->n_mods + 1, 16) < 0)
                return NULL;
        struct dmod *m = &d->mods[d->n_mods];
        *m = (struct dmod){.key = strdup(key), .path = path ? strdup(path) : NULL};
        if (!m->key || (path && !m->path) || hashmap_put(&d->index, key_hash(key, salt), d->n_mods) < 0) {
                free(m->key);
                free(m->path);
                return NULL;
        }
        d->n_mods++;
        open_module(d, m, build_id && build_id[0] ? build_id : NULL);
        return m->mod ? m : NULL;
}

/* --- lookups ------------------------------------------------------------ */

static const char *die_name(Dwarf_Die *die, int attr) {
        Dwarf_Attribute a;
        return dwarf_attr_integrate(die, attr, &a) ? dwarf_formstring(&a) : NULL;
}

static bool is_function(Dwarf_Die *die) {
        int tag = dwarf_tag(die);
        return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram;
}

static size_t lookup_lines(struct debuginfo *d, struct dmod *m, uint64_t rel_pc) {
        Dwarf_Addr addr = rel_pc + m->bias, cu_bias;
        Dwarf_Die *cu = dwfl_module_addrdie(m->mod, addr, &cu_bias);
        if (!cu)
                return 0;
        const char *file = NULL;
        int line = 0, col = 0;
        Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
        if (l)
                file = dwfl_lineinfo(l, NULL, &line, &col, NULL, NULL);
        /* The innermost function around the address; then, for an
         * inlined one, the function its concrete instance sits in, found
         * from that instance's own scopes (dwarf_getscopes goes on with
         * the abstract definition's). */
        Dwarf_Die *scopes = NULL, cur;
        int n = dwarf_getscopes(cu, addr - cu_bias, &scopes);
        bool found = false;
        for (int i = 0; i < n && !found; i++)
                if (is_function(&scopes[i])) {
                        cur = scopes[i];
                        found = true;
                }
        free(scopes);
        Dwarf_Files *files = NULL;
        size_t n_files = 0;
        size_t k = 0;
        while (found && k < MAX_INLINE) {
                int tag = dwarf_tag(&cur);
                const char *linkage = die_name(&cur, DW_AT_linkage_name);
                if (!linkage)
                        linkage = die_name(&cur, DW_AT_MIPS_linkage_name);
                d->lines[k++] = (struct debuginfo_line){
                        .function = die_name(&cur, DW_AT_name),
                        .linkage_name = linkage,
                        .file = file,
                        .line = line > 0 ? (uint32_t) line : 0,
                        .column = col > 0 ? (uint32_t) col : 0,
                };
                if (tag != DW_TAG_inlined_subroutine)
                        break;
                /* The next function out is at this one's call site. */
                Dwarf_Attribute a;
                Dwarf_Word cf = 0, cl = 0, cc = 0;
                file = NULL;
                line = col = 0;
                if (dwarf_formudata(dwarf_attr(&cur, DW_AT_call_file, &a), &cf) == 0 &&
                    (files || dwarf_getsrcfiles(cu, &files, &n_files) == 0) && cf < n_files)
                        file = dwarf_filesrc(files, cf, NULL, NULL);
                if (dwarf_formudata(dwarf_attr(&cur, DW_AT_call_line, &a), &cl) == 0)
                        line = (int) cl;
                if (dwarf_formudata(dwarf_attr(&cur, DW_AT_call_column, &a), &cc) == 0)
                        col = (int) cc;
                n = dwarf_getscopes_die(&cur, &scopes);
                found = false;
                for (int i = 1; i < n && !found; i++)
                        if (is_function(&scopes[i])) {
                                cur = scopes[i];
                                found = true;
                        }
                free(scopes);
        }
        if (k == 0 && file) /* a line, but no function around it */
                d->lines[k++] = (struct debuginfo_line){.file = file, .line = (uint32_t) line};
        return k;
}

static uint64_t addr_key(uint32_t mod, uint64_t rel_pc, uint64_t salt) {
        return (rel_pc * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t) mod << 44) ^ (salt * 0xff51afd7ed558ccdULL);
}

size_t debuginfo_lines(struct debuginfo *d, const char *path, const char *build_id, uint64_t rel_pc,
                       const struct debuginfo_line **ret) {
        *ret = d->lines;
        struct dmod *m = module_get(d, path, build_id);
        if (!m)
                return 0;
        uint32_t mod = (uint32_t) (m - d->mods);
        uint64_t salt = 0, i;
        for (;; salt++) {
                if (!hashmap_get(&d->addr_index, addr_key(mod, rel_pc, salt), &i))
                        break;
                const struct addr_entry *e = &d->addrs[i];
                if (e->mod == mod && e->rel_pc == rel_pc) {
                        *ret = d->pool + e->first;
                        return e->n;
                }
        }
        size_t n = lookup_lines(d, m, rel_pc);
        /* Remembered when memory allows; else only answered. */
        if (GREEDY_REALLOC_MIN(d->pool, d->cap_pool, d->n_pool + n, 256) < 0 ||
            GREEDY_REALLOC_MIN(d->addrs, d->cap_addrs, d->n_addrs + 1, 256) < 0 ||
            hashmap_put(&d->addr_index, addr_key(mod, rel_pc, salt), d->n_addrs) < 0)
                return n;
        d->addrs[d->n_addrs++] = (struct addr_entry) {
                .rel_pc = rel_pc, .mod = mod, .first = (uint32_t) d->n_pool, .n = (uint32_t) n };
        if (n > 0) /* d->pool is NULL until lines were remembered */
                memcpy(d->pool + d->n_pool, d->lines, n * sizeof(*d->lines));
        *ret = d->pool + d->n_pool;
        d->n_pool += n;
        return n;
}

static const char *lookup_function(struct debuginfo *d, struct dmod *m, const char *path, const char *build_id,
                                   uint64_t rel_pc) {
        const char *name = m->img ? elf_image_symbolize(d->elves, m->img, rel_pc, NULL) : NULL;
        if (!name && m->dwfl_names < 0) {
                /* Symbols only libdwfl found: a separate debug file that
                 * elf-image.c did not see (from a server). */
                const char *debug = NULL;
                m->dwfl_names = dwfl_module_getsymtab(m->mod) > 0 &&
                                dwfl_module_info(m->mod, NULL, NULL, NULL, NULL, NULL, NULL, &debug) && debug &&
                                (!m->img || !elf_image_debug_file(m->img));
        }
        if (!name && (!m->img || m->dwfl_names))
                name = dwfl_module_addrname(m->mod, rel_pc + m->bias);
        if (name)
                return name;
        const struct debuginfo_line *l;
        size_t n = debuginfo_lines(d, path, build_id, rel_pc, &l);
        for (size_t i = n; i-- > 0;)
                if (l[i].linkage_name || l[i].function)
                        return l[i].linkage_name ? l[i].linkage_name : l[i].function;
        return NULL;
}

const char *debuginfo_function(struct debuginfo *d, const char *path, const char *build_id, uint64_t rel_pc) {
        struct dmod *m = module_get(d, path, build_id);
        if (!m)
                return NULL;
        uint32_t mod = (uint32_t) (m - d->mods);
        uint64_t salt = 0, i;
        for (;; salt++) {
                if (!hashmap_get(&d->name_index, addr_key(mod, rel_pc, salt), &i))
                        break;
                if (d->names[i].mod == mod && d->names[i].rel_pc == rel_pc)
                        return d->names[i].name;
        }
        const char *name = lookup_function(d, m, path, build_id, rel_pc);
        if (GREEDY_REALLOC_MIN(d->names, d->cap_names, d->n_names + 1, 256) >= 0 &&
            hashmap_put(&d->name_index, addr_key(mod, rel_pc, salt), d->n_names) >= 0)
                d->names[d->n_names++] = (struct name_entry) { .rel_pc = rel_pc, .mod = mod, .name = name };
        return name;
}

/* --- life --------------------------------------------------------------- */

int debuginfo_new(const struct debuginfo_options *o, struct debuginfo **ret) {
        struct debuginfo *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->timeout_s = o && o->timeout_s ? o->timeout_s : 30;
        (void) elf_cache_new(NULL, &d->elves); /* without: libdwfl's names only */
        if (o && o->urls && !(d->urls = strdup(o->urls))) {
                free(d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

void debuginfo_free(struct debuginfo *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n_mods; i++) {
                if (d->mods[i].dwfl)
                        dwfl_end(d->mods[i].dwfl);
                free(d->mods[i].key);
                free(d->mods[i].path);
        }
        free(d->mods);
        hashmap_clear(&d->index);
        free(d->addrs);
        free(d->pool);
        hashmap_clear(&d->addr_index);
        free(d->names);
        hashmap_clear(&d->name_index);
        if (d->client)
                debuginfod_end(d->client);
        if (d->elves)
                elf_cache_free(d->elves);
        for (size_t i = 0; i < d->n_problems; i++)
                free(d->problems[i]);
        free(d->urls);
        free(d);
}

void debuginfo_stats(const struct debuginfo *d, struct debuginfo_stats *ret) {
        *ret = d->stats;
        ret->debuginfod_gave_up = d->gave_up;
}

void debuginfo_print_problems(const struct debuginfo *d, FILE *f, const char *prefix) {
        for (size_t i = 0; i < d->n_problems; i++)
                fprintf(f, "%s%s\n", prefix, d->problems[i]);
        if (d->more_problems)
                fprintf(f, "%sand %zu more files\n", prefix, d->more_problems);
}
