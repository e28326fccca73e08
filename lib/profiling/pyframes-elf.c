/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "profiling/pyframes-elf.h"

int py_elf_symbol(const uint8_t *data, size_t size, const char *name, uint64_t *ret_vaddr) {
        if (elf_version(EV_CURRENT) == EV_NONE)
                return -ENOTSUP;
        Elf *e = elf_memory((char *) data, size);
        if (!e)
                return -ENOEXEC;
        int r = -ENOENT;
        Elf_Scn *scn = NULL;
        while (r == -ENOENT && (scn = elf_nextscn(e, scn))) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
                    sh.sh_entsize == 0)
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                if (!d)
                        continue;
                size_t n = sh.sh_size / sh.sh_entsize;
                for (size_t k = 0; k < n; k++) {
                        GElf_Sym sym;
                        if (!gelf_getsym(d, (int) k, &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
                                continue;
                        const char *sn = elf_strptr(e, sh.sh_link, sym.st_name);
                        if (sn && strcmp(sn, name) == 0) {
                                *ret_vaddr = sym.st_value;
                                r = 0;
                                break;
                        }
                }
        }
        elf_end(e);
        return r;
}
