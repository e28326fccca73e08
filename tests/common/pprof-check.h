/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reads a gzipped pprof profile (profile.proto) back, for the tests of
 * tracectl report --pprof, and checks the format's own rules on it: the
 * string table starts with "", every string index is in it, every
 * mapping, location and function id is non-zero and unique, every id
 * referred to exists, each sample has one value per sample type, and
 * labels have a key and either a string or a number. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pp_line {
        uint64_t function_id;
        int64_t line;
};

struct pp_location {
        uint64_t id, mapping_id, address;
        struct pp_line *lines;
        size_t n_lines;
};

struct pp_function {
        uint64_t id;
        int64_t name, system_name, filename;
};

struct pp_mapping {
        uint64_t id, start, limit, offset;
        int64_t filename, build_id;
        bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct pp_label {
        int64_t key, str, num;
};

struct pp_sample {
        uint64_t *location_ids;
        size_t n_locations;
        int64_t *values;
        size_t n_values;
        struct pp_label *labels;
        size_t n_labels;
};

struct pp_profile {
        int64_t (*sample_types)[2]; /* type, unit */
        size_t n_sample_types;
        struct pp_sample *samples;
        size_t n_samples;
        struct pp_mapping *mappings;
        size_t n_mappings;
        struct pp_location *locations;
        size_t n_locations;
        struct pp_function *functions;
        size_t n_functions;
        char **strings;
        size_t n_strings;
        int64_t time_nanos, duration_nanos, period, default_sample_type;
        int64_t period_type[2];
        int64_t *comments;
        size_t n_comments;
};

/* Reads the gzipped file at path: 0, or -errno (-EBADMSG: not a profile). */
int pp_read(const char *path, struct pp_profile *ret);
void pp_free(struct pp_profile *p);
/* The format's rules: NULL when p keeps them, else what it breaks (static). */
const char *pp_check(const struct pp_profile *p);

/* Look-ups, NULL when absent. */
const char *pp_string(const struct pp_profile *p, int64_t i);
const struct pp_location *pp_location(const struct pp_profile *p, uint64_t id);
const struct pp_function *pp_function(const struct pp_profile *p, uint64_t id);
const struct pp_mapping *pp_mapping(const struct pp_profile *p, uint64_t id);
/* The column of sample type type ("samples", "cpu", ...), or -1. */
int pp_sample_type(const struct pp_profile *p, const char *type);
/* A sample's label: its string, or NULL; its number in *ret_num. */
const char *pp_label_str(const struct pp_profile *p, const struct pp_sample *s, const char *key);
bool pp_label_num(const struct pp_profile *p, const struct pp_sample *s, const char *key, int64_t *ret_num);
