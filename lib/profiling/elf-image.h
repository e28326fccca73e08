/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* ELF files of profiled processes, read with elfutils (libelf, libdw's
 * dwelf): build ids, function symbols (.symtab, else .dynsym, plus those of
 * a separate debug file found by build id under /usr/lib/debug/.build-id or
 * by .gnu_debuglink), the address translation between a mapping and the
 * file's virtual addresses, and where the unwind tables are.
 *
 * Ownership: a struct elf_cache owns every struct elf_image it hands out;
 * an image and the pointers it returns stay valid until elf_cache_free.
 * Threading: one thread at a time per cache, except the accessors marked
 * "any thread" below which only read an image already returned. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_cache;
struct elf_image;

/* debug_dir: where separate debug files live, "/usr/lib/debug" when NULL.
 * Copied. */
int elf_cache_new(const char *debug_dir, struct elf_cache **ret);
void elf_cache_free(struct elf_cache *c);
size_t elf_cache_count(const struct elf_cache *c);

/* The image of the file open at fd (the cache takes fd, also on error).
 * dev/inode identify the file (as in /proc/PID/maps or PERF_RECORD_MMAP2);
 * when both are zero, key (e.g. the path) does. A file met before is not
 * read again. -ENOEXEC: not an ELF file (remembered too: the next call for
 * the same file answers at once, without fd); -ENOMEM. */
int elf_cache_get_fd(struct elf_cache *c, int fd, uint64_t dev, uint64_t inode, const char *key,
                     struct elf_image **ret);
/* Whether the file is known already, with its image (NULL: not ELF). */
bool elf_cache_lookup(struct elf_cache *c, uint64_t dev, uint64_t inode, const char *key, struct elf_image **ret);

/* Any thread. The GNU build id's bytes, or NULL (length 0). */
const uint8_t *elf_image_build_id(const struct elf_image *img, size_t *ret_len);
/* Any thread. The whole file, read-only (mapped). */
const uint8_t *elf_image_data(const struct elf_image *img, size_t *ret_size);

/* Any thread. Where the byte at file offset off is in the file's virtual
 * addresses (through the PT_LOAD segment holding it); false when no
 * segment holds it. */
bool elf_image_offset_to_vaddr(const struct elf_image *img, uint64_t off, uint64_t *ret_vaddr);
/* Any thread. The reverse: the file offset of virtual address vaddr. */
bool elf_image_vaddr_to_offset(const struct elf_image *img, uint64_t vaddr, uint64_t *ret_offset);
/* Any thread. p_vaddr - p_offset of the executable segment (0 for most
 * files): Mapping.load_bias. */
uint64_t elf_image_load_bias(const struct elf_image *img);

/* Any thread. The file's entry point (e_entry, a virtual address of the
 * file), or 0 when it has none. */
uint64_t elf_image_entry(const struct elf_image *img);

/* Any thread. The PT_GNU_EH_FRAME segment (.eh_frame_hdr): its virtual
 * address and file offset, false when the file has none. */
bool elf_image_eh_frame_hdr(const struct elf_image *img, uint64_t *ret_vaddr, uint64_t *ret_offset,
                            uint64_t *ret_size);

/* The file's call frame information in compact rows (profiling/cfi-rows.h),
 * made on first use (same thread as the cache); NULL when the file has
 * none or memory is short. */
struct cfi_rows *elf_image_cfi_rows(struct elf_image *img);

/* The function holding vaddr (a virtual address of the file), and vaddr's
 * offset in it; NULL when no symbol covers it. Symbols are read on first
 * use (that part touches the cache: same thread as the cache). */
const char *elf_image_symbolize(struct elf_cache *c, struct elf_image *img, uint64_t vaddr, uint64_t *ret_offset);
/* How many function symbols were found (reading them if needed). */
size_t elf_image_symbol_count(struct elf_cache *c, struct elf_image *img);
/* The separate debug file symbols came from, or NULL. */
const char *elf_image_debug_file(const struct elf_image *img);
