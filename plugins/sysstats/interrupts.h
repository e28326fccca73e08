/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * linux.system_info's InterruptInfo message (with SystemInfoConfig's
 * irq_names): one InterruptMapping per numbered line of /proc/interrupts,
 * its number and the name the kernel gives the line's handler. A line is
 * "N:", a count per CPU of the header line, the interrupt chip and its
 * details, often a trigger word ("Level", "Edge", "...-edge",
 * "...-fasteoi", "...-level"), then the name. The name is every word after
 * the last trigger word, joined by single spaces; with no trigger word,
 * the last word. Lines whose number is not a number (NMI, LOC, ...) and
 * lines too short to hold a name after the chip are skipped.
 */

#include <stddef.h>

#include "traced/pbzero/perfetto/trace/system_info/interrupt_info.pbw.h"

/* Appends InterruptInfo.irq_mapping for the /proc/interrupts text (len
 * bytes) to out. Returns the number of mappings, or -ENOMEM. */
int interrupts_write(const char *text, size_t len, InterruptInfo *out);
