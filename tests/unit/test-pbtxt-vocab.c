/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * TraceConfig text configs against protoc: each config is parsed by lib/pbtxt
 * and packed by protobuf-c, encoded by `protoc --encode` from .proto files
 * (ours, or upstream's from $PERFETTO_SRC_DIR), and the bytes must be equal.
 * What pbtxt_print makes of the parsed config (tracectl record --dry-run)
 * must parse back to the same bytes.
 */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "pbtxt/pbtxt.h"
#include "test-scratch.h"

#include "perfetto/config/trace_config.pb-c.h"

extern char **environ;

struct blob {
        uint8_t *data;
        size_t len;
};

static void blob_free(struct blob *b) {
        free(b->data);
        *b = (struct blob) {};
}

static int read_fd(int fd, struct blob *ret) {
        off_t end = lseek(fd, 0, SEEK_END);
        if (end < 0)
                return -errno;
        ret->data = malloc((size_t) end + 1);
        ret->len = (size_t) end;
        if (!ret->data)
                return -ENOMEM;
        if (pread(fd, ret->data, ret->len, 0) != (ssize_t) ret->len)
                return -EIO;
        return 0;
}

static const char *protoc_path(void) {
        const char *p = getenv("PROTOC");
        return p && *p ? p : "protoc";
}

/* protoc --encode=perfetto.protos.TraceConfig -IINCLUDE PROTO < cfg: 0 and
 * the bytes, or 1 when protoc refused the config. */
static int protoc_encode(const char *include, const char *proto, const char *cfg, struct blob *ret) {
        int in = open(cfg, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(in, 0, "%s: %s", cfg, strerror(errno));
        int out = test_tmpfile();
        cr_assert_geq(out, 0);
        int err = test_tmpfile();
        cr_assert_geq(err, 0);

        char inc[4096];
        snprintf(inc, sizeof(inc), "-I%s", include);
        char *argv[] = { (char *) protoc_path(), inc, (char *) "--encode=perfetto.protos.TraceConfig",
                         (char *) proto, NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in, 0);
        posix_spawn_file_actions_adddup2(&fa, out, 1);
        posix_spawn_file_actions_adddup2(&fa, err, 2);
        pid_t pid;
        int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(r, 0, "cannot run %s: %s (Debian: apt-get install protobuf-compiler)", argv[0], strerror(r));
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "protoc died");
        close(in);
        if (WEXITSTATUS(status) != 0) {
                struct blob e = {};
                cr_assert_eq(read_fd(err, &e), 0);
                cr_log_info("protoc refuses %s: %.*s", cfg, (int) e.len, (const char *) e.data);
                blob_free(&e);
                close(out);
                close(err);
                return 1;
        }
        cr_assert_eq(read_fd(out, ret), 0);
        close(out);
        close(err);
        return 0;
}

static int pack(const ProtobufCMessage *m, struct blob *ret) {
        ret->len = protobuf_c_message_get_packed_size(m);
        ret->data = malloc(ret->len + 1);
        if (!ret->data)
                return -ENOMEM;
        protobuf_c_message_pack(m, ret->data);
        return 0;
}

/* lib/pbtxt's encoding of text: 0, or -EINVAL with *ret_error set. */
static int pbtxt_encode(const char *text, size_t len, const char *name, struct blob *ret, char **ret_error) {
        ProtobufCMessage *m = NULL;
        int r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, name, &m, ret_error);
        if (r < 0)
                return r;
        r = pack(m, ret);
        protobuf_c_message_free_unpacked(m, NULL);
        return r;
}

/* Parses cfg, checks the printed form parses to the same bytes; returns
 * the bytes, or -EINVAL with the parser's message. */
static int ours_encode(const char *cfg, struct blob *ret, char **ret_error) {
        FILE *f = fopen(cfg, "re");
        cr_assert_not_null(f, "%s: %s", cfg, strerror(errno));
        struct blob text = {};
        cr_assert_eq(read_fd(fileno(f), &text), 0);
        fclose(f);
        int r = pbtxt_encode((const char *) text.data, text.len, cfg, ret, ret_error);
        blob_free(&text);
        if (r < 0)
                return r;

        ProtobufCMessage *m = protobuf_c_message_unpack(&perfetto__protos__trace_config__descriptor, NULL, ret->len,
                                                        ret->data);
        cr_assert_not_null(m);
        char *printed = NULL;
        size_t printed_len = 0;
        FILE *mf = open_memstream(&printed, &printed_len);
        cr_assert_not_null(mf);
        pbtxt_print(mf, m, 0);
        cr_assert_eq(fclose(mf), 0);
        protobuf_c_message_free_unpacked(m, NULL);

        struct blob again = {};
        char *err = NULL;
        cr_assert_eq(pbtxt_encode(printed, printed_len, "<printed>", &again, &err), 0, "%s: printed form: %s", cfg,
                     err ? err : "?");
        cr_assert(again.len == ret->len && memcmp(again.data, ret->data, ret->len) == 0,
                  "%s: the printed config encodes differently (%zu bytes, not %zu)", cfg, again.len, ret->len);
        blob_free(&again);
        free(printed);
        return 0;
}

static size_t first_difference(const struct blob *a, const struct blob *b) {
        size_t i = 0;
        while (i < a->len && i < b->len && a->data[i] == b->data[i])
                i++;
        return i;
}

enum outcome { SAME, BOTH_REFUSE, DIFFERENT };

static enum outcome compare_one(const char *include, const char *proto, const char *cfg) {
        struct blob want = {}, got = {};
        _cleanup_free_ char *err = NULL;
        int refused = protoc_encode(include, proto, cfg, &want);
        int r = ours_encode(cfg, &got, &err);
        enum outcome o;
        if (refused) {
                if (r == 0)
                        cr_log_error("%s: protoc refuses it, lib/pbtxt accepts it", cfg);
                o = r == 0 ? DIFFERENT : BOTH_REFUSE;
        } else if (r < 0) {
                cr_log_error("%s", err ? err : "parse error");
                o = DIFFERENT;
        } else if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0) {
                cr_log_error("%s: %zu bytes, protoc %zu, first difference at offset %zu", cfg, got.len, want.len,
                             first_difference(&got, &want));
                o = DIFFERENT;
        } else
                o = SAME;
        blob_free(&want);
        blob_free(&got);
        return o;
}

static int compare_dir(const char *include, const char *proto, const char *dir, unsigned counts[3]) {
        struct dirent **names;
        int n = scandir(dir, &names, NULL, alphasort);
        cr_assert_geq(n, 0, "%s: %s", dir, strerror(errno));
        for (int i = 0; i < n; i++) {
                size_t l = strlen(names[i]->d_name);
                if (l > 4 && strcmp(names[i]->d_name + l - 4, ".cfg") == 0) {
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                        counts[compare_one(include, proto, path)]++;
                }
                free(names[i]);
        }
        free(names);
        return 0;
}

Test(pbtxt_vocab, our_configs_encode_as_protoc_does) {
        const char *src = getenv("TOP_SRCDIR");
        char include[4096], dir[4096];
        snprintf(include, sizeof(include), "%s/protos", src ? src : ".");
        snprintf(dir, sizeof(dir), "%s/tests/data/configs", src ? src : ".");
        unsigned counts[3] = {};
        compare_dir(include, "perfetto/config/trace_config.proto", dir, counts);
        cr_assert_geq(counts[SAME], 3, "only %u configs encoded", counts[SAME]);
        cr_assert_eq(counts[DIFFERENT], 0, "%u configs encode differently (see above)", counts[DIFFERENT]);
        cr_assert_eq(counts[BOTH_REFUSE], 0);
}

Test(pbtxt_vocab, upstream_test_configs_encode_as_upstream_protoc_does) {
        const char *src = getenv("PERFETTO_SRC_DIR");
        if (!src || !*src) {
                printf("pbtxt_vocab: PERFETTO_SRC_DIR is not set (an upstream Perfetto source tree): "
                       "upstream's test/configs not compared\n");
                cr_skip_test("PERFETTO_SRC_DIR is not set");
        }
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/test/configs", src);
        unsigned counts[3] = {};
        compare_dir(src, "protos/perfetto/config/trace_config.proto", dir, counts);
        printf("pbtxt_vocab: %s: %u configs encode as upstream's protoc does, %u refused by both, %u differ\n", dir,
               counts[SAME], counts[BOTH_REFUSE], counts[DIFFERENT]);
        cr_assert_gt(counts[SAME], 0, "no config in %s", dir);
        cr_assert_eq(counts[DIFFERENT], 0, "%u of upstream's configs encode differently (see above)",
                     counts[DIFFERENT]);
}
