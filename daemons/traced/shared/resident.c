/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "pbtxt/pbtxt.h"
#include "shared/resident.h"

#include "perfetto/config/trace_config.pb-c.h"

static bool valid_name(const char *s, size_t n) {
        if (n == 0 || n > RESIDENT_NAME_MAX || s[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", s[i]) || !s[i])
                        return false;
        return true;
}

/* "PATH:LINE:COL: why (field NAME)", at where field (0: nowhere) of msg
 * was written. */
_printf_(5, 6) static int refuse(char **ret_error, const char *path, const struct pbtxt_positions *pos,
                                 const ProtobufCMessage *msg, const char *fmt, ...) {
        const char *field = NULL;
        unsigned line = 0, col = 0;
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        /* The field is named after the message: "why (field f)". */
        const char *open = strstr(why, "(field ");
        if (open && msg) {
                char name[64];
                if (sscanf(open, "(field %63[a-z_])", name) == 1) {
                        const ProtobufCFieldDescriptor *f =
                                protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, name);
                        if (f && pbtxt_position_find(pos, msg, f->id, &line, &col))
                                field = name;
                }
        }
        int r = field ? asprintf(ret_error, "%s:%u:%u: %s", path, line, col, why)
                      : asprintf(ret_error, "%s: %s", path, why);
        if (r < 0)
                *ret_error = NULL;
        return -EINVAL;
}

int resident_parse(const char *name, const char *path, const char *text, size_t len, struct resident_config *ret,
                   char **ret_error) {
        _cleanup_(pbtxt_positions_done) struct pbtxt_positions pos = {};
        ProtobufCMessage *m = NULL;
        *ret_error = NULL;

        if (!valid_name(name, strlen(name)))
                return refuse(ret_error, path, NULL, NULL,
                              "\"%s\" is not a session name ([A-Za-z0-9_.-], at most %u bytes)", name,
                              RESIDENT_NAME_MAX);
        int r = pbtxt_parse_positions(&perfetto__protos__trace_config__descriptor, text, len, path, &m, ret_error,
                                      &pos);
        if (r < 0)
                return r;
        Perfetto__Protos__TraceConfig *cfg = (Perfetto__Protos__TraceConfig *) m;
        const ProtobufCMessage *b = &cfg->base;
        if (cfg->unique_session_name && strcmp(cfg->unique_session_name, name) != 0)
                r = refuse(ret_error, path, &pos, b,
                           "unique_session_name \"%s\" is not the file's name \"%s\" (field unique_session_name)",
                           cfg->unique_session_name, name);
        else if (cfg->n_buffers == 0)
                r = refuse(ret_error, path, &pos, b, "a resident session needs a buffer (field buffers)");
        else if (cfg->n_data_sources == 0)
                r = refuse(ret_error, path, &pos, b, "a resident session needs data sources (field data_sources)");
        else if (cfg->has_duration_ms && cfg->duration_ms > 0)
                r = refuse(ret_error, path, &pos, b,
                           "a resident session runs until its file is removed: no duration (field duration_ms)");
        else if (cfg->has_write_into_file && cfg->write_into_file && (!cfg->output_path || !cfg->output_path[0]))
                r = refuse(ret_error, path, &pos, b,
                           "write_into_file needs output_path in the trace directory: nobody passes a file to a "
                           "resident session (field write_into_file)");
        else if (cfg->has_write_into_file && cfg->write_into_file &&
                 cfg->output_path[strlen(cfg->output_path) - 1] != '/')
                r = refuse(ret_error, path, &pos, b,
                           "a resident session writes into a directory of the trace directory (output_path ending in "
                           "\"/\", with traced_rotation): a single file would be cut short at each restart "
                           "(field output_path)");
        else if (cfg->has_deferred_start && cfg->deferred_start)
                r = refuse(ret_error, path, &pos, b,
                           "nobody starts a resident session: no deferred_start (field deferred_start)");
        if (r < 0) {
                protobuf_c_message_free_unpacked(m, NULL);
                return r;
        }

        /* The session is known by its file's name. */
        char *old = cfg->unique_session_name;
        cfg->unique_session_name = (char *) name;
        size_t size = protobuf_c_message_get_packed_size(m);
        uint8_t *bytes = malloc(size ? size : 1);
        if (bytes)
                protobuf_c_message_pack(m, bytes);
        cfg->unique_session_name = old;
        protobuf_c_message_free_unpacked(m, NULL);
        *ret = (struct resident_config) { .name = strdup(name), .path = strdup(path), .config = bytes, .size = size };
        if (!ret->name || !ret->path || !bytes) {
                free(ret->name);
                free(ret->path);
                free(bytes);
                *ret = (struct resident_config) {};
                return -ENOMEM;
        }
        return 0;
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static int cmp_config(const void *a, const void *b) {
        return strcmp(((const struct resident_config *) a)->name, ((const struct resident_config *) b)->name);
}

static void report(resident_error_fn on_error, void *userdata, const char *fmt, ...) _printf_(3, 4);
static void report(resident_error_fn on_error, void *userdata, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (on_error)
                on_error(msg, userdata);
}

/* The text of the file name below dfd: a regular file, at most
 * RESIDENT_MAX_FILE_SIZE bytes. */
static int read_text(int dfd, const char *name, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (st.st_size > (off_t) RESIDENT_MAX_FILE_SIZE)
                return -EFBIG;
        char *buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size + 1 - n);
                if (k < 0) {
                        free(buf);
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > (size_t) st.st_size) {
                        free(buf);
                        return -EFBIG; /* grew while read */
                }
        }
        buf[n] = '\0';
        *ret = buf;
        *ret_len = n;
        return 0;
}

int resident_load_dir(const char *dir, struct resident_set *ret, resident_error_fn on_error, void *userdata) {
        struct resident_set set = {};
        int bad = 0;

        *ret = set;
        _cleanup_(closedirp) DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                size_t n = strlen(de->d_name);
                if (n <= 4 || strcmp(de->d_name + n - 4, ".cfg") != 0 || de->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *path = NULL, *name = strndup(de->d_name, n - 4);
                _cleanup_free_ char *text = NULL, *error = NULL;
                size_t len = 0;
                if (!name || asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
                        path = NULL;
                        resident_set_done(&set);
                        return -ENOMEM;
                }
                if (set.n == RESIDENT_MAX_SESSIONS) {
                        report(on_error, userdata, "%s: more than %u resident sessions, skipped", path,
                               RESIDENT_MAX_SESSIONS);
                        bad++;
                        continue;
                }
                int r = read_text(dirfd(d), de->d_name, &text, &len);
                if (r < 0) {
                        report(on_error, userdata, "%s: %s, skipped", path,
                               r == -EFBIG    ? "larger than 1 MiB"
                               : r == -EBADFD ? "not a regular file"
                                              : strerror(-r));
                        bad++;
                        continue;
                }
                struct resident_config c;
                r = resident_parse(name, path, text, len, &c, &error);
                if (r == -ENOMEM) {
                        resident_set_done(&set);
                        return r;
                }
                if (r < 0) {
                        report(on_error, userdata, "%s; skipped", error ? error : path);
                        bad++;
                        continue;
                }
                struct resident_config *v = realloc(set.v, (set.n + 1) * sizeof(*v));
                if (!v) {
                        free(c.name);
                        free(c.path);
                        free(c.config);
                        resident_set_done(&set);
                        return -ENOMEM;
                }
                set.v = v;
                set.v[set.n++] = c;
        }
        if (errno) {
                int r = -errno;
                resident_set_done(&set);
                return r;
        }
        if (set.n)
                qsort(set.v, set.n, sizeof(*set.v), cmp_config);
        *ret = set;
        return bad;
}

/* The memfd: for each session, three records (name, path, packed
 * config), each a 32-bit little-endian length and its bytes. */
static int put(int fd, const void *p, size_t n) {
        uint8_t h[4] = { (uint8_t) n, (uint8_t) (n >> 8), (uint8_t) (n >> 16), (uint8_t) (n >> 24) };
        if (n > UINT32_MAX || write(fd, h, 4) != 4 || (n && write(fd, p, n) != (ssize_t) n))
                return -EIO;
        return 0;
}

int resident_set_to_memfd(const struct resident_set *set, int *ret_fd) {
        _cleanup_close_ int fd = memfd_create("traced-resident", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        for (size_t i = 0; i < set->n; i++) {
                const struct resident_config *c = &set->v[i];
                if (put(fd, c->name, strlen(c->name)) < 0 || put(fd, c->path, strlen(c->path)) < 0 ||
                    put(fd, c->config, c->size) < 0)
                        return -EIO;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int get(const uint8_t *p, size_t len, size_t *off, bool text, uint8_t **ret, size_t *ret_len) {
        if (len - *off < 4)
                return -EBADMSG;
        size_t n = (size_t) p[*off] | (size_t) p[*off + 1] << 8 | (size_t) p[*off + 2] << 16 |
                   (size_t) p[*off + 3] << 24;
        *off += 4;
        if (len - *off < n || (text && memchr(p + *off, '\0', n)))
                return -EBADMSG;
        uint8_t *v = malloc(n + 1);
        if (!v)
                return -ENOMEM;
        memcpy(v, p + *off, n);
        v[n] = '\0';
        *off += n;
        *ret = v;
        if (ret_len)
                *ret_len = n;
        return 0;
}

int resident_set_from_fd(int fd, struct resident_set *ret) {
        struct resident_set set = {};
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size > (off_t) (RESIDENT_MAX_SESSIONS * (RESIDENT_MAX_FILE_SIZE + 8192)))
                return -EBADMSG;
        size_t len = (size_t) st.st_size;
        if (len == 0) {
                *ret = set;
                return 0;
        }
        uint8_t *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        int r = 0;
        for (size_t off = 0; off < len;) {
                struct resident_config c = {};
                if (set.n == RESIDENT_MAX_SESSIONS) {
                        r = -EBADMSG;
                        break;
                }
                r = get(p, len, &off, true, (uint8_t **) &c.name, NULL);
                if (r >= 0)
                        r = get(p, len, &off, true, (uint8_t **) &c.path, NULL);
                if (r >= 0)
                        r = get(p, len, &off, false, &c.config, &c.size);
                if (r >= 0 && !valid_name(c.name, strlen(c.name)))
                        r = -EBADMSG;
                struct resident_config *v = r >= 0 ? realloc(set.v, (set.n + 1) * sizeof(*v)) : NULL;
                if (r >= 0 && !v)
                        r = -ENOMEM;
                if (r < 0) {
                        free(c.name);
                        free(c.path);
                        free(c.config);
                        break;
                }
                set.v = v;
                set.v[set.n++] = c;
        }
        munmap(p, len);
        if (r < 0) {
                resident_set_done(&set);
                return r;
        }
        *ret = set;
        return 0;
}

void resident_set_done(struct resident_set *set) {
        for (size_t i = 0; i < set->n; i++) {
                free(set->v[i].name);
                free(set->v[i].path);
                free(set->v[i].config);
        }
        free(set->v);
        *set = (struct resident_set) {};
}
