/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Checks of traces holding example-producer's packets (see example-payload.c). */

#include <stddef.h>
#include <stdint.h>

/* Every for_testing packet of one sequence: payload byte-exact, seq in
 * order (asserts). Returns how many there were. */
size_t example_check_packets(const uint8_t *buf, size_t len, size_t size);
/* Several sequences (trusted_packet_sequence_id, at most 64): returns how
 * many arrived whole, packets 0..n-1 of size bytes in order. */
unsigned example_check_sequences(const uint8_t *buf, size_t len, size_t size, unsigned long n);
