/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Where the tests put their scratch files and directories, and their
 * removal when a test ends.
 *
 * make check runs every test through tests/run-test.sh, which gives the
 * test a directory of its own in TRACED_TEST_TMPDIR and fails it when
 * anything is left there afterwards. Run by hand, a test uses /tmp.
 */

#include <stdbool.h>
#include <stddef.h>

/* $TRACED_TEST_TMPDIR when set (and absolute), else /tmp. */
const char *test_tmp_dir(void);

/* mkdtemp(3) of test_tmp_dir()/<prefix>XXXXXX; its path into buf.
 * Returns 0 or a negative errno. */
int test_mkdtemp(char *buf, size_t size, const char *prefix);

/* A file of no name in test_tmp_dir() (O_TMPFILE, or one unlinked at
 * once where the file system has no O_TMPFILE): for a child's output read
 * back through the descriptor. Returns the fd (O_CLOEXEC) or a negative
 * errno. */
int test_tmpfile(void);

/*
 * Removes path and everything under it. A symbolic link is removed, never
 * followed; a directory of another file system (something mounted there)
 * is neither entered nor removed (-EXDEV). A path that does not exist is
 * no error. Goes on past errors; returns 0 or the first negative errno.
 */
int rm_rf(const char *path);

/* TRACED_TEST_KEEP=1: a test keeps its scratch entries (to read the logs
 * of a failed test) and names them on stderr. */
bool test_keep_scratch(void);

/* rm_rf(path), or with TRACED_TEST_KEEP=1 a line naming what is kept.
 * Nothing for NULL or "". Returns what rm_rf returned (or 0). */
int test_scratch_remove(const char *path);
