/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/prefault.h"

#define TABLE_PAGES 1024u

static long minor_faults(void) {
        struct rusage ru;
        cr_assert_eq(getrusage(RUSAGE_THREAD, &ru), 0);
        return ru.ru_minflt;
}

/* Reads a word of every page of the table, then writes it, as a hash
 * table's lookups and inserts do: the faults this took. */
static long faults_of_read_then_write(volatile uint64_t *t, size_t pages) {
        size_t step = (size_t) sysconf(_SC_PAGESIZE) / sizeof(*t);
        uint64_t sum = 0;
        long before = minor_faults();
        for (size_t k = 0; k < pages; k++)
                sum += t[k * step + 3];
        for (size_t k = 0; k < pages; k++)
                t[k * step + 3] = sum + k;
        return minor_faults() - before;
}

Test(basic_prefault, a_prefaulted_table_takes_no_fault_a_page_where_a_plain_one_takes_two) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE), size = TABLE_PAGES * page;
        uint64_t *plain = calloc(1, size);
        cr_assert_not_null(plain);
        long plain_faults = faults_of_read_then_write(plain, TABLE_PAGES);
        free(plain);
        /* The comparison is what shows the helper works: a plain table
         * faults on (nearly) every page, twice. */
        cr_assert_geq(plain_faults, (long) TABLE_PAGES, "a plain calloc table took only %ld faults", plain_faults);

        uint64_t *t = calloc(1, size);
        cr_assert_not_null(t);
        int r = prefault_write(t, size);
        if (r == -EINVAL) {
                cr_log_info("this kernel has no MADV_POPULATE_WRITE (Linux 5.14): nothing to check");
                free(t);
                return;
        }
        cr_assert_eq(r, 0, "prefault_write: %s", strerror(-r));
        long faults = faults_of_read_then_write(t, TABLE_PAGES);
        cr_assert_lt(faults, (long) TABLE_PAGES / 8, "the prefaulted table took %ld faults in %u pages", faults,
                     TABLE_PAGES);
        free(t);
}

Test(basic_prefault, calloc_prefaulted_gives_zeroed_memory_and_keeps_errno) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        errno = 1234;
        unsigned char *t = calloc_prefaulted(TABLE_PAGES, page);
        cr_assert_not_null(t);
        cr_assert_eq(errno, 1234);
        for (size_t k = 0; k < (size_t) TABLE_PAGES * page; k++)
                if (t[k] != 0)
                        cr_assert_fail("byte %zu is %u", k, t[k]);
        free(t);
}

Test(basic_prefault, contents_stay_and_ranges_without_a_whole_page_are_left_alone) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        unsigned char *b = malloc(4 * page);
        cr_assert_not_null(b);
        for (size_t k = 0; k < 4 * page; k++)
                b[k] = (unsigned char) (k * 7);
        cr_assert_eq(prefault_write(b, 4 * page), 0);
        cr_assert_eq(prefault_write(b + 1, page - 2), 0); /* inside one page */
        cr_assert_eq(prefault_write(b, 0), 0);
        for (size_t k = 0; k < 4 * page; k++)
                if (b[k] != (unsigned char) (k * 7))
                        cr_assert_fail("byte %zu changed", k);
        free(b);
}
