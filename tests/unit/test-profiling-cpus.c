/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The CPU hotplug tracker the samplers share. Pipes stand in for the perf
 * events: each look reads what the test wrote into them as the event's
 * {value, time_enabled}. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "profiling/cpus.h"

struct fake {
        int rd[4], wr[4];     /* the "events": a pipe per slot */
        unsigned closes[4], opens[4];
        int fail_opens;       /* opens that fail with -ENODEV first */
        enum cpu_hotplug_change last[4];
        int last_error[4];
};

static void fake_close(void *userdata, size_t k) {
        struct fake *f = userdata;
        f->closes[k]++;
        close(f->rd[k]);
        close(f->wr[k]);
        f->rd[k] = f->wr[k] = -1;
}

static int fake_open(void *userdata, size_t k) {
        struct fake *f = userdata;
        if (f->fail_opens > 0) {
                f->fail_opens--;
                return -ENODEV;
        }
        int p[2];
        cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
        f->rd[k] = p[0];
        f->wr[k] = p[1];
        f->opens[k]++;
        return p[0];
}

static void fake_changed(void *userdata, size_t k, enum cpu_hotplug_change what, int error) {
        struct fake *f = userdata;
        f->last[k] = what;
        f->last_error[k] = error;
}

static const struct cpu_hotplug_ops ops = { .close = fake_close, .open = fake_open, .changed = fake_changed };

/* The time_enabled slot k's event reports at the next look. */
static void report(struct fake *f, size_t k, uint64_t t) {
        uint64_t v[2] = { 1, t };
        cr_assert_eq(write(f->wr[k], v, sizeof(v)), (ssize_t) sizeof(v));
}

static void setup_two(struct cpu_hotplug *h, struct fake *f) {
        memset(f, 0, sizeof(*f));
        cr_assert_eq(cpu_hotplug_init(h, 2, &ops, f), 0);
        for (size_t k = 0; k < 2; k++) {
                int fd = fake_open(f, k);
                f->opens[k] = 0;
                cpu_hotplug_set(h, k, (uint32_t) k, fd);
        }
}

static void teardown_fake(struct cpu_hotplug *h, struct fake *f) {
        for (size_t k = 0; k < h->n; k++)
                if (f->rd[k] >= 0) {
                        close(f->rd[k]);
                        close(f->wr[k]);
                }
        cpu_hotplug_done(h);
}

static const uint32_t both[] = { 0, 1 }, only0[] = { 0 };

Test(cpu_hotplug, running_events_are_left_alone) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        for (uint64_t t = 1; t <= 5; t++) {
                report(&f, 0, t * 1000);
                report(&f, 1, t * 1000);
                cpu_hotplug_check_online(&h, both, 2);
        }
        cr_assert_eq(f.closes[0] + f.closes[1] + f.opens[0] + f.opens[1], 0);
        cr_assert_eq(h.stops, 0);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, offline_then_back_between_looks) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        report(&f, 0, 1000);
        report(&f, 1, 1000);
        cpu_hotplug_check_online(&h, both, 2);
        /* CPU 1 went offline and came back between two looks: the online
         * list is the same, but its event's time stood still. */
        report(&f, 0, 2000);
        report(&f, 1, 1500);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.closes[1], 0, "time still moved since the last look");
        report(&f, 0, 3000);
        report(&f, 1, 1500);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.closes[1], 1, "the stopped event was not closed");
        cr_assert_eq(f.opens[1], 1, "the stopped event was not opened again on its online CPU");
        cr_assert_eq(f.last[1], CPU_HOTPLUG_BACK);
        cr_assert_eq(f.closes[0] + f.opens[0], 0);
        cr_assert_eq(h.stops, 1);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, events_with_records_since_the_last_look_are_not_read) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        report(&f, 0, 1000);
        report(&f, 1, 1000);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(h.reads, 2);
        /* Nothing to read in the pipes: a read would find the events
         * stopped and close them. */
        for (int look = 0; look < 3; look++) {
                cpu_hotplug_active(&h, 0);
                cpu_hotplug_active(&h, 1);
                cpu_hotplug_check_online(&h, both, 2);
        }
        cr_assert_eq(h.reads, 2, "events with records were read");
        cr_assert_eq(f.closes[0] + f.closes[1], 0);
        /* A slot out of range is ignored. */
        cpu_hotplug_active(&h, 7);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, an_event_that_stops_after_its_records_is_found_a_look_later) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        report(&f, 0, 1000);
        report(&f, 1, 1000);
        cpu_hotplug_check_online(&h, both, 2);
        /* Records of CPU 1 came, then it went offline and back (its time
         * stands at 1500 from then on). */
        cpu_hotplug_active(&h, 1);
        report(&f, 0, 2000);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.closes[1], 0, "not read: it had records");
        report(&f, 0, 3000);
        report(&f, 1, 1500);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.closes[1], 0, "its time moved since the last read");
        report(&f, 0, 4000);
        report(&f, 1, 1500);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.closes[1], 1, "the stopped event was not closed");
        cr_assert_eq(f.opens[1], 1);
        cr_assert_eq(f.last[1], CPU_HOTPLUG_BACK);
        cr_assert_eq(h.stops, 1);
        cr_assert_eq(f.closes[0], 0);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, the_online_list_is_read_at_each_look_from_one_open_file) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        uint32_t cpus[1024];
        size_t n = 0;
        cr_assert_eq(cpus_online(cpus, 1024, &n), 0);
        cr_assert_gt(n, 0);
        int fd = -1;
        for (int look = 0; look < 3; look++) {
                cpu_hotplug_active(&h, 0);
                cpu_hotplug_active(&h, 1);
                cr_assert_eq(cpu_hotplug_check(&h), 0);
                cr_assert(h.online_open);
                /* The same file, not one more each look. */
                if (look == 0)
                        fd = h.online_fd;
                cr_assert_eq(h.online_fd, fd);
        }
        cr_assert_geq(fcntl(fd, F_GETFD), 0);
        cpu_hotplug_done(&h);
        cr_assert_lt(fcntl(fd, F_GETFD), 0, "the online list's file is left open");
        for (size_t k = 0; k < 2; k++) {
                close(f.rd[k]);
                close(f.wr[k]);
        }
}

Test(cpu_hotplug, lists_parse) {
        uint32_t cpus[16];
        size_t n;
        cpus_parse("0-3,5,7-8\n", cpus, 16, &n);
        cr_assert_eq(n, 7);
        static const uint32_t want[] = { 0, 1, 2, 3, 5, 7, 8 };
        for (size_t k = 0; k < n; k++)
                cr_assert_eq(cpus[k], want[k]);
        cpus_parse("0-3", cpus, 2, &n);
        cr_assert_eq(n, 2, "at most max");
        cpus_parse("", cpus, 16, &n);
        cr_assert_eq(n, 0);
}

Test(cpu_hotplug, offline_at_a_look_is_opened_when_back) {
        struct cpu_hotplug h;
        struct fake f;
        setup_two(&h, &f);
        report(&f, 0, 1000);
        cpu_hotplug_check_online(&h, only0, 1);
        cr_assert_eq(f.closes[1], 1);
        cr_assert_eq(f.last[1], CPU_HOTPLUG_STOPPED);
        report(&f, 0, 2000);
        cpu_hotplug_check_online(&h, only0, 1);
        cr_assert_eq(f.opens[1], 0, "opened while its CPU is offline");
        report(&f, 0, 3000);
        cpu_hotplug_check_online(&h, both, 2);
        cr_assert_eq(f.opens[1], 1);
        cr_assert_eq(f.last[1], CPU_HOTPLUG_BACK);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, failed_opens_are_tried_again_then_given_up) {
        static const uint32_t cpu1[] = { 1 };
        struct cpu_hotplug h;
        struct fake f = { .rd = { -1, -1 }, .wr = { -1, -1 } };
        cr_assert_eq(cpu_hotplug_init(&h, 1, &ops, &f), 0);
        cpu_hotplug_set(&h, 0, 1, -1); /* CPU 1 offline at the start */
        cpu_hotplug_check_online(&h, NULL, 0);
        cr_assert_eq(f.opens[0] + f.closes[0], 0);
        /* A CPU shows online before perf can open events on it. */
        f.fail_opens = 3;
        for (int i = 0; i < 4; i++)
                cpu_hotplug_check_online(&h, cpu1, 1);
        cr_assert_eq(f.opens[0], 1, "opened after the failures");
        cr_assert_eq(f.last[0], CPU_HOTPLUG_BACK);

        /* Offline again, then never openable: given up after the tries. */
        cpu_hotplug_check_online(&h, NULL, 0);
        cr_assert_eq(f.closes[0], 1);
        f.fail_opens = 1000;
        for (unsigned i = 0; i < CPU_HOTPLUG_OPEN_TRIES + 5; i++)
                cpu_hotplug_check_online(&h, cpu1, 1);
        cr_assert_eq(f.last[0], CPU_HOTPLUG_GAVE_UP);
        cr_assert_eq(f.last_error[0], -ENODEV);
        cr_assert_eq(f.fail_opens, 1000 - (int) CPU_HOTPLUG_OPEN_TRIES, "tried %d times",
                     1000 - f.fail_opens);
        /* Going offline and back gives it another chance. */
        f.fail_opens = 0;
        cpu_hotplug_check_online(&h, NULL, 0);
        cpu_hotplug_check_online(&h, cpu1, 1);
        cr_assert_eq(f.opens[0], 2);
        teardown_fake(&h, &f);
}

Test(cpu_hotplug, a_real_cpu_clock_event_keeps_running) {
        struct perf_event_attr a = { .type = PERF_TYPE_SOFTWARE, .size = sizeof(a), .config = PERF_COUNT_SW_CPU_CLOCK,
                                     .sample_period = 1000000, .read_format = CPU_HOTPLUG_READ_FORMAT };
        int fd = (int) syscall(__NR_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                cr_skip_test("no software perf events here (perf_event_open: %s)", strerror(errno));
        struct cpu_hotplug h;
        struct fake f = {};
        cr_assert_eq(cpu_hotplug_init(&h, 1, &ops, &f), 0);
        cpu_hotplug_set(&h, 0, 0, fd);
        for (int i = 0; i < 3; i++) {
                usleep(2000);
                cpu_hotplug_check_online(&h, only0, 1);
        }
        cr_assert_eq(f.closes[0], 0, "an event on an online CPU was taken for stopped");
        cpu_hotplug_done(&h);
        close(fd);
}
