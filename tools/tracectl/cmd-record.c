/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl record / attach / stop. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "pbtxt/pbtxt.h"
#include "config-check.h"
#include "config-lint.h"
#include "record-config.h"
#include "ds-errors.h"
#include "record-ended.h"
#include "record-output.h"
#include "record-rotate.h"
#include "record-target.h"
#include "record-wait.h"
#include "tracectl.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

static void record_help(void) {
        printf("Usage: tracectl record -c CONFIG [--txt] -o FILE [OPTIONS]\n"
               "       tracectl record [-t DURATION] [-b SIZE] [EVENT...] -o FILE [OPTIONS]\n"
               "       tracectl record [OPTIONS] -o FILE -- CMD [ARGS...]\n"
               "       tracectl record [OPTIONS] --rotate SIZE|DURATION[,...] -o DIR/ [--keep N|SIZE]\n"
               "\n"
               "Records a trace into FILE. The service writes the file itself\n"
               "(write_into_file), so long traces do not sit in memory.\n"
               "\n"
               "  -c, --config FILE      TraceConfig, binary or (with --txt) text format;\n"
               "                         '-' reads it from standard input\n"
               "      --txt              the config is in protobuf text format\n"
               "  -o, --out FILE         the trace file to write (tracectl opens it and\n"
               "                         passes it to the service; - is the standard\n"
               "                         output); without -o the config's output_path\n"
               "                         names a file in the service's trace directory,\n"
               "                         which the service opens itself\n"
               "      --rotate SIZE|DURATION[,...]  the service closes the file at SIZE (1mb,\n"
               "                         as -b takes it) and/or after DURATION (10m, as -t\n"
               "                         takes it) and goes on in the next one, in DIR\n"
               "                         (-o DIR/, made when missing), detached or not;\n"
               "                         each file opens alone\n"
               "      --keep N|SIZE      with --rotate: keep the last N closed files, or\n"
               "                         as many as fit in SIZE (the oldest go first)\n"
               "      --dry-run          parse the config (or quick flags), print it, exit\n"
               "  -t, --time DURATION    quick mode: how long, in ms, s, m, h or d (e.g. 10s,\n"
               "                         500ms, 2m), up to 7 days, from when every data\n"
               "                         source runs; 0s: until Ctrl-C\n"
               "  -b, --buffer SIZE      quick mode: buffer size (e.g. 64mb, 512kb)\n"
               "      --ds NAME          quick mode: also enable data source NAME\n"
               "      --no-process-stats quick mode: no linux.process_stats\n"
               "      --perf HZ          quick mode: sample every CPU HZ times a second\n"
               "                         (linux.perf), with kernel and user stacks\n"
               "      --bpf-stacks       quick mode: on-CPU stacks at 99 Hz and off-CPU\n"
               "                         stacks with blocked time, every process (linux.bpf_stack)\n"
               "      --heap PID|NAME    quick mode: native heap profile of process PID, or of\n"
               "                         the processes named NAME, run with libtraced-heap.so\n"
               "                         preloaded (android.heapprofd; traced-heap(7))\n"
               "  EVENT...               quick mode: ftrace events (group/name, group/*)\n"
               "      --stop-on-trigger NAME  stop when a producer activates NAME\n"
               "      --detach KEY       start, detach the session under KEY, exit\n"
               "      --no-summary       do not summarise the trace at the end\n"
               "  -p, --pid PID[,PID...] narrow linux.perf and linux.bpf_stack (--perf,\n"
               "                         --bpf-stacks) to these processes\n"
               "  -- CMD [ARGS...]       run CMD once tracing runs, stop when it exits\n"
               "                         (no -t: no other limit); the profilers are\n"
               "                         narrowed to it; the exit status is the recording's;\n"
               "                         a signal to tracectl reaches CMD, a second one\n"
               "                         stops waiting for it\n"
               "      --allow-missing    record on when a data source, an event or a config\n"
               "                         value is missing or refused (printed as it comes);\n"
               "                         without it the recording stops and fails\n"
               "  -h, --help             this help\n"
               "\n"
               "Ctrl-C (or SIGTERM) flushes the data sources, stops the session and\n"
               "completes the file; before the session exists it ends tracectl at once.\n"
               "tracectl waits up to 10 s for the service to accept and for the data\n"
               "sources the config names to be registered.\n");
}

/* A recording that did not complete leaves the file it was to replace as
 * it was: say so, and return code. */
static int kept_as_it_was(const char *out, bool service_opens, int code) {
        struct stat st;
        if (!service_opens && stat(out, &st) == 0 && S_ISREG(st.st_mode))
                fprintf(stderr, "tracectl: %s is left as it was\n", out);
        return code;
}

int cmd_record(struct tracectl *t, int argc, char **argv) {
        enum { ARG_TXT = 0x100, ARG_DS, ARG_NO_PS, ARG_TRIGGER, ARG_DETACH, ARG_NO_SUMMARY, ARG_PERF, ARG_BPF_STACKS, ARG_DRY_RUN,
               ARG_ALLOW_MISSING, ARG_ROTATE, ARG_KEEP, ARG_HEAP };
        /* record [OPTIONS] -- CMD ARGS: getopt sees what is before "--". */
        char **command = NULL;
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--") == 0) {
                        command = argv + i + 1;
                        argv[i] = NULL;
                        argc = i;
                        break;
                }
        if (command && !command[0]) {
                fprintf(stderr, "tracectl record: no command after --\n");
                return EXIT_USAGE;
        }
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "txt", no_argument, NULL, ARG_TXT },
                { "out", required_argument, NULL, 'o' },
                { "time", required_argument, NULL, 't' },
                { "buffer", required_argument, NULL, 'b' },
                { "ds", required_argument, NULL, ARG_DS },
                { "no-process-stats", no_argument, NULL, ARG_NO_PS },
                { "stop-on-trigger", required_argument, NULL, ARG_TRIGGER },
                { "detach", required_argument, NULL, ARG_DETACH },
                { "no-summary", no_argument, NULL, ARG_NO_SUMMARY },
                { "perf", required_argument, NULL, ARG_PERF },
                { "bpf-stacks", no_argument, NULL, ARG_BPF_STACKS },
                { "heap", required_argument, NULL, ARG_HEAP },
                { "dry-run", no_argument, NULL, ARG_DRY_RUN },
                { "allow-missing", no_argument, NULL, ARG_ALLOW_MISSING },
                { "pid", required_argument, NULL, 'p' },
                { "rotate", required_argument, NULL, ARG_ROTATE },
                { "keep", required_argument, NULL, ARG_KEEP },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *config_path = NULL, *out = NULL, *trigger = NULL, *detach = NULL, *heap_target = NULL;
        bool txt = false, process_stats = true, summary = true, bpf_stacks = false, dry_run = false,
             allow_missing = false, duration_set = false;
        pid_t pids[RECORD_TARGET_MAX_PIDS + 1];
        size_t n_pids = 0;
        uint32_t duration_ms = 10000, buffer_kb = 64 * 1024, perf_hz = 0;
        char *extra[16];
        size_t n_extra = 0;
        struct record_rotate rotate = {};
        bool rotating = false, keeping = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:o:t:b:p:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        config_path = optarg;
                        break;
                case ARG_TXT:
                        txt = true;
                        break;
                case 'o':
                        out = optarg;
                        break;
                case 't':
                        duration_set = true;
                        r = parse_duration_ms(optarg, &duration_ms);
                        if (r == -ERANGE) {
                                fprintf(stderr,
                                        "tracectl: duration \"%s\" is over the service's limit of 7 days "
                                        "(-t 0s records until stopped with Ctrl-C)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        if (r < 0) {
                                fprintf(stderr,
                                        "tracectl: bad duration \"%s\": a number and a unit, ms, s, m, h or d "
                                        "(e.g. 500ms, 10s, 2m), up to 7 days\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'b':
                        if (parse_size_kb(optarg, &buffer_kb) < 0) {
                                fprintf(stderr, "tracectl: bad buffer size \"%s\" (e.g. 64mb, 512kb)\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case ARG_DS:
                        if (n_extra >= ELEMENTSOF(extra)) {
                                fprintf(stderr, "tracectl: too many --ds\n");
                                return EXIT_USAGE;
                        }
                        extra[n_extra++] = optarg;
                        break;
                case ARG_NO_PS:
                        process_stats = false;
                        break;
                case ARG_TRIGGER:
                        trigger = optarg;
                        break;
                case ARG_DETACH:
                        detach = optarg;
                        break;
                case ARG_NO_SUMMARY:
                        summary = false;
                        break;
                case ARG_BPF_STACKS:
                        bpf_stacks = true;
                        break;
                case ARG_PERF: {
                        char *end;
                        errno = 0;
                        unsigned long hz = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || hz == 0 || hz > 100000) {
                                fprintf(stderr, "tracectl: bad --perf frequency \"%s\" (1..100000 Hz)\n", optarg);
                                return EXIT_USAGE;
                        }
                        perf_hz = (uint32_t) hz;
                        break;
                }
                case ARG_HEAP:
                        if (!optarg[0] || strlen(optarg) > 1024 || strchr(optarg, '\n') ||
                            (optarg[strspn(optarg, "0123456789")] == '\0' &&
                             (strlen(optarg) > 10 || strtoull(optarg, NULL, 10) == 0 ||
                              strtoull(optarg, NULL, 10) > INT32_MAX))) {
                                fprintf(stderr, "tracectl: bad --heap \"%s\": a process id, or a command name "
                                                "(a glob: myd, srv-*)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        heap_target = optarg;
                        break;
                case ARG_DRY_RUN:
                        dry_run = true;
                        break;
                case ARG_ALLOW_MISSING:
                        allow_missing = true;
                        break;
                case ARG_ROTATE:
                        if (record_rotate_parse(optarg, &rotate) < 0) {
                                fprintf(stderr, "tracectl: bad --rotate \"%s\": sizes with a unit ending in b (1mb, "
                                                "512kb) and durations (10m, 30s), comma-separated\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        rotating = true;
                        break;
                case ARG_KEEP:
                        if (record_keep_parse(optarg, &rotate) < 0) {
                                fprintf(stderr, "tracectl: bad --keep \"%s\": a number of files, or a size (1gb, "
                                                "500mb)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        keeping = true;
                        break;
                case 'p':
                        if (record_target_parse_pids(optarg, pids, &n_pids) < 0) {
                                fprintf(stderr, "tracectl: bad -p \"%s\": process ids, comma-separated (at most %d)\n",
                                        optarg, RECORD_TARGET_MAX_PIDS);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        record_help();
                        return EXIT_OK;
                default:
                        return EXIT_USAGE;
                }
        }
        if (config_path && optind < argc) {
                fprintf(stderr, "tracectl record: events cannot be combined with -c\n");
                return EXIT_USAGE;
        }
        if (out && strcmp(out, "-") == 0 && detach) {
                fprintf(stderr, "tracectl record: -o - cannot be combined with --detach (the session would outlive "
                                "what reads it)\n");
                return EXIT_USAGE;
        }
        if (command && detach) {
                fprintf(stderr, "tracectl record: a command (-- CMD) cannot be combined with --detach\n");
                return EXIT_USAGE;
        }
        if (command && !duration_set)
                duration_ms = 0; /* until the command exits */
        if (keeping && !rotating) {
                fprintf(stderr, "tracectl record: --keep goes with --rotate\n");
                return EXIT_USAGE;
        }
        if (rotating && (!out || strcmp(out, "-") == 0)) {
                fprintf(stderr, "tracectl record: --rotate writes files into a directory: -o DIR/\n");
                return EXIT_USAGE;
        }

        Perfetto__Protos__TraceConfig *cfg = NULL;
        if (config_path) {
                _cleanup_(pbtxt_positions_done) struct pbtxt_positions pos = {};
                const char *name = strcmp(config_path, "-") ? config_path : "<stdin>";
                r = load_config(config_path, txt, &cfg, &pos);
                if (r != 0)
                        return r;
                if (config_check(cfg, &pos, name, stderr) > 0) {
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                        return EXIT_CONFIG;
                }
                /* tracectl always records with write_into_file. When the
                 * config did not ask for it, the flush period that goes with
                 * it is tracectl's to choose too; what the user chose is
                 * only warned about. */
                if (!(cfg->has_write_into_file && cfg->write_into_file) && !cfg->has_flush_period_ms) {
                        cfg->has_flush_period_ms = true;
                        cfg->flush_period_ms = CONFIG_LINT_FLUSH_PERIOD_MS;
                }
                (void) config_lint(cfg, true, name, stderr);
        } else {
                cfg = quick_config(duration_ms, buffer_kb, argv + optind, (size_t) (argc - optind), extra, n_extra,
                                   process_stats, perf_hz, bpf_stacks, heap_target);
                if (!cfg)
                        return EXIT_CONFIG;
        }
        if (trigger) {
                Perfetto__Protos__TraceConfig__TriggerConfig *tc = calloc(1, sizeof(*tc));
                Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *tr = calloc(1, sizeof(*tr));
                perfetto__protos__trace_config__trigger_config__init(tc);
                perfetto__protos__trace_config__trigger_config__trigger__init(tr);
                tr->name = strdup(trigger);
                tc->has_trigger_mode = true;
                tc->trigger_mode = PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING;
                tc->n_triggers = 1;
                tc->triggers = calloc(1, sizeof(void *));
                tc->triggers[0] = tr;
                tc->has_trigger_timeout_ms = true;
                tc->trigger_timeout_ms = cfg->has_duration_ms && cfg->duration_ms ? cfg->duration_ms : 24u * 3600 * 1000;
                if (cfg->trigger_config)
                        protobuf_c_message_free_unpacked(&cfg->trigger_config->base, NULL);
                cfg->trigger_config = tc;
        }

        if (n_pids > 0) {
                r = record_target_apply(cfg, pids, n_pids);
                if (r < 0) {
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                        return EXIT_OTHER;
                }
                if (r == 0)
                        fprintf(stderr, "tracectl: -p narrows the profilers (linux.perf, linux.bpf_stack, e.g. "
                                        "--perf HZ); the config has none: everything it names is recorded\n");
        }
        if (rotating && record_rotate_apply(cfg, &rotate) < 0) {
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return EXIT_OTHER;
        }
        if (dry_run) {
                pbtxt_print(stdout, &cfg->base, 0);
                fprintf(stderr, "tracectl: the config is valid: %zu buffer(s), %zu data source(s)\n", cfg->n_buffers,
                        cfg->n_data_sources);
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return EXIT_OK;
        }
        /* What cannot run or does not exist is refused before anything is
         * recorded, not found out from an empty trace. */
        pid_t missing;
        r = command ? record_command_find(command[0]) : 0;
        if (r < 0)
                fprintf(stderr, "tracectl: cannot run %s: %s%s\n", command[0], strerror(-r),
                        strchr(command[0], '/') ? "" : " (searched in $PATH)");
        else if (n_pids > 0 && (r = record_target_check_pids(pids, n_pids, &missing)) < 0)
                fprintf(stderr, "tracectl: -p %d: no such process\n", (int) missing);
        if (r < 0) {
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return EXIT_USAGE;
        }
        bool service_opens = !out && cfg->output_path && cfg->output_path[0];
        if (!out && !service_opens) {
                fprintf(stderr, "tracectl record: -o FILE is required (or output_path in the config)\n");
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return EXIT_USAGE;
        }
        if (out && cfg->output_path) {
                /* Our file wins; the service must not open one too. */
                free(cfg->output_path);
                cfg->output_path = NULL;
        }
        if (service_opens)
                out = cfg->output_path;

        cfg->has_write_into_file = true;
        cfg->write_into_file = true;
        if (!cfg->has_file_write_period_ms) {
                cfg->has_file_write_period_ms = true;
                cfg->file_write_period_ms = 1000;
        }

        /* Ctrl-C (or SIGTERM) ends every phase of the recording: waiting
         * for the service or its data sources, recording, finishing. Even
         * when the shell that started tracectl ignores them. */
        record_sig.nothing_to_undo = true;
        record_catch_interrupt(SIGINT);
        record_catch_interrupt(SIGTERM);
        r = tracectl_connect(t);
        if (r != 0) {
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return r;
        }

        /* Quick mode's process metadata is tracectl's own choice: a service
         * without it records the rest. */
        r = wait_for_data_sources(t, cfg, allow_missing,
                                  !config_path && process_stats ? "linux.process_stats" : NULL);
        if (r != EXIT_OK) {
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                tracectl_disconnect(t);
                return kept_as_it_was(out, service_opens, r);
        }

        /* The command is forked now, for its pid to go into the config; it
         * runs once tracing does. */
        record_sig.nothing_to_undo = false;
        _cleanup_(record_command_finish) struct record_command cmd = { .pid = -1, .release_fd = -EBADF,
                                                                      .exec_fd = -EBADF };
        if (command && ((r = record_command_fork(&cmd, command)) < 0 ||
                        (r = record_target_apply(cfg, &cmd.pid, 1)) < 0)) {
                fprintf(stderr, "tracectl: cannot start %s: %s\n", command[0], strerror(-r));
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                tracectl_disconnect(t);
                return EXIT_OTHER;
        }

        /* The service writes the file; it gets the fd with EnableTracing
         * (or, for output_path, opens it in its trace directory). What
         * tracectl opens is a new file beside FILE, which replaces FILE
         * only once the recording is complete. */
        _cleanup_(record_output_free) struct record_output file = RECORD_OUTPUT_INIT;
        _cleanup_free_ char *out_copy = strdup(out);
        bool to_stdout = !service_opens && strcmp(out, "-") == 0;
        if (rotating && out_copy) {
                /* The service makes the files in the directory. */
                file.fd = record_rotate_open_dir(out);
                if (file.fd < 0) {
                        fprintf(stderr, "tracectl: cannot open the directory %s: %s\n", out, strerror(-file.fd));
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                        tracectl_disconnect(t);
                        return EXIT_OTHER;
                }
        } else if (!out_copy || (!service_opens && (r = record_output_open(&file, out)) < 0)) {
                if (to_stdout && r == -ENOTTY)
                        fprintf(stderr, "tracectl: -o -: the standard output is a terminal, not the place for a "
                                        "binary trace (redirect it: > FILE, | COMMAND)\n");
                else
                        fprintf(stderr, "tracectl: cannot create a file beside %s: %s\n", out,
                                strerror(out_copy ? -r : ENOMEM));
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                tracectl_disconnect(t);
                return EXIT_OTHER;
        }
        out = out_copy;
        struct consumer_session w = {};
        struct record_watch watch = { .allow_missing = allow_missing, .cmd = command ? &cmd : NULL,
                                      .cmd_name = command ? command[0] : NULL };
        Perfetto__Protos__EnableTracingRequest req = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        req.trace_config = cfg;
        uint32_t asked_ms = cfg->has_duration_ms ? cfg->duration_ms : 0;
        uint64_t enabled_usec = record_now_usec();
        int64_t id = consumer_enable_tracing(t->client, &req, file.fd, &w);
        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
        if (id < 0) {
                fprintf(stderr, "tracectl: EnableTracing failed: %s\n", strerror((int) -id));
                tracectl_disconnect(t);
                return kept_as_it_was(out, service_opens, EXIT_SESSION_FAILED);
        }
        if (command) {
                /* Told when every data source runs: then the command starts. */
                Perfetto__Protos__ObserveEventsRequest oe = PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
                Perfetto__Protos__ObservableEvents__Type type =
                        PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED;
                oe.n_events_to_observe = 1;
                oe.events_to_observe = &type;
                if (ipc_client_invoke(t->client, "ObserveEvents", &oe.base,
                                      &perfetto__protos__observe_events_response__descriptor, -EBADF, record_on_observed,
                                      &watch) < 0)
                        watch.all_started = true;
        }

        if (detach) {
                Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
                dr.key = (char *) detach;
                r = tracectl_call(t, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, -EBADF, NULL,
                                  5000);
                if (w.replied && w.error) {
                        fprintf(stderr, "tracectl: the session failed: %s\n", w.error);
                        consumer_session_done(&w);
                        tracectl_disconnect(t);
                        return kept_as_it_was(out, service_opens, EXIT_SESSION_FAILED);
                }
                tracectl_disconnect(t);
                if (r < 0) {
                        fprintf(stderr, "tracectl: could not detach as \"%s\": %s\n", detach, strerror(-r));
                        return kept_as_it_was(out, service_opens, EXIT_SESSION_FAILED);
                }
                /* The session runs on: the service writes on into the
                 * file, under its final name from now on. */
                r = record_output_commit(&file);
                if (r < 0) {
                        fprintf(stderr, "tracectl: cannot rename the trace to %s: %s\n", out, strerror(-r));
                        return EXIT_OTHER;
                }
                printf("Session detached as \"%s\"; the service writes %s%s.\n", detach,
                       rotating ? "numbered files into " : "", out);
                return EXIT_OK;
        }

        r = record_wait_session(t, &w, rotating ? -EBADF : file.fd, &watch);
        uint64_t recorded_usec = record_now_usec() - enabled_usec;
        /* The ended session stays the consumer's until it goes: its stats
         * are the ones the service wrote last into the trace, without
         * reading the trace back (the service wrote it around the page
         * cache). */
        _cleanup_(record_stats_freep) Perfetto__Protos__GetTraceStatsResponse *final =
                r == EXIT_OK ? record_poll_stats(t) : NULL;
        consumer_session_done(&w);
        tracectl_disconnect(t);
        if (command && cmd.released && !record_command_poll(&cmd)) {
                fprintf(stderr, "tracectl: the recording ended; waiting for %s (pid %d) to exit (Ctrl-C %s)\n",
                        command[0], (int) cmd.pid, record_sig.forwarded ? "again stops waiting" : "passes it on");
                record_sig.seen = record_sig.interrupted;
                if (!record_command_wait(&cmd, record_sig.wake_pipe[0], record_command_wait_over, &watch))
                        fprintf(stderr, "tracectl: not waiting for %s (pid %d) any longer: it runs on\n", command[0],
                                (int) cmd.pid);
        }
        record_command_finish(&cmd);
        if (command && cmd.released && cmd.exited && cmd.exec_error) {
                /* The check before recording passed, the exec did not. */
                fprintf(stderr, "tracectl: cannot run %s: %s: the trace holds nothing of it\n", command[0],
                        strerror(cmd.exec_error));
                return kept_as_it_was(out, service_opens, EXIT_OTHER);
        }
        if (command && cmd.released && cmd.exited && !(WIFEXITED(cmd.status) && WEXITSTATUS(cmd.status) == 0))
                fprintf(stderr, "tracectl: %s %s %d\n", command[0],
                        WIFEXITED(cmd.status) ? "exited with status" : "was killed by signal",
                        WIFEXITED(cmd.status) ? WEXITSTATUS(cmd.status) : WTERMSIG(cmd.status));
        if (r == EXIT_OK)
                r = record_check_trace_errors(service_opens || rotating ? NULL : file.tmp_path,
                                       final ? final->trace_stats : NULL, &watch);
        /* A data source lost while it ran fails the recording, whose file
         * holds what the others recorded: it is put in place all the same. */
        int ok = EXIT_OK;
        if (r == EXIT_INCOMPLETE) {
                ok = EXIT_SESSION_FAILED;
                r = EXIT_OK;
        }
        if (rotating) {
                /* Every closed file is whole, an early end included. */
                if (r == EXIT_ENDED_EARLY)
                        fprintf(stderr, "tracectl: the recording ended early: %s; the files hold what was recorded "
                                        "until then\n",
                                trace_end_reason_text(watch.end_reason));
                if (summary || r != EXIT_OK)
                        record_rotate_list(file.fd, out, r == EXIT_OK ? stdout : stderr);
                return r == EXIT_OK ? ok : r;
        }
        if (r == EXIT_ENDED_EARLY) {
                /* What the session recorded until the service stopped is
                 * the user's: kept, and said so. */
                r = record_ended_early(&file, out, service_opens, watch.end_reason, recorded_usec, asked_ms);
                if (r != EXIT_ENDED_EARLY)
                        return kept_as_it_was(out, service_opens, r);
                if (summary) {
                        printf("Trace written to %s\n", out);
                        if (!service_opens || access(out, R_OK) == 0)
                                (void) print_trace_summary(out, 10);
                }
                return EXIT_ENDED_EARLY;
        }
        if (r != EXIT_OK)
                return kept_as_it_was(out, service_opens, r);
        r = record_output_commit(&file);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot rename the trace to %s: %s\n", out, strerror(-r));
                return EXIT_OTHER;
        }
        if (trigger && !record_sig.interrupted && access(out, R_OK) == 0 && !trace_trigger_fired(out, trigger))
                fprintf(stderr,
                        "tracectl: trigger \"%s\" was not activated (tracectl trigger %s); the recording ran "
                        "its whole time\n",
                        trigger, trigger);
        if (to_stdout) {
                /* Standard output holds the trace: nothing else goes there. */
                if (summary)
                        fprintf(stderr, "tracectl: trace written to the standard output\n");
                return ok;
        }
        if (summary && service_opens && out[strlen(out) - 1] == '/') {
                /* The service rotated into a directory of its own. */
                printf("Trace files written by the service into %s\n", out);
                return ok;
        }
        if (summary) {
                printf("Trace written to %s\n", out);
                if (service_opens && access(out, R_OK) < 0)
                        return ok; /* the service's file; we may not read it */
                r = print_trace_summary(out, 10);
                return r == EXIT_OK ? ok : r;
        }
        return ok;
}

static int attach_and_wait(struct tracectl *t, const char *key, bool stop) {
        int r = tracectl_connect(t);
        if (r != 0)
                return r;
        Perfetto__Protos__AttachRequest ar = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
        ar.key = (char *) key;
        r = tracectl_call(t, "Attach", &ar.base, &perfetto__protos__attach_response__descriptor, -EBADF, NULL, 5000);
        if (r < 0) {
                fprintf(stderr,
                        "tracectl: no detached session \"%s\" for this user (one that ended while detached is "
                        "gone, its output file complete)\n",
                        key);
                tracectl_disconnect(t);
                return EXIT_SESSION_FAILED;
        }
        record_catch_interrupt(SIGINT);
        if (stop)
                record_catch_interrupt(SIGTERM);
        else
                record_catch_detach(SIGTERM);
        struct consumer_session w = {};
        Perfetto__Protos__EnableTracingRequest en = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        en.has_attach_notification_only = true;
        en.attach_notification_only = true;
        int64_t id = consumer_enable_tracing(t->client, &en, -EBADF, &w);
        if (id < 0) {
                tracectl_disconnect(t);
                return EXIT_SESSION_FAILED;
        }
        if (stop)
                record_sig.interrupted = 1; /* flush, stop, wait */
        else if (isatty(STDERR_FILENO))
                fprintf(stderr, "Attached to session \"%s\": Ctrl-C stops it, SIGTERM (kill) detaches again.\n", key);
        struct record_watch watch = { .allow_missing = true, .progress = !stop, .detach_key = stop ? NULL : key };
        r = record_wait_session(t, &w, -EBADF, &watch);
        consumer_session_done(&w);
        tracectl_disconnect(t);
        if (r == EXIT_TAKEN) {
                printf("Session \"%s\" was attached from elsewhere (tracectl stop or attach): it goes on there.\n", key);
                return EXIT_OK;
        }
        if (r == EXIT_DETACHED) {
                printf("Session \"%s\" detached again: tracectl attach %s, or tracectl stop %s.\n", key, key, key);
                return EXIT_OK;
        }
        if (r == EXIT_OK)
                printf("Session \"%s\" ended.\n", key);
        if (r == EXIT_ENDED_EARLY)
                fprintf(stderr, "tracectl: session \"%s\" ended early: %s; its file holds what was recorded until "
                                "then\n",
                        key, trace_end_reason_text(watch.end_reason));
        return r;
}

int cmd_attach(struct tracectl *t, int argc, char **argv) {
        if (argc != 2 || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl attach KEY\n\nWaits for the detached session KEY to end, with its progress on a\n"
                       "terminal. Ctrl-C (SIGINT) stops it; SIGTERM detaches it again.\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        return attach_and_wait(t, argv[1], false);
}

int cmd_stop(struct tracectl *t, int argc, char **argv) {
        if (argc != 2 || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl stop KEY\n\nFlushes and stops the detached session KEY; its file is completed.\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        return attach_and_wait(t, argv[1], true);
}
