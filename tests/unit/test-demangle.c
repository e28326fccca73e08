/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl's demangling: C++ (Itanium ABI) and Rust (legacy and v0) names
 * as c++filt shows them; C names and what does not demangle left alone. */

#include <criterion/criterion.h>
#include <stdlib.h>

#include "tools/tracectl/demangle.h"

static void expect(const char *mangled, const char *want) {
        char *d = demangle(mangled);
        if (!want) {
                cr_expect_null(d, "%s demangled to %s", mangled, d);
                free(d);
                return;
        }
        cr_assert_not_null(d, "%s did not demangle", mangled);
        cr_expect_str_eq(d, want);
        free(d);
}

Test(demangle, cpp_names_with_their_parameters) {
        expect("_ZN6traced4demo6Burner3runEd", "traced::demo::Burner::run(double)");
        expect("_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)");
        expect("_ZN4llvm3sys2fs6statusERKNS_5TwineERNS1_11file_statusEb",
               "llvm::sys::fs::status(llvm::Twine const&, llvm::sys::fs::file_status&, bool)");
        /* Compiler clones keep their suffix. */
        expect("_Z3fooi.cold", "foo(int) [clone .cold]");
}

Test(demangle, rust_legacy_and_v0) {
        expect("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write");
        expect("_RNvNtCs5GcW0ZNbygE_6traced4demo9rust_spin", "traced::demo::rust_spin");
}

Test(demangle, other_names_stay) {
        expect("main", NULL);
        expect("__libc_start_main", NULL);
        expect("_start", NULL);
        expect("_Z", NULL);
        expect("_Zgarbage", NULL);
        expect("", NULL);
        cr_expect_null(demangle(NULL));
}
