/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "stack-walks.h"

/* TracePacket, TrackDescriptor, TrackEvent */
#define PACKET_TIMESTAMP 8
#define PACKET_TRACK_EVENT 11
#define PACKET_TRACK_DESCRIPTOR 60
#define TRACK_UUID 1
#define TRACK_NAME 2
#define EVENT_TRACK_UUID 11
#define EVENT_COUNTER_VALUE 30

#define PREFIX "linux.bpf_stack unwind: "

/* The plugin's track names (plugins/bpfstack/unwind-counters.c). */
static const char *const names[_WALK_MAX] = {
        [WALK_WHOLE] = "walks whole",
        [WALK_FRAME_POINTERS] = "stacks by frame pointers (tables not in yet)",
        [WALK_CUT_DEPTH] = "walks cut at max_depth",
        [WALK_CUT_NO_MAPPING] = "walks ended outside mapped files with tables",
        [WALK_CUT_NO_CFI] = "walks ended without unwind info",
        [WALK_CUT_UNSUPPORTED] = "walks ended at unsupported rules",
        [WALK_CUT_READ_FAULT] = "walks ended at unreadable frames",
        [WALK_CUT_BAD_FRAME] = "walks ended at bad frames",
};

/* How each is said in a list of the cut ones. */
static const char *const shown[_WALK_MAX] = {
        [WALK_CUT_DEPTH] = "at max_depth",
        [WALK_CUT_NO_MAPPING] = "outside files with tables (JIT code, vdso)",
        [WALK_CUT_NO_CFI] = "without unwind info",
        [WALK_CUT_UNSUPPORTED] = "at unsupported unwind rules",
        [WALK_CUT_READ_FAULT] = "at unreadable frames",
        [WALK_CUT_BAD_FRAME] = "at bad frames",
};

/* Profiling.StackUnwindError: what a sample's cut stack ran into, as the
 * stack-walk line says it, and as JSON names it. */
static const struct {
        const char *why, *key;
} errors[STACK_WALKS_ERRORS] = {
        [0] = { "for no reason given", "unknown" },
        [2] = { "past the stack copy (deeper than the user stack the kernel copies with a sample, 64 KiB "
                "at most; or a frame pointing outside it)",
                "memory_invalid" },
        [3] = { "without unwind info for a pc", "unwind_info" },
        [4] = { "at unsupported unwind rules", "unsupported" },
        [5] = { "at a pc outside the process's known maps (JIT code, or maps read after a change)", "invalid_map" },
        [6] = { "at the frame limit", "max_frames_exceeded" },
        [7] = { "at a repeated frame", "repeated_frame" },
        [8] = { "at an unreadable ELF file", "invalid_elf" },
        [9] = { "at a failed system call", "system_call" },
        [10] = { "at a timeout", "thread_timeout" },
        [11] = { "at a thread gone", "thread_does_not_exist" },
        [12] = { "on an architecture not unwound here", "bad_arch" },
        [13] = { "at maps that did not parse", "maps_parse" },
        [14] = { "at a bad parameter", "invalid_parameter" },
        [15] = { "at a failed ptrace call", "ptrace_call" },
};

void stack_walks_sample(struct stack_walks *w, int64_t unwind_error) {
        if (unwind_error < 0)
                unwind_error = 1; /* UNWIND_ERROR_NONE */
        w->sampled[unwind_error < STACK_WALKS_ERRORS ? unwind_error : 0]++;
}

bool stack_walks_bpf_timebase(const char *name, size_t len) {
        static const char prefix[] = "linux.bpf_stack";
        return len >= strlen(prefix) && memcmp(name, prefix, strlen(prefix)) == 0;
}

uint64_t stack_walks_sampled(const struct stack_walks *w) {
        uint64_t t = 0;
        for (size_t k = 0; k < STACK_WALKS_ERRORS; k++)
                t += w->sampled[k];
        return t;
}

uint64_t stack_walks_sampled_cut(const struct stack_walks *w) {
        return stack_walks_sampled(w) - w->sampled[1];
}

const char *stack_walks_error_key(size_t unwind_error) {
        return unwind_error < STACK_WALKS_ERRORS && errors[unwind_error].key ? errors[unwind_error].key : NULL;
}

static void descriptor(struct stack_walks *w, const uint8_t *d, size_t n) {
        struct pbr_field uuid, name;
        if (!pbr_get(d, n, TRACK_UUID, true, &uuid) || uuid.wire_type != 0 || !pbr_get(d, n, TRACK_NAME, true, &name) ||
            name.wire_type != 2 || name.len <= strlen(PREFIX) || memcmp(name.data, PREFIX, strlen(PREFIX)) != 0)
                return;
        const char *rest = (const char *) name.data + strlen(PREFIX);
        size_t len = name.len - strlen(PREFIX);
        for (size_t k = 0; k < _WALK_MAX; k++) {
                if (strlen(names[k]) != len || memcmp(names[k], rest, len) != 0)
                        continue;
                for (size_t i = 0; i < w->n_tracks; i++)
                        if (w->tracks[i].uuid == uuid.varint)
                                return;
                if (w->n_tracks < STACK_WALKS_MAX_TRACKS) {
                        w->tracks[w->n_tracks].uuid = uuid.varint;
                        w->tracks[w->n_tracks++].what = (enum stack_walk) k;
                }
                return;
        }
}

static void value(struct stack_walks *w, uint64_t ts, const uint8_t *d, size_t n) {
        struct pbr_field uuid, v;
        if (!pbr_get(d, n, EVENT_TRACK_UUID, true, &uuid) || uuid.wire_type != 0 ||
            !pbr_get(d, n, EVENT_COUNTER_VALUE, true, &v) || v.wire_type != 0)
                return;
        for (size_t i = 0; i < w->n_tracks; i++) {
                if (w->tracks[i].uuid != uuid.varint)
                        continue;
                enum stack_walk k = w->tracks[i].what;
                /* The latest value is the count: packets are not in time
                 * order in a file. */
                if (!w->count_ts[k] || ts >= w->count_ts[k]) {
                        w->count[k] = (int64_t) v.varint;
                        w->count_ts[k] = ts ? ts : 1;
                }
                w->seen = true;
                return;
        }
}

void stack_walks_packet(struct stack_walks *w, const uint8_t *d, size_t n) {
        struct pbr_field f, ts;
        if (pbr_get(d, n, PACKET_TRACK_DESCRIPTOR, true, &f) && f.wire_type == 2)
                descriptor(w, f.data, f.len);
        else if (w->n_tracks && pbr_get(d, n, PACKET_TRACK_EVENT, true, &f) && f.wire_type == 2)
                value(w, pbr_get(d, n, PACKET_TIMESTAMP, true, &ts) && ts.wire_type == 0 ? ts.varint : 0, f.data,
                      f.len);
}

uint64_t stack_walks_total(const struct stack_walks *w) {
        uint64_t t = 0;
        for (size_t k = 0; k < _WALK_MAX; k++)
                t += w->count[k] > 0 ? (uint64_t) w->count[k] : 0;
        return t;
}

uint64_t stack_walks_cut(const struct stack_walks *w) {
        uint64_t t = 0;
        for (size_t k = WALK_CUT_DEPTH; k < _WALK_MAX; k++)
                t += w->count[k] > 0 ? (uint64_t) w->count[k] : 0;
        return t;
}

static double pct(uint64_t a, uint64_t b) {
        return b ? 100.0 * (double) a / (double) b : 0.0;
}

/* The samples' stacks, most frequent reason first. */
static void print_sampled(FILE *f, const struct stack_walks *w, const char *prefix) {
        uint64_t total = stack_walks_sampled(w), cut = stack_walks_sampled_cut(w);
        if (total == 0)
                return;
        fprintf(f, "%sStack walks:    %" PRIu64 " stacks (linux.perf): %" PRIu64 " (%.0f%%) whole, %" PRIu64
                   " (%.0f%%) cut short",
                prefix, total, w->sampled[1], pct(w->sampled[1], total), cut, pct(cut, total));
        bool done[STACK_WALKS_ERRORS] = { [1] = true };
        const char *sep = ":";
        for (;;) {
                size_t best = 0;
                bool any = false;
                for (size_t k = 0; k < STACK_WALKS_ERRORS; k++)
                        if (!done[k] && w->sampled[k] && (!any || w->sampled[k] > w->sampled[best])) {
                                best = k;
                                any = true;
                        }
                if (!any)
                        break;
                done[best] = true;
                fprintf(f, "%s\n%s                %" PRIu64 " %s", sep, prefix, w->sampled[best], errors[best].why);
                sep = ",";
        }
        fputc('\n', f);
        if (cut * 2 > total)
                fprintf(f, "%sWarning:        most stacks were cut short (see above): their callers are missing\n", prefix);
}

void stack_walks_print(FILE *f, const struct stack_walks *w, const char *prefix) {
        print_sampled(f, w, prefix);
        uint64_t total = stack_walks_total(w), cut = stack_walks_cut(w);
        if (!w->seen || total == 0)
                return;
        uint64_t whole = (uint64_t) MAX(w->count[WALK_WHOLE], 0), fp = (uint64_t) MAX(w->count[WALK_FRAME_POINTERS], 0);
        fprintf(f, "%sStack walks:    %" PRIu64 " user stacks (linux.bpf_stack): %" PRIu64 " (%.0f%%) whole by unwind tables,\n",
                prefix, total, whole, pct(whole, total));
        fprintf(f, "%s                %" PRIu64 " (%.0f%%) by frame pointers (tables not loaded yet), %" PRIu64 " (%.0f%%) cut",
                prefix, fp, pct(fp, total), cut, pct(cut, total));
        const char *sep = " (";
        for (size_t k = WALK_CUT_DEPTH; k < _WALK_MAX; k++)
                if (w->count[k] > 0) {
                        fprintf(f, "%s%" PRId64 " %s", sep, w->count[k], shown[k]);
                        sep = ", ";
                }
        fprintf(f, "%s\n", sep[0] == ',' ? ")" : "");
        if (fp * 2 > total)
                fprintf(f, "%sWarning:        most user stacks fell back to frame pointers: the unwind tables of\n"
                           "%s                their processes were not loaded in time; code built without frame\n"
                           "%s                pointers ends such stacks early ([unknown] frames)\n",
                        prefix, prefix, prefix);
        else if (cut * 2 > total)
                fprintf(f, "%sWarning:        most user stacks were cut short (see above): their callers are missing\n",
                        prefix);
}
