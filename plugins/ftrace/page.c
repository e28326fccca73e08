/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "page-walk.h"

int page_parse(const uint8_t *page, size_t page_size, page_record_fn fn, void *userdata, struct page_info *ret_info) {
        return page_walk(page, page_size, 0, SIZE_MAX, fn, userdata, ret_info);
}

int page_parse_range(const uint8_t *page, size_t page_size, size_t from, size_t to, page_record_fn fn, void *userdata,
                     struct page_info *ret_info) {
        return page_walk(page, page_size, from, to, fn, userdata, ret_info);
}
