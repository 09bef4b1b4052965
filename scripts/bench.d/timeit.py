#!/usr/bin/env python3
"""Prints the fastest wall time, in seconds, of RUNS runs of a command.
Usage: timeit.py RUNS command [args...]"""
import subprocess
import sys
import time

runs = int(sys.argv[1])
best = None
for _ in range(runs):
    start = time.perf_counter()
    subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
print(f"{best:.4f}")
