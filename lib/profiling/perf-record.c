/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>

#include "profiling/perf-record.h"

struct cursor {
        const uint8_t *p, *end;
        bool bad;
};

static uint64_t u64(struct cursor *c) {
        uint64_t v = 0;
        if ((size_t) (c->end - c->p) < 8) {
                c->bad = true;
                return 0;
        }
        memcpy(&v, c->p, 8);
        c->p += 8;
        return v;
}

static void u32x2(struct cursor *c, uint32_t *a, uint32_t *b) {
        uint64_t v = u64(c);
        *a = (uint32_t) v;
        *b = (uint32_t) (v >> 32);
}

static const uint8_t *take(struct cursor *c, uint64_t n) {
        if ((uint64_t) (c->end - c->p) < n) {
                c->bad = true;
                return NULL;
        }
        const uint8_t *p = c->p;
        c->p += n;
        return p;
}

/* A NUL-terminated string padded to 8 bytes, inside the record. */
static const char *string(struct cursor *c) {
        const uint8_t *nul = memchr(c->p, 0, (size_t) (c->end - c->p));
        if (!nul) {
                c->bad = true;
                return NULL;
        }
        const char *s = (const char *) c->p;
        size_t n = (size_t) (nul - c->p) + 1;
        n = (n + 7) & ~(size_t) 7;
        c->p = (size_t) (c->end - c->p) < n ? c->end : c->p + n;
        return s;
}

/* The sample_id trailer of non-sample records (sample_id_all): its
 * length for the layout, and where the time lies in it. */
static bool trailer_time_at(const struct perf_layout *l, size_t *ret_len, size_t *ret_at) {
        if (!l->sample_id_all || !(l->sample_type & PERF_SAMPLE_TIME))
                return false;
        size_t n = 0;
        if (l->sample_type & PERF_SAMPLE_TID)
                n += 8;
        *ret_at = n;
        n += 8; /* time */
        if (l->sample_type & PERF_SAMPLE_ID)
                n += 8;
        if (l->sample_type & PERF_SAMPLE_STREAM_ID)
                n += 8;
        if (l->sample_type & PERF_SAMPLE_CPU)
                n += 8;
        if (l->sample_type & PERF_SAMPLE_IDENTIFIER)
                n += 8;
        *ret_len = n;
        return true;
}

/* We ask for TID|TIME|CPU at most; time is all we use. */
static uint64_t trailer_time(const uint8_t *end, const uint8_t *start, const struct perf_layout *l) {
        size_t n, at;
        if (!trailer_time_at(l, &n, &at) || (size_t) (end - start) < n)
                return 0;
        uint64_t t;
        memcpy(&t, end - n + at, 8);
        return t;
}

bool perf_record_time_offset(const struct perf_layout *l, uint32_t type, size_t size, size_t *ret_off) {
        size_t h = sizeof(struct perf_event_header), off, n, at;
        switch (type) {
        case PERF_RECORD_SAMPLE:
                if (!(l->sample_type & PERF_SAMPLE_TIME))
                        return false;
                off = h + (l->sample_type & PERF_SAMPLE_IDENTIFIER ? 8 : 0) + (l->sample_type & PERF_SAMPLE_IP ? 8 : 0) +
                      (l->sample_type & PERF_SAMPLE_TID ? 8 : 0);
                break;
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                off = h + 16; /* pid, ppid, tid, ptid */
                break;
        case PERF_RECORD_THROTTLE:
        case PERF_RECORD_UNTHROTTLE:
                off = h;
                break;
        default:
                if (!trailer_time_at(l, &n, &at) || size < h + n)
                        return false;
                off = size - n + at;
        }
        if (off + 8 > size)
                return false;
        *ret_off = off;
        return true;
}

static int parse_sample(struct cursor *c, const struct perf_layout *l, struct perf_record *r) {
        struct perf_sample_view *s = &r->u.sample;
        uint64_t t = l->sample_type;
        memset(s, 0, sizeof(*s));
        if (t & PERF_SAMPLE_IDENTIFIER)
                (void) u64(c);
        if (t & PERF_SAMPLE_IP)
                s->ip = u64(c);
        if (t & PERF_SAMPLE_TID)
                u32x2(c, &s->pid, &s->tid);
        if (t & PERF_SAMPLE_TIME)
                s->time = r->time = u64(c);
        if (t & PERF_SAMPLE_ADDR)
                (void) u64(c);
        if (t & PERF_SAMPLE_ID)
                (void) u64(c);
        if (t & PERF_SAMPLE_STREAM_ID)
                (void) u64(c);
        if (t & PERF_SAMPLE_CPU) {
                uint32_t res;
                u32x2(c, &s->cpu, &res);
        }
        if (t & PERF_SAMPLE_PERIOD)
                s->period = u64(c);
        if (t & (PERF_SAMPLE_READ | PERF_SAMPLE_BRANCH_STACK))
                return -EOPNOTSUPP; /* never asked for */
        if (t & PERF_SAMPLE_CALLCHAIN) {
                uint64_t n = u64(c);
                if (n > (uint64_t) (c->end - c->p) / 8)
                        return -EBADMSG;
                s->callchain = (const uint64_t *) (const void *) take(c, n * 8);
                s->callchain_len = n;
        }
        if (t & PERF_SAMPLE_RAW) {
                /* A u32 size, then that many bytes (which pad the two to
                 * a multiple of 8). */
                uint32_t size = 0;
                if (c->end - c->p < 4)
                        c->bad = true;
                else {
                        memcpy(&size, c->p, 4);
                        c->p += 4;
                }
                s->raw = take(c, size);
                s->raw_size = c->bad ? 0 : size;
        }
        if (t & PERF_SAMPLE_REGS_USER) {
                s->regs_abi = u64(c);
                if (s->regs_abi != PERF_SAMPLE_REGS_ABI_NONE) {
                        if (l->n_user_regs > PERF_MAX_USER_REGS)
                                return -EBADMSG;
                        for (uint32_t k = 0; k < l->n_user_regs; k++)
                                s->regs[k] = u64(c);
                }
        }
        if (t & PERF_SAMPLE_STACK_USER) {
                uint64_t size = u64(c);
                if (size > 0) {
                        s->stack = take(c, size);
                        uint64_t dyn = u64(c);
                        s->stack_size = dyn <= size ? dyn : size;
                }
        }
        return c->bad ? -EBADMSG : 0;
}

bool perf_record_sample_id(const uint8_t *rec, size_t len, const struct perf_layout *l, uint64_t *ret) {
        struct perf_event_header h;
        if (!(l->sample_type & PERF_SAMPLE_IDENTIFIER) || len < sizeof(h) + 8)
                return false;
        memcpy(&h, rec, sizeof(h));
        if (h.type != PERF_RECORD_SAMPLE)
                return false;
        memcpy(ret, rec + sizeof(h), 8);
        return true;
}

int perf_record_parse(const uint8_t *rec, size_t len, const struct perf_layout *l, struct perf_record *r) {
        struct perf_event_header h;
        if (len < sizeof(h))
                return -EBADMSG;
        memcpy(&h, rec, sizeof(h));
        if (h.size != len)
                return -EBADMSG;
        struct cursor c = { .p = rec + sizeof(h), .end = rec + len };
        memset(r, 0, sizeof(*r));
        r->misc = h.misc;
        switch (h.type) {
        case PERF_RECORD_SAMPLE:
                r->kind = PERF_REC_SAMPLE;
                return parse_sample(&c, l, r);
        case PERF_RECORD_MMAP2:
                r->kind = PERF_REC_MMAP2;
                u32x2(&c, &r->u.mmap2.pid, &r->u.mmap2.tid);
                r->u.mmap2.addr = u64(&c);
                r->u.mmap2.len = u64(&c);
                r->u.mmap2.pgoff = u64(&c);
                if (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
                        (void) take(&c, 24); /* build id size, pad, 20 bytes */
                } else {
                        u32x2(&c, &r->u.mmap2.maj, &r->u.mmap2.min);
                        r->u.mmap2.ino = u64(&c);
                        (void) u64(&c); /* ino_generation */
                }
                u32x2(&c, &r->u.mmap2.prot, &r->u.mmap2.flags);
                if (c.bad)
                        return -EBADMSG;
                r->u.mmap2.filename = string(&c);
                break;
        case PERF_RECORD_COMM:
                r->kind = PERF_REC_COMM;
                u32x2(&c, &r->u.comm.pid, &r->u.comm.tid);
                if (c.bad)
                        return -EBADMSG;
                r->u.comm.comm = string(&c);
                r->u.comm.exec = h.misc & PERF_RECORD_MISC_COMM_EXEC;
                break;
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                r->kind = h.type == PERF_RECORD_FORK ? PERF_REC_FORK : PERF_REC_EXIT;
                u32x2(&c, &r->u.task.pid, &r->u.task.ppid);
                u32x2(&c, &r->u.task.tid, &r->u.task.ptid);
                r->u.task.time = u64(&c);
                r->time = r->u.task.time;
                return c.bad ? -EBADMSG : 0;
        case PERF_RECORD_LOST:
                r->kind = PERF_REC_LOST;
                r->u.lost.id = u64(&c);
                r->u.lost.lost = u64(&c);
                break;
        case PERF_RECORD_LOST_SAMPLES:
                r->kind = PERF_REC_LOST_SAMPLES;
                r->u.lost.lost = u64(&c);
                break;
        case PERF_RECORD_THROTTLE:
        case PERF_RECORD_UNTHROTTLE:
                r->kind = h.type == PERF_RECORD_THROTTLE ? PERF_REC_THROTTLE : PERF_REC_UNTHROTTLE;
                r->u.throttle.time = u64(&c);
                r->u.throttle.id = u64(&c);
                r->u.throttle.stream_id = u64(&c);
                r->time = r->u.throttle.time;
                return c.bad ? -EBADMSG : 0;
        default:
                r->kind = PERF_REC_OTHER;
                return 0;
        }
        if (c.bad)
                return -EBADMSG;
        r->time = trailer_time(c.end, c.p, l);
        return 0;
}

int perf_ring_copy(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head, uint8_t *buf, size_t buf_size) {
        struct perf_event_header h;
        if (head - tail < sizeof(h))
                return 0;
        uint64_t mask = size - 1, off = tail & mask;
        /* The header itself may wrap. */
        for (size_t k = 0; k < sizeof(h); k++)
                ((uint8_t *) &h)[k] = data[(off + k) & mask];
        if (h.size < sizeof(h) || h.size > head - tail || h.size > buf_size || h.size > size)
                return -EBADMSG;
        uint64_t first = size - off < h.size ? size - off : h.size;
        memcpy(buf, data + off, first);
        memcpy(buf + first, data, h.size - first);
        return h.size;
}

int perf_record_compact(const uint8_t *rec, size_t len, const struct perf_layout *l, uint8_t *out) {
        struct perf_record r;
        int e = perf_record_parse(rec, len, l, &r);
        if (e < 0)
                return e;
        return perf_record_compact_parsed(rec, len, &r, out);
}

int perf_record_compact_parsed(const uint8_t *rec, size_t len, const struct perf_record *r, uint8_t *out) {
        if (len > UINT16_MAX)
                return -EBADMSG;
        size_t data_off = 0;
        uint64_t declared = 0, keep = 0;
        if (r->kind == PERF_REC_SAMPLE && r->u.sample.stack) {
                data_off = (size_t) (r->u.sample.stack - rec);
                memcpy(&declared, rec + data_off - 8, 8);
                keep = (r->u.sample.stack_size + 7) & ~(uint64_t) 7;
        }
        if (keep >= declared) {
                if (out)
                        memcpy(out, rec, len);
                return (int) len;
        }
        size_t cut = (size_t) (declared - keep), n = len - cut;
        if (out) {
                struct perf_event_header h;
                memcpy(out, rec, data_off + keep);
                memcpy(out + data_off + keep, rec + data_off + declared, len - data_off - declared);
                memcpy(&h, out, sizeof(h));
                h.size = (uint16_t) n;
                memcpy(out, &h, sizeof(h));
                memcpy(out + data_off - 8, &keep, 8);
        }
        return (int) n;
}
