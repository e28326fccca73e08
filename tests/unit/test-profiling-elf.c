/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <gnu/libc-version.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "profiling/elf-image.h"
#include "profiling/procmaps.h"
#include "test-scratch.h"

/* Something to find by address, kept out of line and global. */
__attribute__((noinline, used)) int profiling_elf_probe_function(int x);
__attribute__((noinline, used)) int profiling_elf_probe_function(int x) {
        return x * 3 + 1;
}

/* The virtual address, in its file, of fn in this process. */
static const struct pmap *self_map(struct proc_table **t, const void *fn) {
        cr_assert_eq(proc_table_new(NULL, t), 0);
        struct proc_info *p = proc_table_get(*t, getpid());
        const struct pmap *m = proc_maps_find(&p->maps, (uint64_t) (uintptr_t) fn);
        cr_assert_not_null(m);
        return m;
}

static struct elf_image *open_image(struct elf_cache *c, const char *path, int expect) {
        struct stat st;
        cr_assert_eq(stat(path, &st), 0, "%s", path);
        struct elf_image *img = NULL;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        int r = elf_cache_get_fd(c, fd, st.st_dev, st.st_ino, path, &img);
        cr_assert_eq(r, expect, "%s: %d", path, r);
        return img;
}

Test(profiling_elf, symbolizes_this_program) {
        struct proc_table *t;
        const struct pmap *m = self_map(&t, (const void *) profiling_elf_probe_function);
        struct elf_cache *c;
        cr_assert_eq(elf_cache_new(NULL, &c), 0);
        struct elf_image *img = open_image(c, m->path, 0);
        uint64_t vaddr, off;
        uint64_t pc = (uint64_t) (uintptr_t) profiling_elf_probe_function + 4;
        cr_assert(elf_image_offset_to_vaddr(img, pc - m->start + m->pgoff, &vaddr));
        uint64_t back;
        cr_assert(elf_image_vaddr_to_offset(img, vaddr, &back));
        cr_assert_eq(back, pc - m->start + m->pgoff, "offset -> vaddr -> offset");
        const char *name = elf_image_symbolize(c, img, vaddr, &off);
        cr_assert_not_null(name);
        cr_assert_str_eq(name, "profiling_elf_probe_function");
        cr_assert_eq(off, 4);
        /* Read where the file has it, not copied. */
        size_t data_size;
        const uint8_t *data = elf_image_data(img, &data_size);
        cr_assert((const uint8_t *) name >= data && (const uint8_t *) name < data + data_size,
                  "the name is a copy, not the file's");
        cr_assert_gt(elf_image_symbol_count(c, img), 5);
        size_t len;
        cr_assert_not_null(elf_image_build_id(img, &len), "gcc on Debian links with --build-id");
        cr_assert_eq(len, 20);
        uint64_t ehv, eho, ehs;
        cr_assert(elf_image_eh_frame_hdr(img, &ehv, &eho, &ehs));
        cr_assert_gt(ehs, 8);
        /* The same file again comes from the cache. */
        struct elf_image *again = NULL;
        struct stat st;
        cr_assert_eq(stat(m->path, &st), 0);
        cr_assert(elf_cache_lookup(c, st.st_dev, st.st_ino, m->path, &again));
        cr_assert_eq(again, img);
        cr_assert_eq(elf_cache_count(c), 1);
        elf_cache_free(c);
        proc_table_free(t);
}

Test(profiling_elf, shared_libraries_by_dynsym_or_symtab) {
        /* libc: its exported functions at least, from .dynsym when no
         * .symtab or debug file is installed (a minimal system has none).
         * qsort is exported and no IFUNC, so either table names it. */
        struct proc_table *t;
        const struct pmap *m = self_map(&t, (const void *) qsort);
        struct elf_cache *c;
        cr_assert_eq(elf_cache_new(NULL, &c), 0);
        struct elf_image *img = open_image(c, m->path, 0);
        cr_assert_gt(elf_image_symbol_count(c, img), 100);
        uint64_t vaddr;
        cr_assert(elf_image_offset_to_vaddr(img, (uint64_t) (uintptr_t) qsort - m->start + m->pgoff, &vaddr));
        const char *name = elf_image_symbolize(c, img, vaddr + 1, NULL);
        cr_assert_not_null(name);
        cr_assert_not_null(strstr(name, "qsort"), "%s", name);
        elf_cache_free(c);
        proc_table_free(t);
}

/* Every sized function of libc's symbol table (.symtab when the file has
 * one, as the image reads it, else .dynsym), looked up at its first byte
 * and at its last: what comes back is a symbol of that address (one of its
 * aliases), at the offset asked. The table comes in the order of its hash
 * and is sorted by address when first used; a wrong order, a wrong
 * choice among aliases or a stale memo of a lookup shows here. libc is
 * found by a function no sanitizer runtime intercepts. */
Test(profiling_elf, every_function_of_a_table_is_found_at_its_address) {
        struct proc_table *t;
        const struct pmap *m = self_map(&t, (const void *) gnu_get_libc_version);
        struct elf_cache *c;
        cr_assert_eq(elf_cache_new(NULL, &c), 0);
        struct elf_image *img = open_image(c, m->path, 0);
        size_t size;
        const uint8_t *data = elf_image_data(img, &size);
        Elf *e = elf_memory((char *) data, size);
        cr_assert_not_null(e);
        Elf_Scn *scn = NULL, *found = NULL;
        GElf_Shdr sh = {}, x;
        while ((scn = elf_nextscn(e, scn)))
                if (gelf_getshdr(scn, &x) && (x.sh_type == SHT_SYMTAB || (x.sh_type == SHT_DYNSYM && !found))) {
                        found = scn;
                        sh = x;
                }
        scn = found;
        cr_assert_not_null(scn, "%s has no symbol table", m->path);
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n = sh.sh_size / sh.sh_entsize, checked = 0;
        /* Twice: the second pass finds them again through the memo of
         * recent lookups, among the collisions of the first. */
        for (size_t k = 0; k < 2 * n; k++) {
                GElf_Sym s;
                cr_assert(gelf_getsym(d, (int) (k % n), &s));
                if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_size == 0 || s.st_shndx == SHN_UNDEF)
                        continue;
                uint64_t ends[2] = { s.st_value, s.st_value + s.st_size - 1 };
                for (size_t i = 0; i < 2; i++) {
                        uint64_t off = UINT64_MAX;
                        const char *name = elf_image_symbolize(c, img, ends[i], &off);
                        cr_assert_not_null(name, "%s at %#" PRIx64, elf_strptr(e, sh.sh_link, s.st_name), ends[i]);
                        cr_assert_eq(off, ends[i] - s.st_value, "%s at %#" PRIx64 ": %s+%" PRIu64,
                                     elf_strptr(e, sh.sh_link, s.st_name), ends[i], name, off);
                        /* name is one of the functions at st_value. */
                        bool alias = false;
                        for (size_t j = 0; j < n && !alias; j++) {
                                GElf_Sym o;
                                cr_assert(gelf_getsym(d, (int) j, &o));
                                alias = o.st_value == s.st_value && GELF_ST_TYPE(o.st_info) == STT_FUNC &&
                                        strcmp(elf_strptr(e, sh.sh_link, o.st_name), name) == 0;
                        }
                        cr_assert(alias, "%s at %#" PRIx64 " came back as %s", elf_strptr(e, sh.sh_link, s.st_name),
                                  ends[i], name);
                }
                checked++;
        }
        cr_assert_gt(checked, 2 * 1000, "only %zu sized functions in %s", checked / 2, m->path);
        elf_end(e);
        elf_cache_free(c);
        proc_table_free(t);
}

/* What a test makes (a file, a directory of stripped copies): its .fini
 * removes it, whether the test passed or not. */
static char scratch[256];

static void remove_scratch(void) {
        cr_expect_eq(test_scratch_remove(scratch), 0, "could not remove %s", scratch);
        scratch[0] = '\0';
}

Test(profiling_elf, not_elf_is_remembered, .fini = remove_scratch) {
        cr_assert_eq(test_mkdtemp(scratch, sizeof(scratch), "test-profiling-elf-"), 0);
        char path[300];
        snprintf(path, sizeof(path), "%s/script", scratch);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        const char text[] = "#!/bin/sh\necho this is a script, long enough to look at its header\n";
        cr_assert_eq(write(fd, text, sizeof(text)), (ssize_t) sizeof(text));
        close(fd);
        struct elf_cache *c;
        cr_assert_eq(elf_cache_new(NULL, &c), 0);
        cr_assert_null(open_image(c, path, -ENOEXEC));
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        struct elf_image *img = (void *) 1;
        cr_assert(elf_cache_lookup(c, st.st_dev, st.st_ino, path, &img));
        cr_assert_null(img);
        elf_cache_free(c);
}

/* A stripped copy of this program finds its symbols in a debug file under
 * DEBUG/.build-id/xx/yyyy.debug, or next to it through .gnu_debuglink. */
static void check_stripped(bool by_build_id) {
        struct proc_table *t;
        const struct pmap *m = self_map(&t, (const void *) profiling_elf_probe_function);
        cr_assert_eq(test_mkdtemp(scratch, sizeof(scratch), "test-profiling-debug-"), 0);
        const char *dir = scratch;
        char cmd[8192];
        struct elf_cache *c;
        cr_assert_eq(elf_cache_new(dir, &c), 0);
        struct elf_image *orig = open_image(c, m->path, 0);
        size_t len;
        const uint8_t *id = elf_image_build_id(orig, &len);
        cr_assert_not_null(id);
        char hex[128] = "";
        for (size_t k = 1; k < len; k++)
                sprintf(hex + 2 * (k - 1), "%02x", id[k]);
        if (by_build_id)
                snprintf(cmd, sizeof(cmd),
                         "set -e; mkdir -p %s/.build-id/%02x; objcopy --only-keep-debug '%s' %s/.build-id/%02x/%s.debug;"
                         "strip -o %s/prog '%s'",
                         dir, id[0], m->path, dir, id[0], hex, dir, m->path);
        else
                snprintf(cmd, sizeof(cmd),
                         "set -e; cd %s; objcopy --only-keep-debug '%s' prog.dbg; strip -o prog.tmp '%s';"
                         "objcopy --add-gnu-debuglink=prog.dbg prog.tmp prog; rm prog.tmp",
                         dir, m->path, m->path);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        char stripped[600];
        snprintf(stripped, sizeof(stripped), "%s/prog", dir);
        struct elf_image *img = open_image(c, stripped, 0);
        size_t len2;
        const uint8_t *id2 = elf_image_build_id(img, &len2);
        cr_assert_eq(len2, len);
        cr_assert_eq(memcmp(id, id2, len), 0, "strip keeps the build id");
        uint64_t vaddr;
        uint64_t pc = (uint64_t) (uintptr_t) profiling_elf_probe_function;
        cr_assert(elf_image_offset_to_vaddr(img, pc - m->start + m->pgoff, &vaddr));
        const char *name = elf_image_symbolize(c, img, vaddr, NULL);
        cr_assert_not_null(name, "symbols from the debug file");
        cr_assert_str_eq(name, "profiling_elf_probe_function");
        cr_assert_not_null(elf_image_debug_file(img));
        /* The debug file is not kept mapped: its names are copied. */
        size_t data_size;
        const uint8_t *data = elf_image_data(img, &data_size);
        cr_assert((const uint8_t *) name < data || (const uint8_t *) name >= data + data_size);
        elf_cache_free(c);
        proc_table_free(t);
}

Test(profiling_elf, separate_debug_file_by_build_id, .fini = remove_scratch) {
        check_stripped(true);
}

Test(profiling_elf, separate_debug_file_by_debuglink, .fini = remove_scratch) {
        check_stripped(false);
}
