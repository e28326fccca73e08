/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "profiling/jit-map.h"
#include "profiling/symbolizer.h"

struct elf_image *symbolizer_image(struct symbolizer *s, const struct proc_info *p, const struct pmap *m) {
        struct elf_image *img = NULL;
        if (!m || m->path[0] != '/')
                return NULL;
        uint64_t dev = makedev(m->dev_major, m->dev_minor);
        if (elf_cache_lookup(s->elves, dev, m->inode, m->path, &img))
                return img;
        int fd = proc_table_open_file(s->procs, p->pid, m->path);
        if (fd < 0)
                return NULL; /* not remembered: the next process may see it */
        (void) elf_cache_get_fd(s->elves, fd, dev, m->inode, m->path, &img);
        return img;
}

bool symbolizer_is_jit_memory(const struct pmap *m) {
        if (!(m->prot & PROT_EXEC))
                return false;
        /* Anonymous memory ("", "[anon:NAME]" as prctl names it, "//anon"
         * as perf's notes do) and a memfd runtimes map code from. */
        return m->path[0] == '\0' || !strncmp(m->path, "[anon", 5) || !strcmp(m->path, "//anon") ||
               !strncmp(m->path, "/memfd:", 7);
}

void symbolizer_resolve(struct symbolizer *s, const struct proc_info *p, uint64_t pc, struct symbolized *ret) {
        *ret = (struct symbolized) { .rel_pc = pc };
        const struct pmap *m = p ? proc_info_find_pc(p, pc) : NULL;
        if (!m)
                return;
        ret->map = m;
        ret->rel_pc = pc - m->start;
        if (symbolizer_is_jit_memory(m)) {
                /* The table's process, never a const object: its JIT names
                 * are read into it on demand. */
                ret->function = jit_symbols_lookup(s->procs, (struct proc_info *) p, pc);
                if (!ret->function)
                        s->jit_unnamed++;
                return;
        }
        struct elf_image *img = symbolizer_image(s, p, m);
        if (!img)
                return;
        uint64_t vaddr;
        if (!elf_image_offset_to_vaddr(img, pc - m->start + m->pgoff, &vaddr))
                return;
        ret->image = img;
        ret->rel_pc = vaddr;
        ret->function = elf_image_symbolize(s->elves, img, vaddr, NULL);
}

uint64_t symbolizer_user_frame(struct symbolizer *s, struct intern_writer *w, const struct proc_info *p, uint64_t pc) {
        struct symbolized r;
        symbolizer_resolve(s, p, pc, &r);
        struct intern_mapping im = {};
        if (r.map) {
                im.path = r.map->path;
                im.start = r.map->start;
                im.end = r.map->end;
                im.exact_offset = r.map->pgoff;
        }
        if (r.image) {
                im.build_id = elf_image_build_id(r.image, &im.build_id_len);
                im.load_bias = elf_image_load_bias(r.image);
        }
        uint64_t mapping = intern_mapping(w, &im);
        if (!mapping)
                return 0;
        uint64_t name = 0;
        if (r.function && !(name = intern_function_name(w, r.function)))
                return 0;
        return intern_frame(w, name, mapping, r.rel_pc);
}

uint64_t symbolizer_kernel_frame(struct symbolizer *s, struct intern_writer *w, uint64_t pc) {
        struct intern_mapping im = { .path = SYMBOLIZER_KERNEL_MAPPING };
        uint64_t mapping = intern_mapping(w, &im);
        if (!mapping)
                return 0;
        const char *fn = s->kernel_name ? s->kernel_name(s->kernel_name_userdata, pc)
                         : s->ksyms     ? ksyms_lookup(s->ksyms, pc)
                                        : NULL;
        uint64_t name = 0;
        if (fn && !(name = intern_function_name(w, fn)))
                return 0;
        return intern_frame(w, name, mapping, pc);
}
