#!/usr/bin/env python3
"""Runs several commands in turn, ROUNDS times round-robin, and prints each
one's fastest wall time in seconds ("LABEL SECONDS" per line). Interleaved,
so a slow minute on a shared machine slows every command alike instead of
whichever one ran in it.
Usage: interleave.py ROUNDS 'LABEL:command args' ..."""
import shlex
import subprocess
import sys
import time

rounds = int(sys.argv[1])
commands = []
for spec in sys.argv[2:]:
    label, _, line = spec.partition(":")
    commands.append((label, shlex.split(line)))
best = {}
for _ in range(rounds):
    for label, argv in commands:
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - start
        best[label] = min(best.get(label, elapsed), elapsed)
for label, _ in commands:
    print(label, f"{best[label]:.4f}")
