/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>

#include <libiberty/demangle.h>

#include "demangle.h"

char *demangle(const char *name) {
        /* Only what C++ and Rust compilers emit: C names stay as they are
         * (the demangler's other styles would take some for theirs). */
        if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
                return NULL;
        /* With parameter types and qualifiers, as c++filt and
         * trace_processor show them: overloads stay apart. Rust's names
         * first, then C++'s (the demangler's automatic style). */
        return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
