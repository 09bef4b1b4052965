#!/usr/bin/env python3
"""Runs several commands in turn, ROUNDS times round-robin, and prints each
one's fastest wall time in seconds ("LABEL SECONDS" per line). Interleaved,
so a slow minute on a shared machine slows every command alike instead of
whichever one ran in it; every other round runs them in reverse order, so
no command always follows the same one.

With --pair A/B (repeatable) it also prints "A/B RATIO": the median over
the rounds of A's time over B's in the same round. Each round's two runs
are seconds apart, so the machine's slow phases cancel out of the ratio;
the fastest of each, taken in different rounds, does not cancel them.
Usage: interleave.py ROUNDS [--pair A/B ...] 'LABEL:command args' ..."""
import shlex
import statistics
import subprocess
import sys
import time

args = sys.argv[1:]
rounds = int(args.pop(0))
pairs = []
while args and args[0] == "--pair":
    args.pop(0)
    pairs.append(tuple(args.pop(0).split("/", 1)))
commands = []
for spec in args:
    label, _, line = spec.partition(":")
    commands.append((label, shlex.split(line)))
times = {label: [] for label, _ in commands}
for r in range(rounds):
    for label, argv in commands if r % 2 == 0 else reversed(commands):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times[label].append(time.perf_counter() - start)
for label, _ in commands:
    print(label, f"{min(times[label]):.4f}")
for a, b in pairs:
    ratios = [x / y for x, y in zip(times[a], times[b])]
    print(f"{a}/{b}", f"{statistics.median(ratios):.4f}")
