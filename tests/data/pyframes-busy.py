# A CPython workload for linux.bpf_stack's Python frames
# (tests/integration/test-bpfstack-python.c): loop calls work, which runs
# a recursive fib and then csum (the builtin sum, C code called from
# Python), and rest, which sleeps; main runs loop, and with
# "threads" a second thread runs it too. Runs until killed, or for
# argv[1] rounds (-1: until killed).
import sys
import threading
import time


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def csum():
    return sum(range(150000))


def work():
    total = 0
    for _ in range(3):
        total += fib(24)
    return total + csum()


def rest():
    time.sleep(0.02)


def loop(rounds):
    while rounds != 0:
        work()
        rest()
        rounds -= 1


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else -1
    if len(sys.argv) > 2 and sys.argv[2] == "threads":
        threading.Thread(target=loop, args=(rounds,), daemon=True).start()
    loop(rounds)


main()
