/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/prefault.h"
#include "heap-session.h"

/* The slots of a session's set of live sampled allocations: twice the
 * samples a live heap of 64 GiB holds at the interval, between 64 Ki
 * (512 KiB of address space) and 1 Mi (8 MiB), touched as it fills. (At
 * 512 KiB, 8 MiB of slots had every insert land on a page of its own.) */
static uint64_t set_slots(uint64_t interval) {
        uint64_t n = 1u << 16, want = (1ull << 37) / (interval ? interval : 1);
        while (n < (1u << 20) && n < want)
                n <<= 1;
        return n;
}

struct heap_gate heap_gate = { .quiet = 0, .active = 1 };
union heap_state_area heap_state_area __attribute__((aligned(HEAP_STATE_AREA)));
static bool state_mapped;

uint32_t heap_seen_generation = UINT32_MAX;
static struct heap_session *current;
/* current's id and interval, for heap_session_peek: the id is written
 * last and read first and last (0: none). */
static uint64_t current_id, current_interval;
/* Threads inside a hook with the session: counted per shard, each thread
 * on its own (all threads on one counter made every call of a session
 * move its cache line between CPUs). */
#define USER_SHARDS 64
static struct user_shard {
        uint32_t n;
} __attribute__((aligned(64))) users[USER_SHARDS];
static uint32_t next_shard;
static __thread uint32_t my_shard; /* +1; 0: none yet */

static uint32_t users_now(void) {
        uint32_t n = 0;
        for (size_t i = 0; i < USER_SHARDS; i++)
                n += __atomic_load_n(&users[i].n, __ATOMIC_SEQ_CST);
        return n;
}
static uint64_t next_id;
static pthread_mutex_t join_lock = PTHREAD_MUTEX_INITIALIZER;
/* Room for the socket's name after it in sockaddr_un's 108 bytes. */
static char dir[96];
static uint64_t text_start, text_end;

/* Maps the state page over heap_state_area. Any file of at least a byte
 * will do: the page it is in reads whole (zeros past the end), and the
 * plugin makes it a page when it starts. systemd-tmpfiles creates it at
 * boot with a line of text (units/tmpfiles.d/traced.conf), so a process
 * started before the plugin's first session sees that session's
 * generation all the same.
 * What it holds is checked (magic, version) before acting on it. */
static int map_state(void) {
        char path[160];
        snprintf(path, sizeof(path), "%s/" HEAP_STATE_FILE, dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        long page = sysconf(_SC_PAGESIZE);
        struct stat st;
        void *m = MAP_FAILED;
        /* (Pages larger than the area, or an area the loader did not
         * align: no state page, so never a session.) */
        bool fits = page > 0 && (size_t) page <= sizeof(heap_state_area) &&
                    (uintptr_t) &heap_state_area % (size_t) page == 0;
        if (fits && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
                m = mmap(&heap_state_area, (size_t) page, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
                return -ENODATA;
        state_mapped = true;
        return 0;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *data) {
        (void) size;
        uintptr_t base = (uintptr_t) data;
        if (info->dlpi_addr != base)
                return 0;
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
                        text_start = info->dlpi_addr + ph->p_vaddr;
                        text_end = text_start + ph->p_memsz;
                }
        }
        return 1;
}

void heap_session_setup(void) {
        const char *d = secure_getenv(HEAP_DIR_ENV);
        snprintf(dir, sizeof(dir), "%s", d && d[0] == '/' ? d : HEAP_DIR_DEFAULT);
        Dl_info info;
        if (dladdr((void *) heap_session_setup, &info) && info.dli_fbase)
                dl_iterate_phdr(find_text, info.dli_fbase);
        /* With no state page, no plugin ran since boot: the hooks stay on
         * their fast path (its generation 0 is the quiet one), and a child
         * this process forks looks again. Else the first call of a hook
         * looks at the generation. */
        if (map_state() == 0)
                __atomic_store_n(&heap_gate.quiet, 1u, __ATOMIC_RELEASE);
}

static void *map_anon(size_t n) {
        void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return m == MAP_FAILED ? NULL : m;
}

static void session_free(struct heap_session *s) {
        if (s->ring_mem)
                munmap(s->ring_mem, s->ring_size);
        if (s->set_mem)
                munmap(s->set_mem, s->set_size);
        if (s->templates)
                munmap((void *) s->templates, HEAP_TEMPLATES_SIZE);
        if (s->sock >= 0)
                close(s->sock);
        munmap(s, sizeof(*s));
}

/* Takes the session away from the hooks, waits for those using it. */
static void leave(void) {
        struct heap_session *s = __atomic_exchange_n(&current, NULL, __ATOMIC_SEQ_CST);
        __atomic_store_n(&current_id, 0, __ATOMIC_RELEASE);
        if (!s)
                return;
        /* A thread counted before the exchange may hold s; one counted
         * after it sees NULL. */
        for (unsigned k = 0; users_now() > 0; k++) {
                struct timespec ts = { .tv_nsec = 50000 };
                nanosleep(&ts, NULL);
                if (k > 200000) /* 10 s: a thread stuck inside a hook; keep its memory */
                        return;
        }
        session_free(s);
}

/* A reply, and the descriptors it passed (the ring's, then the
 * templates'; -1 for each missing). */
static ssize_t recv_reply(int sock, struct heap_reply *reply, int ret_fds[2]) {
        char control[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = { .iov_base = reply, .iov_len = sizeof(*reply) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        ret_fds[0] = ret_fds[1] = -1;
        ssize_t n;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                    c->cmsg_len >= CMSG_LEN(sizeof(int)) && c->cmsg_len <= CMSG_LEN(2 * sizeof(int)))
                        memcpy(ret_fds, CMSG_DATA(c), c->cmsg_len - CMSG_LEN(0));
        return n;
}

static void close_fds(int fds[2]) {
        for (int k = 0; k < 2; k++)
                if (fds[k] >= 0)
                        close(fds[k]);
}

/* The plugin's templates for this process, read-only; NULL without them
 * (the samples then carry whole stacks). */
static const struct heap_template *map_templates(int fd) {
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != (off_t) HEAP_TEMPLATES_SIZE)
                return NULL;
        void *m = mmap(NULL, HEAP_TEMPLATES_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        return m == MAP_FAILED ? NULL : m;
}

/* Asks the plugin whether this process is targeted; a session when it is. */
static struct heap_session *join(uint32_t generation) {
        int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (sock < 0)
                return NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" HEAP_SOCKET_FILE, dir);
        struct timeval tv = { .tv_sec = 2 };
        (void) setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        struct heap_hello hello = { .magic = HEAP_WIRE_MAGIC, .version = HEAP_WIRE_VERSION, .pid = getpid(),
                                    .generation = generation, .text_start = text_start, .text_end = text_end };
        struct heap_reply reply = { 0 };
        int fds[2] = { -1, -1 }, fd = -1;
        struct heap_session *s = NULL;
        if (connect(sock, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            send(sock, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t) sizeof(hello) ||
            recv_reply(sock, &reply, fds) != (ssize_t) sizeof(reply) || reply.magic != HEAP_WIRE_MAGIC ||
            reply.status != HEAP_REPLY_TARGETED || (fd = fds[0]) < 0)
                goto fail;
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size <= (off_t) HEAP_RING_HEADER)
                goto fail;
        s = map_anon(sizeof(*s));
        if (!s)
                goto fail;
        *s = (struct heap_session) { .sock = sock, .interval = reply.interval, .stack_bytes = reply.stack_bytes,
                                     .block = reply.block_client != 0, .block_timeout_us = reply.block_timeout_us,
                                     .ring_size = (size_t) st.st_size,
                                     .set_size = heap_addrset_bytes(set_slots(reply.interval)) };
        s->ring_mem = mmap(NULL, s->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (s->ring_mem == MAP_FAILED) {
                s->ring_mem = NULL;
                goto fail;
        }
        if (heap_ring_attach(s->ring_mem, s->ring_size, &s->ring) < 0 || !(s->set_mem = map_anon(s->set_size)))
                goto fail;
        /* The set's pages mapped for writing in one call: its inserts land
         * at random, a page fault each the first time (at 512 KiB, all
         * 512 pages of its 2 MiB within the first thousand samples). The
         * program's errno is its own: this runs inside its malloc. */
        int saved = errno;
        (void) prefault_write(s->set_mem, s->set_size);
        errno = saved;
        heap_addrset_init(&s->set, s->set_mem, set_slots(reply.interval));
        s->templates = map_templates(fds[1]);
        s->id = ++next_id;
        close_fds(fds);
        return s;
fail:
        close_fds(fds);
        if (s)
                session_free(s); /* closes sock */
        else
                close(sock);
        return NULL;
}

/* In a session, on a new generation: still named? Asked on the session's
 * own connection, so the plugin never sees the process twice. */
static bool still_targeted(struct heap_session *s, uint32_t generation) {
        struct heap_hello hello = { .magic = HEAP_WIRE_MAGIC, .version = HEAP_WIRE_VERSION, .pid = getpid(),
                                    .generation = generation, .text_start = text_start, .text_end = text_end };
        struct heap_reply reply = { 0 };
        int fds[2];
        if (send(s->sock, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t) sizeof(hello))
                return false;
        /* Wakes are one byte and go the other way: the reply is next. */
        ssize_t n = recv_reply(s->sock, &reply, fds);
        close_fds(fds);
        return n == (ssize_t) sizeof(reply) && reply.magic == HEAP_WIRE_MAGIC && reply.status == HEAP_REPLY_KEEP;
}

void heap_session_refresh_slow(void) {
        const struct heap_state *st = &heap_state_area.st;
        uint32_t g = heap_state_generation(__ATOMIC_ACQUIRE);
        if (g == __atomic_load_n(&heap_seen_generation, __ATOMIC_ACQUIRE))
                return;
        if (pthread_mutex_trylock(&join_lock) != 0)
                return; /* another thread is at it */
        if (g != heap_seen_generation) {
                /* Only a page the plugin wrote says anything. */
                bool valid = __atomic_load_n(&st->magic, __ATOMIC_ACQUIRE) == HEAP_WIRE_MAGIC &&
                             st->version == HEAP_WIRE_VERSION;
                struct heap_session *cur = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
                /* No thread skips the slow path until this is settled. */
                __atomic_store_n(&heap_gate.active, 1u, __ATOMIC_SEQ_CST);
                if (cur && valid && heap_seen_generation != UINT32_MAX && still_targeted(cur, g)) {
                        __atomic_store_n(&heap_seen_generation, g, __ATOMIC_RELEASE);
                        __atomic_store_n(&heap_gate.active, g, __ATOMIC_RELEASE);
                        pthread_mutex_unlock(&join_lock);
                        return;
                }
                leave();
                struct heap_session *s = valid ? join(g) : NULL;
                __atomic_store_n(&current, s, __ATOMIC_RELEASE);
                if (s) {
                        __atomic_store_n(&current_interval, s->interval, __ATOMIC_RELAXED);
                        __atomic_store_n(&current_id, s->id, __ATOMIC_RELEASE);
                }
                __atomic_store_n(&heap_seen_generation, g, __ATOMIC_RELEASE);
                __atomic_store_n(&heap_gate.quiet, s ? 1u : g, __ATOMIC_RELEASE);
                __atomic_store_n(&heap_gate.active, s ? g : 1u, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&join_lock);
}

bool heap_session_peek(uint64_t *ret_id, uint64_t *ret_interval) {
        uint64_t id = __atomic_load_n(&current_id, __ATOMIC_ACQUIRE);
        if (!id)
                return false;
        *ret_interval = __atomic_load_n(&current_interval, __ATOMIC_ACQUIRE);
        *ret_id = id;
        /* (A join between the loads: the caller's session check fails.) */
        return __atomic_load_n(&current_id, __ATOMIC_ACQUIRE) == id;
}

static uint32_t *shard(void) {
        if (!my_shard)
                my_shard = __atomic_fetch_add(&next_shard, 1, __ATOMIC_RELAXED) % USER_SHARDS + 1;
        return &users[my_shard - 1].n;
}

struct heap_session *heap_session_get(void) {
        uint32_t *n = shard();
        __atomic_fetch_add(n, 1, __ATOMIC_SEQ_CST);
        struct heap_session *s = __atomic_load_n(&current, __ATOMIC_SEQ_CST);
        if (!s)
                __atomic_fetch_sub(n, 1, __ATOMIC_RELEASE);
        return s;
}

void heap_session_put(void) {
        __atomic_fetch_sub(&users[my_shard - 1].n, 1, __ATOMIC_RELEASE);
}

void heap_session_dropped(struct heap_session *s) {
        if (++s->drops_seen % 256 != 1 && !s->block)
                return;
        struct pollfd p = { .fd = s->sock, .events = POLLIN };
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLIN))) {
                /* The plugin is gone (or says the session ended): leave
                 * at the next call, whichever thread makes it (none
                 * skips the slow path from now). */
                __atomic_store_n(&heap_seen_generation, UINT32_MAX, __ATOMIC_RELEASE);
                __atomic_store_n(&heap_gate.active, 1u, __ATOMIC_RELEASE);
        }
}

void heap_session_fork_prepare(void) {
        pthread_mutex_lock(&join_lock);
}

void heap_session_fork_parent(void) {
        pthread_mutex_unlock(&join_lock);
}

void heap_session_forked_child(void) {
        /* One thread now: nothing else uses the session. Its mappings are
         * the parent's ring; the child asks for its own. */
        struct heap_session *s = current;
        current = NULL;
        current_id = 0;
        memset(users, 0, sizeof(users));
        if (s)
                session_free(s);
        heap_seen_generation = UINT32_MAX;
        heap_gate.active = 1;
        pthread_mutex_init(&join_lock, NULL);
        if (state_mapped || map_state() == 0)
                heap_gate.quiet = 1;
}
