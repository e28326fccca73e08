/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Function names as a person reads them. The profilers write symbol names
 * into the trace as the ELF symbol tables hold them (mangled, as upstream
 * traced_perf does; trace_processor demangles when it shows them), and
 * tracectl demangles them when it reports: C++ names of the Itanium ABI
 * (_Z...) and Rust names, legacy (_ZN...17h<hash>E) and v0 (_R...), with
 * libiberty's demangler, the one binutils and perf use. */

/* The demangled form of name, malloc'd; NULL when name is not a mangled
 * C++ or Rust name the demangler understands (or memory ran out): the
 * caller keeps name as it is. */
char *demangle(const char *name);
