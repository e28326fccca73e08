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

void stack_walks_print(FILE *f, const struct stack_walks *w, const char *prefix) {
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
