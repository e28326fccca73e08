/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The field numbers of pprof's profile.proto (package
 * perftools.profiles), the one place they are written down. The writer
 * (pprof-writer.c, report-pprof.c) uses these names only; when typed
 * writers generated from a .proto reach main, this header is what they
 * replace. Rules the format sets, and the writer keeps: string_table[0] is
 * "", every id (mapping, location, function) is non-zero and unique, each
 * sample has one value per sample_type, a location's lines run from the
 * innermost (inlined) function outwards. */

enum pprof_profile_field {
        PPROF_PROFILE_SAMPLE_TYPE = 1,          /* repeated ValueType */
        PPROF_PROFILE_SAMPLE = 2,               /* repeated Sample */
        PPROF_PROFILE_MAPPING = 3,              /* repeated Mapping */
        PPROF_PROFILE_LOCATION = 4,             /* repeated Location */
        PPROF_PROFILE_FUNCTION = 5,             /* repeated Function */
        PPROF_PROFILE_STRING_TABLE = 6,         /* repeated string */
        PPROF_PROFILE_DROP_FRAMES = 7,          /* int64, string index */
        PPROF_PROFILE_KEEP_FRAMES = 8,          /* int64, string index */
        PPROF_PROFILE_TIME_NANOS = 9,           /* int64 */
        PPROF_PROFILE_DURATION_NANOS = 10,      /* int64 */
        PPROF_PROFILE_PERIOD_TYPE = 11,         /* ValueType */
        PPROF_PROFILE_PERIOD = 12,              /* int64 */
        PPROF_PROFILE_COMMENT = 13,             /* repeated int64, string indices */
        PPROF_PROFILE_DEFAULT_SAMPLE_TYPE = 14, /* int64, string index */
};

enum pprof_value_type_field {
        PPROF_VALUE_TYPE_TYPE = 1, /* int64, string index */
        PPROF_VALUE_TYPE_UNIT = 2, /* int64, string index */
};

enum pprof_sample_field {
        PPROF_SAMPLE_LOCATION_ID = 1, /* repeated uint64, leaf first */
        PPROF_SAMPLE_VALUE = 2,       /* repeated int64 */
        PPROF_SAMPLE_LABEL = 3,       /* repeated Label */
};

enum pprof_label_field {
        PPROF_LABEL_KEY = 1,      /* int64, string index */
        PPROF_LABEL_STR = 2,      /* int64, string index */
        PPROF_LABEL_NUM = 3,      /* int64 */
        PPROF_LABEL_NUM_UNIT = 4, /* int64, string index */
};

enum pprof_mapping_field {
        PPROF_MAPPING_ID = 1,                 /* uint64 */
        PPROF_MAPPING_MEMORY_START = 2,       /* uint64 */
        PPROF_MAPPING_MEMORY_LIMIT = 3,       /* uint64 */
        PPROF_MAPPING_FILE_OFFSET = 4,        /* uint64 */
        PPROF_MAPPING_FILENAME = 5,           /* int64, string index */
        PPROF_MAPPING_BUILD_ID = 6,           /* int64, string index */
        PPROF_MAPPING_HAS_FUNCTIONS = 7,      /* bool */
        PPROF_MAPPING_HAS_FILENAMES = 8,      /* bool */
        PPROF_MAPPING_HAS_LINE_NUMBERS = 9,   /* bool */
        PPROF_MAPPING_HAS_INLINE_FRAMES = 10, /* bool */
};

enum pprof_location_field {
        PPROF_LOCATION_ID = 1,         /* uint64 */
        PPROF_LOCATION_MAPPING_ID = 2, /* uint64 */
        PPROF_LOCATION_ADDRESS = 3,    /* uint64 */
        PPROF_LOCATION_LINE = 4,       /* repeated Line */
        PPROF_LOCATION_IS_FOLDED = 5,  /* bool */
};

enum pprof_line_field {
        PPROF_LINE_FUNCTION_ID = 1, /* uint64 */
        PPROF_LINE_LINE = 2,        /* int64 */
        PPROF_LINE_COLUMN = 3,      /* int64 */
};

enum pprof_function_field {
        PPROF_FUNCTION_ID = 1,          /* uint64 */
        PPROF_FUNCTION_NAME = 2,        /* int64, string index */
        PPROF_FUNCTION_SYSTEM_NAME = 3, /* int64, string index */
        PPROF_FUNCTION_FILENAME = 4,    /* int64, string index */
        PPROF_FUNCTION_START_LINE = 5,  /* int64 */
};
