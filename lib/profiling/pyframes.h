/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * CPython's own frames, for the profilers: the layout of the interpreter's
 * structures per CPython version (where a sampler finds a thread's frame
 * list, and what a frame and a code object hold), the reading of code
 * objects out of a process's memory (qualified name, file, first line,
 * line table), the decoding of a line table, and the merge that puts the
 * Python frames in place of the interpreter's evaluation frames of a
 * native stack.
 *
 * A new CPython version is added as a row of py_layouts[] in pyframes.c:
 * every offset there is checked against the version's headers (offsetof
 * with Py_BUILD_CORE and the internal headers of libpythonX.Y-dev), and
 * py_line_of must understand its line table format.
 *
 * Library code: errors are negative errno, nothing is logged. Memory of a
 * process is read through a callback, and whatever it returns is treated
 * as untrusted (bounded lengths, checked kinds).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Offsets (bytes) into CPython's structures, x86-64. */
struct py_layout {
        unsigned major, minor;
        /* _PyRuntimeState */
        uint16_t runtime_interp_head;    /* interpreters.head */
        uint16_t runtime_tstate_current; /* gilstate.tstate_current: the GIL holder */
        /* PyInterpreterState */
        uint16_t interp_next, interp_threads_head;
        /* PyThreadState */
        uint16_t tstate_next, tstate_native_tid, tstate_cframe;
        /* _PyCFrame (one per evaluation call, on the C stack) */
        uint16_t cframe_current_frame, cframe_previous;
        /* _PyInterpreterFrame */
        uint16_t frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_owner;
        uint16_t frame_size; /* bytes to read to get all of the above */
        /* PyObject */
        uint16_t object_type; /* ob_type */
        /* PyCodeObject */
        uint16_t code_firstlineno, code_filename, code_qualname, code_linetable, code_code;
        /* co_stacksize, co_nlocalsplus (ints), and the words of a frame's
         * own fields: a frame on the thread's data stack takes
         * (nlocalsplus + stacksize + specials) words, and the frame it calls
         * starts right after (0: not known, not checked) */
        uint16_t code_stacksize, code_nlocalsplus, frame_specials;
        /* str (PyASCIIObject, PyCompactUnicodeObject) and bytes */
        uint16_t str_length, str_state, str_ascii_data, str_compact_data;
        uint16_t bytes_size, bytes_data;
};

/* The layout of CPython major.minor, or NULL when not known. */
const struct py_layout *py_layout_find(unsigned major, unsigned minor);

/* Whether path names a CPython interpreter (.../pythonX.Y, or
 * .../libpythonX.Y.so...), and its version. */
bool py_version_of_path(const char *path, unsigned *ret_major, unsigned *ret_minor);

/* The line of the instruction at code unit index unit (0: the first)
 * from a CPython 3.11 location table; firstlineno: co_firstlineno. -1
 * when the table does not cover the unit or says "no line"; -EBADMSG
 * when it is malformed. */
int py_line_of(const uint8_t *table, size_t size, int firstlineno, uint32_t unit);

/* Reads len bytes of the process at addr into buf: 0, or a negative errno. */
typedef int (*py_read_fn)(void *userdata, uint64_t addr, void *buf, size_t len);
/* n reads of len bytes each (addrs[k] into bufs[k]) in one go, for the
 * same userdata as the py_read_fn: how many of them, from the first, were
 * read whole (0..n), or a negative errno. */
typedef int (*py_readv_fn)(void *userdata, const uint64_t *addrs, void *const *bufs, size_t len, size_t n);

#define PY_NAME_MAX 512             /* bytes of a name or file kept */
#define PY_LINETABLE_MAX (1u << 16) /* bytes of a line table read */

/* What is kept of a code object. */
struct py_code {
        char *qualname, *filename;
        int firstlineno;
        uint8_t *linetable;
        size_t linetable_len;
};

/* Reads the code object at addr; code_type: the address of PyCode_Type in
 * the process, which its ob_type must be (0: not checked). -EFAULT when
 * memory could not be read, -EBADMSG when what was read is not a code
 * object of this layout (another type, not a str where one is expected,
 * lengths out of bounds), -ENOMEM. */
int py_code_read(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t addr, uint64_t code_type,
                 struct py_code *ret);
void py_code_done(struct py_code *c);

/* Reads the str object at addr as UTF-8 into buf (NUL-terminated,
 * truncated to size - 1 bytes). Compact strings only (every code object's
 * are). */
int py_str_read(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t addr, char *buf, size_t size);

/* The line of a frame of code c whose last instruction started at prev_instr
 * (the frame's prev_instr; before the first instruction, the code's first
 * line). code_addr: where c was read from. */
int py_code_line(const struct py_layout *l, const struct py_code *c, uint64_t code_addr, uint64_t prev_instr);

/* One frame of a merged stack, innermost first: native frame index, or
 * Python frame index. */
struct py_merged {
        bool python;
        uint32_t index;
};

/* Merges a native stack (n_native frames, innermost first; is_eval[k]:
 * frame k is an evaluation frame of the interpreter) with the thread's
 * Python frames (n_py, innermost first; is_entry[j]: frame j is the first
 * an evaluation call ran). The innermost evaluation frame is replaced by
 * the Python frames up to and including the first entry frame, the next
 * by the next run, and so on. Python frames left when the native stack
 * has no more evaluation frames go outermost (they are the callers), and
 * evaluation frames left when the Python frames are used up stay. Returns
 * the number of frames written to out (at most cap). */
size_t py_merge(const bool *is_eval, size_t n_native, const bool *is_entry, size_t n_py, struct py_merged *out,
                size_t cap);

/* The name of the interpreter's evaluation function, whose native frames
 * the Python frames replace. */
#define PY_EVAL_FUNCTION "_PyEval_EvalFrameDefault"
