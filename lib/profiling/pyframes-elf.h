/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The one thing the CPython frames need from an interpreter's ELF file:
 * where an exported symbol (_PyRuntime) is. */

#include <stddef.h>
#include <stdint.h>

/* The virtual address of the defined symbol name in the ELF image
 * data[0..size) (.dynsym or .symtab). -ENOENT when there is none,
 * -ENOEXEC when the bytes are not ELF. */
int py_elf_symbol(const uint8_t *data, size_t size, const char *name, uint64_t *ret_vaddr);
