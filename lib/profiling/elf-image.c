/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/prefault.h"
#include "profiling/cfi-rows.h"
#include "profiling/elf-image.h"

#define BUCKETS 256u
#define MAX_SEGMENTS 16
/* Bounds on what one file may cost us. */
#define MAX_FILE_SIZE (2ull << 30)
#define MAX_SYMBOLS (4u << 20)
#define MAX_BUILD_ID 64

struct segment {
        uint64_t vaddr, offset, filesz;
        bool exec;
};

struct sym {
        uint64_t addr, size;
        uint32_t name;   /* offset in the image's file when in_file, else in names */
        uint8_t in_file; /* the name is read where the file has it (see read_symtab) */
};

/* An address looked up before and the symbol found for it (index + 1; 0:
 * an empty slot). Samples return to the same few thousand addresses, in
 * process after process of the same program (a build runs cc1 thousands
 * of times): a table of some 30 000 symbols takes 15 steps of a binary
 * search, the last of them cache misses, where a memo takes one. */
struct sym_memo {
        uint64_t vaddr;
        uint32_t idx;
};
#define SYM_MEMO_SLOTS 1024u /* a power of two */
#define SYM_MEMO_MIN_SYMS 1024u /* smaller tables search fast enough */

struct elf_image {
        struct elf_image *next;
        uint64_t dev, inode;
        char *key;
        bool is_elf;
        uint8_t *data;
        size_t size;
        uint8_t build_id[MAX_BUILD_ID];
        size_t build_id_len;
        struct segment seg[MAX_SEGMENTS];
        size_t n_seg;
        uint64_t load_bias;
        bool has_eh_frame_hdr;
        uint64_t eh_vaddr, eh_offset, eh_size;
        uint64_t entry; /* e_entry, 0 when the file has none */
        char *debuglink;
        char *debug_file;
        struct cfi_rows *cfi;
        bool cfi_tried;
        bool syms_loaded;
        struct sym *syms;
        size_t n_syms, syms_cap;
        char *names;
        size_t names_len, names_cap;
        struct sym_memo *memo; /* large tables: recent lookups (SYM_MEMO_SLOTS) */
};

struct elf_cache {
        char *debug_dir;
        struct elf_image *buckets[BUCKETS];
        size_t n;
};

int elf_cache_new(const char *debug_dir, struct elf_cache **ret) {
        if (elf_version(EV_CURRENT) == EV_NONE)
                return -ENOTSUP;
        struct elf_cache *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->debug_dir = strdup(debug_dir ? debug_dir : "/usr/lib/debug");
        if (!c->debug_dir) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static void image_free(struct elf_image *img) {
        if (img->data)
                munmap(img->data, img->size);
        free(img->key);
        free(img->debuglink);
        free(img->debug_file);
        cfi_rows_free(img->cfi);
        free(img->syms);
        free(img->names);
        free(img->memo);
        free(img);
}

void elf_cache_free(struct elf_cache *c) {
        if (!c)
                return;
        for (size_t b = 0; b < BUCKETS; b++)
                for (struct elf_image *i = c->buckets[b], *next; i; i = next) {
                        next = i->next;
                        image_free(i);
                }
        free(c->debug_dir);
        free(c);
}

size_t elf_cache_count(const struct elf_cache *c) {
        return c->n;
}

static uint64_t hash_key(uint64_t dev, uint64_t inode, const char *key) {
        if (dev || inode)
                return (dev * 0x9e3779b97f4a7c15ull) ^ (inode * 0xff51afd7ed558ccdull);
        return fnv1a64_str(key ? key : "");
}

static struct elf_image **bucket(struct elf_cache *c, uint64_t dev, uint64_t inode, const char *key) {
        return &c->buckets[hash_key(dev, inode, key) % BUCKETS];
}

static bool same(const struct elf_image *i, uint64_t dev, uint64_t inode, const char *key) {
        if (dev || inode)
                return i->dev == dev && i->inode == inode;
        return !i->dev && !i->inode && strcmp(i->key, key ? key : "") == 0;
}

bool elf_cache_lookup(struct elf_cache *c, uint64_t dev, uint64_t inode, const char *key, struct elf_image **ret) {
        for (struct elf_image *i = *bucket(c, dev, inode, key); i; i = i->next)
                if (same(i, dev, inode, key)) {
                        *ret = i->is_elf ? i : NULL;
                        return true;
                }
        return false;
}

/* Reads the headers: segments, build id, debuglink. */
static void read_headers(struct elf_image *img, Elf *e) {
        GElf_Ehdr eh;
        if (gelf_getehdr(e, &eh) && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN))
                img->entry = eh.e_entry;
        size_t n;
        if (elf_getphdrnum(e, &n) == 0) {
                bool have_exec = false;
                for (size_t k = 0; k < n; k++) {
                        GElf_Phdr ph;
                        if (!gelf_getphdr(e, (int) k, &ph))
                                continue;
                        if (ph.p_type == PT_GNU_EH_FRAME) {
                                img->has_eh_frame_hdr = true;
                                img->eh_vaddr = ph.p_vaddr;
                                img->eh_offset = ph.p_offset;
                                img->eh_size = ph.p_memsz;
                        }
                        if (ph.p_type != PT_LOAD || img->n_seg == MAX_SEGMENTS)
                                continue;
                        struct segment *s = &img->seg[img->n_seg++];
                        *s = (struct segment) { .vaddr = ph.p_vaddr, .offset = ph.p_offset, .filesz = ph.p_filesz,
                                                .exec = ph.p_flags & PF_X };
                        if (s->exec && !have_exec) {
                                img->load_bias = ph.p_vaddr - ph.p_offset;
                                have_exec = true;
                        }
                }
        }
        const void *id;
        ssize_t len = dwelf_elf_gnu_build_id(e, &id);
        if (len > 0 && (size_t) len <= MAX_BUILD_ID) {
                memcpy(img->build_id, id, (size_t) len);
                img->build_id_len = (size_t) len;
        }
        GElf_Word crc;
        const char *link = dwelf_elf_gnu_debuglink(e, &crc);
        if (link && *link && !strchr(link, '/'))
                img->debuglink = strdup(link);
}

static int map_file(int fd, uint8_t **ret, size_t *ret_size) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size < (off_t) sizeof(Elf64_Ehdr) ||
            (uint64_t) st.st_size > MAX_FILE_SIZE)
                return -ENOEXEC;
        /* Private and writable: libelf may convert data in place; nothing
         * reaches the file. */
        void *p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        *ret = p;
        *ret_size = (size_t) st.st_size;
        return 0;
}

int elf_cache_get_fd(struct elf_cache *c, int fd, uint64_t dev, uint64_t inode, const char *key,
                     struct elf_image **ret) {
        _cleanup_close_ int fd_ = fd;
        if (elf_cache_lookup(c, dev, inode, key, ret))
                return *ret ? 0 : -ENOEXEC;
        struct elf_image *img = calloc(1, sizeof(*img));
        if (!img)
                return -ENOMEM;
        img->dev = dev;
        img->inode = inode;
        img->key = strdup(key ? key : "");
        if (!img->key) {
                free(img);
                return -ENOMEM;
        }
        if (map_file(fd_, &img->data, &img->size) == 0 && memcmp(img->data, ELFMAG, SELFMAG) == 0) {
                Elf *e = elf_memory((char *) img->data, img->size);
                if (e && elf_kind(e) == ELF_K_ELF) {
                        img->is_elf = true;
                        read_headers(img, e);
                }
                if (e)
                        elf_end(e);
        }
        if (!img->is_elf && img->data) {
                munmap(img->data, img->size);
                img->data = NULL;
        }
        struct elf_image **b = bucket(c, dev, inode, key);
        img->next = *b;
        *b = img;
        c->n++;
        *ret = img->is_elf ? img : NULL;
        return img->is_elf ? 0 : -ENOEXEC;
}

const uint8_t *elf_image_build_id(const struct elf_image *img, size_t *ret_len) {
        *ret_len = img->build_id_len;
        return img->build_id_len ? img->build_id : NULL;
}

const uint8_t *elf_image_data(const struct elf_image *img, size_t *ret_size) {
        *ret_size = img->size;
        return img->data;
}

bool elf_image_offset_to_vaddr(const struct elf_image *img, uint64_t off, uint64_t *ret_vaddr) {
        for (size_t k = 0; k < img->n_seg; k++) {
                const struct segment *s = &img->seg[k];
                if (off >= s->offset && off - s->offset < s->filesz) {
                        *ret_vaddr = off - s->offset + s->vaddr;
                        return true;
                }
        }
        return false;
}

bool elf_image_vaddr_to_offset(const struct elf_image *img, uint64_t vaddr, uint64_t *ret_offset) {
        for (size_t k = 0; k < img->n_seg; k++) {
                const struct segment *s = &img->seg[k];
                if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz) {
                        *ret_offset = vaddr - s->vaddr + s->offset;
                        return true;
                }
        }
        return false;
}

uint64_t elf_image_load_bias(const struct elf_image *img) {
        return img->load_bias;
}

uint64_t elf_image_entry(const struct elf_image *img) {
        return img->entry;
}

bool elf_image_eh_frame_hdr(const struct elf_image *img, uint64_t *ret_vaddr, uint64_t *ret_offset,
                            uint64_t *ret_size) {
        if (!img->has_eh_frame_hdr)
                return false;
        *ret_vaddr = img->eh_vaddr;
        *ret_offset = img->eh_offset;
        *ret_size = img->eh_size;
        return true;
}

const char *elf_image_debug_file(const struct elf_image *img) {
        return img->debug_file;
}

static int add_name(struct elf_image *img, const char *name, uint32_t *ret) {
        size_t len = strlen(name) + 1;
        if (img->names_len + len > UINT32_MAX)
                return -E2BIG;
        if (GREEDY_REALLOC_MIN(img->names, img->names_cap, img->names_len + len, 16384) < 0)
                return -ENOMEM;
        memcpy(img->names + img->names_len, name, len);
        *ret = (uint32_t) img->names_len;
        img->names_len += len;
        return 0;
}

/* The image's string table at strsh, when the names of a symbol table
 * can be read where the file has them (NULL when not): it lies whole in
 * the mapping, within the offsets a symbol keeps, and ends with a NUL, so
 * that every name inside it is terminated. */
static const char *strtab_in_file(const struct elf_image *img, const GElf_Shdr *strsh) {
        if (strsh->sh_type != SHT_STRTAB || (strsh->sh_flags & SHF_COMPRESSED) || strsh->sh_size == 0 ||
            strsh->sh_offset > img->size || strsh->sh_size > img->size - strsh->sh_offset ||
            strsh->sh_offset + strsh->sh_size > UINT32_MAX)
                return NULL;
        const char *t = (const char *) img->data + strsh->sh_offset;
        return t[strsh->sh_size - 1] == '\0' ? t : NULL;
}

/* Function symbols of one symbol table section into img. in_file: e is
 * the image's own file (img->data, kept as long as the image), whose
 * names then need no copy: a large table's string table (cc1's is some
 * 1.5 MB) was copied whole into fresh pages. A debug file's are copied. */
static int read_symtab(struct elf_image *img, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, bool in_file) {
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || sh->sh_entsize == 0)
                return 0;
        size_t n = sh->sh_size / sh->sh_entsize;
        /* Room for every entry (and every name to copy) up front: growing
         * one by one copied a large table (cc1's 29 000 dynamic symbols) a
         * dozen times over fresh pages. load_symbols gives back what is
         * not used. */
        GElf_Shdr strsh;
        Elf_Scn *strscn = elf_getscn(e, sh->sh_link);
        bool have_strsh = strscn && gelf_getshdr(strscn, &strsh);
        const char *strtab = in_file && have_strsh ? strtab_in_file(img, &strsh) : NULL;
        size_t want_syms = img->n_syms + MIN(n, (size_t) MAX_SYMBOLS - img->n_syms);
        if (GREEDY_REALLOC_MIN(img->syms, img->syms_cap, want_syms, 1024) < 0)
                return -ENOMEM;
        /* Mapped for writing at once, not a fault a page (basic/prefault.h). */
        (void) prefault_write(img->syms + img->n_syms, (img->syms_cap - img->n_syms) * sizeof(*img->syms));
        if (!strtab && have_strsh && strsh.sh_size < UINT32_MAX - img->names_len) {
                if (GREEDY_REALLOC_MIN(img->names, img->names_cap, img->names_len + strsh.sh_size, 16384) < 0)
                        return -ENOMEM;
                (void) prefault_write(img->names + img->names_len, img->names_cap - img->names_len);
        }
        /* The entries as libelf gives them (in this machine's byte order):
         * read in place when they are 64-bit ones, not through a call and
         * a copy per entry. */
        const Elf64_Sym *raw = d->d_type == ELF_T_SYM && gelf_getclass(e) == ELFCLASS64 &&
                                               d->d_size / sizeof(Elf64_Sym) >= n
                                       ? d->d_buf
                                       : NULL;
        for (size_t k = 0; k < n; k++) {
                GElf_Sym s;
                if (raw)
                        s = raw[k];
                else if (!gelf_getsym(d, (int) k, &s))
                        break;
                int type = GELF_ST_TYPE(s.st_info);
                if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_value == 0 || s.st_shndx == SHN_UNDEF)
                        continue;
                const char *name = strtab ? (s.st_name < strsh.sh_size ? strtab + s.st_name : NULL)
                                          : elf_strptr(e, sh->sh_link, s.st_name);
                if (!name || !*name)
                        continue;
                if (img->n_syms == MAX_SYMBOLS)
                        return -E2BIG;
                if (GREEDY_REALLOC_MIN(img->syms, img->syms_cap, img->n_syms + 1, 1024) < 0)
                        return -ENOMEM;
                uint32_t off = strtab ? (uint32_t) (strsh.sh_offset + s.st_name) : 0;
                if (!strtab) {
                        int r = add_name(img, name, &off);
                        if (r < 0)
                                return r;
                }
                img->syms[img->n_syms++] =
                        (struct sym) { .addr = s.st_value, .size = s.st_size, .name = off, .in_file = !!strtab };
        }
        return 0;
}

/* Reads .symtab if there is one, else .dynsym. Returns whether .symtab
 * was there. */
static bool read_symbols(struct elf_image *img, Elf *e, bool in_file) {
        Elf_Scn *scn = NULL, *dynsym = NULL;
        GElf_Shdr dynsym_sh = {};
        bool have_symtab = false;
        while ((scn = elf_nextscn(e, scn))) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh))
                        continue;
                if (sh.sh_type == SHT_SYMTAB) {
                        (void) read_symtab(img, e, scn, &sh, in_file);
                        have_symtab = true;
                } else if (sh.sh_type == SHT_DYNSYM) {
                        dynsym = scn;
                        dynsym_sh = sh;
                }
        }
        if (!have_symtab && dynsym)
                (void) read_symtab(img, e, dynsym, &dynsym_sh, in_file);
        return have_symtab;
}

static int cmp_sym(const void *a, const void *b) {
        const struct sym *x = a, *y = b;
        if (x->addr != y->addr)
                return x->addr < y->addr ? -1 : 1;
        /* At one address, the one with a size first. */
        return (y->size != 0) - (x->size != 0);
}

#define KEY_UNSIZED 8u /* radix_key: whether the symbol has no size */

/* The byte of a symbol's address (0: the lowest), or KEY_UNSIZED. */
static inline unsigned radix_key(const struct sym *s, unsigned byte) {
        return byte == KEY_UNSIZED ? s->size == 0 : (unsigned) (s->addr >> (8 * byte)) & 0xff;
}

/* One stable counting pass of a radix sort, from src into dst. */
static void radix_pass(const struct sym *src, struct sym *dst, size_t n, unsigned byte) {
        size_t count[257] = {};
        for (size_t k = 0; k < n; k++)
                count[radix_key(&src[k], byte) + 1]++;
        for (size_t b = 1; b < 257; b++)
                count[b] += count[b - 1];
        for (size_t k = 0; k < n; k++)
                dst[count[radix_key(&src[k], byte)]++] = src[k];
}

/* Sorts as cmp_sym orders, keeping the table's order among equals (as
 * glibc's qsort does when it has the memory): a radix sort, by whether a
 * symbol has no size, then by each byte of the address that is not the
 * same in all. A libc-sized table sorts in a fraction of qsort's time,
 * which calls cmp_sym through a pointer some 400 000 times for cc1's
 * 29 000 symbols. */
static void sort_syms(struct sym *syms, size_t n) {
        _cleanup_free_ struct sym *tmp = malloc(n * sizeof(*syms));
        if (!tmp) {
                qsort(syms, n, sizeof(*syms), cmp_sym);
                return;
        }
        (void) prefault_write(tmp, n * sizeof(*syms));
        uint64_t differ = 0;
        for (size_t k = 1; k < n; k++)
                differ |= syms[k].addr ^ syms[0].addr;
        struct sym *from = syms, *to = tmp, *t;
        radix_pass(from, to, n, KEY_UNSIZED);
        t = from, from = to, to = t;
        for (unsigned byte = 0; byte < 8; byte++) {
                if (!((differ >> (8 * byte)) & 0xff))
                        continue;
                radix_pass(from, to, n, byte);
                t = from, from = to, to = t;
        }
        if (from != syms)
                memcpy(syms, from, n * sizeof(*syms));
}

/* a b c d into buf; false when it does not fit. */
static bool join(char *buf, size_t size, const char *a, const char *b, const char *c, const char *d) {
        size_t la = strlen(a), lb = strlen(b), lc = strlen(c), ld = strlen(d);
        if (la + lb + lc + ld >= size)
                return false;
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        memcpy(buf + la + lb, c, lc);
        memcpy(buf + la + lb + lc, d, ld + 1);
        return true;
}

/* A separate debug file with this image's build id, or its debuglink. */
static Elf *open_debug_file(struct elf_cache *c, struct elf_image *img, uint8_t **ret_data, size_t *ret_size) {
        char path[4096];
        const char *candidates[4];
        char bufs[4][4096];
        size_t n = 0;
        if (img->build_id_len >= 2) {
                int at = snprintf(bufs[n], sizeof(bufs[n]), "%s/.build-id/%02x/", c->debug_dir, img->build_id[0]);
                for (size_t k = 1; k < img->build_id_len && at < (int) sizeof(bufs[n]) - 8; k++)
                        at += snprintf(bufs[n] + at, sizeof(bufs[n]) - (size_t) at, "%02x", img->build_id[k]);
                snprintf(bufs[n] + at, sizeof(bufs[n]) - (size_t) at, ".debug");
                candidates[n] = bufs[n];
                n++;
        }
        if (img->debuglink && img->key[0] == '/') {
                snprintf(path, sizeof(path), "%s", img->key);
                *strrchr(path, '/') = '\0';
                if (join(bufs[n], sizeof(bufs[n]), "", path, "/", img->debuglink))
                        candidates[n] = bufs[n], n++;
                if (join(bufs[n], sizeof(bufs[n]), "", path, "/.debug/", img->debuglink))
                        candidates[n] = bufs[n], n++;
                if (join(bufs[n], sizeof(bufs[n]), c->debug_dir, path, "/", img->debuglink))
                        candidates[n] = bufs[n], n++;
        }
        for (size_t k = 0; k < n; k++) {
                /* The file itself (debuglink names the same file). */
                if (strcmp(candidates[k], img->key) == 0)
                        continue;
                _cleanup_close_ int fd = open(candidates[k], O_RDONLY | O_CLOEXEC);
                uint8_t *data;
                size_t size;
                if (fd < 0 || map_file(fd, &data, &size) < 0)
                        continue;
                Elf *e = elf_memory((char *) data, size);
                const void *id;
                ssize_t len = e ? dwelf_elf_gnu_build_id(e, &id) : -1;
                /* A debug file of another build is worse than none. */
                if (e && elf_kind(e) == ELF_K_ELF &&
                    (img->build_id_len == 0 ||
                     (len == (ssize_t) img->build_id_len && memcmp(id, img->build_id, (size_t) len) == 0))) {
                        img->debug_file = strdup(candidates[k]);
                        *ret_data = data;
                        *ret_size = size;
                        return e;
                }
                if (e)
                        elf_end(e);
                munmap(data, size);
        }
        return NULL;
}

/* Gives back the room read_symtab reserved and did not use (a shrinking
 * realloc that fails leaves the block as it was). */
static void shrink(struct elf_image *img) {
        struct sym *syms = realloc(img->syms, img->n_syms * sizeof(*img->syms));
        if (syms) {
                img->syms = syms;
                img->syms_cap = img->n_syms;
        }
        char *names = img->names_len ? realloc(img->names, img->names_len) : NULL;
        if (names) {
                img->names = names;
                img->names_cap = img->names_len;
        }
}

static void load_symbols(struct elf_cache *c, struct elf_image *img) {
        img->syms_loaded = true;
        Elf *e = elf_memory((char *) img->data, img->size);
        if (!e)
                return;
        bool have_symtab = read_symbols(img, e, true);
        elf_end(e);
        if (!have_symtab) {
                uint8_t *data;
                size_t size;
                Elf *d = open_debug_file(c, img, &data, &size);
                if (d) {
                        (void) read_symbols(img, d, false);
                        elf_end(d);
                        munmap(data, size);
                }
        }
        if (img->n_syms == 0)
                return;
        shrink(img);
        sort_syms(img->syms, img->n_syms);
        /* One symbol per address (aliases: the first, sized, one). */
        size_t w = 1;
        for (size_t k = 1; k < img->n_syms; k++)
                if (img->syms[k].addr != img->syms[w - 1].addr)
                        img->syms[w++] = img->syms[k];
        img->n_syms = w;
}

size_t elf_image_symbol_count(struct elf_cache *c, struct elf_image *img) {
        if (!img->syms_loaded)
                load_symbols(c, img);
        return img->n_syms;
}

const char *elf_image_symbolize(struct elf_cache *c, struct elf_image *img, uint64_t vaddr, uint64_t *ret_offset) {
        if (!img->syms_loaded)
                load_symbols(c, img);
        if (img->n_syms == 0 || vaddr < img->syms[0].addr)
                return NULL;
        struct sym_memo *m = NULL;
        if (img->n_syms >= SYM_MEMO_MIN_SYMS && (img->memo || (img->memo = calloc(SYM_MEMO_SLOTS, sizeof(*m)))))
                m = &img->memo[(vaddr * 0x9e3779b97f4a7c15ull) >> 54];
        _Static_assert(SYM_MEMO_SLOTS == 1u << (64 - 54), "the memo's hash takes log2(SYM_MEMO_SLOTS) bits");
        size_t lo = 0, hi = img->n_syms;
        if (m && m->idx && m->vaddr == vaddr)
                lo = m->idx - 1;
        else {
                while (hi - lo > 1) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (img->syms[mid].addr <= vaddr)
                                lo = mid;
                        else
                                hi = mid;
                }
                if (m)
                        *m = (struct sym_memo) { .vaddr = vaddr, .idx = (uint32_t) lo + 1 };
        }
        const struct sym *s = &img->syms[lo];
        if (s->size && vaddr - s->addr >= s->size)
                return NULL;
        if (ret_offset)
                *ret_offset = vaddr - s->addr;
        return s->in_file ? (const char *) img->data + s->name : img->names + s->name;
}

struct cfi_rows *elf_image_cfi_rows(struct elf_image *img) {
        if (!img->cfi_tried && img->is_elf) {
                img->cfi_tried = true;
                (void) cfi_rows_new(img->data, img->size, &img->cfi);
        }
        return img->cfi;
}
