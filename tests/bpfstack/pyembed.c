/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program embedding CPython through libpython (the interpreter a shared
 * library, not the executable): runs its arguments as python3 would. */

#include <Python.h>

int main(int argc, char **argv) {
        return Py_BytesMain(argc, argv);
}
