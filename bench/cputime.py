#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cputime.py OUT COMMAND [ARG...]: runs COMMAND and writes the user and
system CPU seconds of it and of the descendants it waited for to OUT, as
"USER SYS" to the microsecond: what /usr/bin/time -f "%U %S" -o OUT
writes in hundredths, which is a step of 5 % of the 0.2 s of CPU a
10-second recording of the benches takes. Exits as COMMAND did
(128 + N when signal N ended it); SIGINT and SIGQUIT reach COMMAND from
the terminal and are ignored here while it runs, as GNU time does."""

import os
import signal
import sys


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: cputime.py OUT COMMAND [ARG...]\n")
        return 2
    out, cmd = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        except OSError as e:
            sys.stderr.write(f"cputime.py: {cmd[0]}: {e.strerror}\n")
            os._exit(127)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    _, status, ru = os.wait4(pid, 0)
    with open(out, "w") as f:
        f.write(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f}\n")
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
