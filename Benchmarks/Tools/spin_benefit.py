#!/usr/bin/env python3
"""What the catch-up spin buys at N = 1: the `share` cell (share(buffering: .bounded(64)) over
the opaque upstream, one subscriber, the spin on as the library ships) against `share-nospin`
(the same with the spin off), run alternately so that a change of the machine between runs
hits both.

    python3 Benchmarks/Tools/spin_benefit.py [--pairs P] [--rounds R] [--elements M] [--no-instructions]

1. Instructions per delivery, callgrind, as `compare --instructions --quick` counts them:
   (Ir(M2) - Ir(M1)) / (M2 - M1) with M1 = 10,000 and M2 = 110,000, P pairs per cell
   (default 3), under `chrt -f 10` when root (as the instruction gate runs).
2. Wall and CPU time (the process's user + sys, every thread) per delivery of one run of
   M elements (default 2,000,000), R rounds (default 10), each round both cells in an order
   that alternates; not under chrt (how the library runs).

Prints every sample, each cell's median (range in brackets), the ratio spin off / spin on of
the medians, and the median of that ratio taken within each round (above 1.00: the spin saves
that much). Run it from anywhere on an otherwise
idle machine, after `swift build -c release --product delivery-cell` in Benchmarks/; needs
valgrind for 1. Linux only. About 2 minutes with the defaults.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = ("share", "share-nospin")
M1, M2 = 10_000, 110_000


def fail(message):
    print(f"spin_benefit.py: {message}", file=sys.stderr)
    sys.exit(2)


def arguments():
    options = {"--pairs": 3, "--rounds": 10, "--elements": 2_000_000}
    count_instructions = True
    args = sys.argv[1:]
    while args:
        arg = args.pop(0)
        if arg == "--no-instructions":
            count_instructions = False
        elif arg in options and args and args[0].isdigit() and int(args[0]) > 0:
            options[arg] = int(args.pop(0))
        else:
            fail(f"unknown or incomplete argument {arg!r} (see the top of this file)")
    return options["--pairs"], options["--rounds"], options["--elements"], count_instructions


def run_cell(command, cell, elements):
    """Runs delivery-cell CELL 1 M (under `command`); fails on a wrong sequence."""
    result = subprocess.run(command + [cell, "1", str(elements)], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{' '.join(command)} {cell} 1 {elements} exited {result.returncode}: {result.stderr.strip()}")


def callgrind_total(prefix, binary, cell, elements, folder):
    out = os.path.join(folder, f"callgrind.{cell}.M{elements}.out")
    run_cell(prefix + ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary], cell, elements)
    with open(out) as file:
        for line in file:
            if line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
        os.unlink(out)
    return total


def timed(binary, cell, elements):
    """Wall and CPU (user + sys of the child, every thread) seconds per delivery."""
    start = time.monotonic()
    process = subprocess.Popen([binary, cell, "1", str(elements)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        fail(f"{binary} {cell} 1 {elements} exited {os.waitstatus_to_exitcode(status)}: "
             f"{process.stderr.read().decode().strip()}")
    process.stderr.close()
    return wall / elements, (usage.ru_utime + usage.ru_stime) / elements


def summary(samples, decimals):
    middle = statistics.median(samples)
    return f"{middle:.{decimals}f} [{min(samples):.{decimals}f}-{max(samples):.{decimals}f}]", middle


def report(name, unit, values, decimals, scale=1.0):
    """Each cell's median and range; off / on of the medians, and the median (range) of the
    ratios taken within each round or pair, which a machine that changes speed between
    rounds leaves alone."""
    on, on_median = summary([v * scale for v in values["share"]], decimals)
    off, off_median = summary([v * scale for v in values["share-nospin"]], decimals)
    ratio = off_median / on_median if on_median > 0 else float("nan")
    paired = [off_value / on_value for on_value, off_value in zip(values["share"], values["share-nospin"])]
    print(f"  {name}: spin on {on} {unit}, spin off {off} {unit}: off / on {ratio:.2f}x; "
          f"within rounds {statistics.median(paired):.2f}x [{min(paired):.2f}-{max(paired):.2f}]")


def main():
    pairs, rounds, elements, count_instructions = arguments()
    binary = os.path.join(BENCHMARKS, ".build", "release", "delivery-cell")
    if not os.access(binary, os.X_OK):
        fail(f"no {binary}: swift build -c release --product delivery-cell (in Benchmarks/)")
    print("The catch-up spin at N = 1: share (spin on) against share-nospin (spin off), "
          "delivery-cell CELL 1 M, alternating.")

    if count_instructions:
        if shutil.which("valgrind") is None:
            fail("no valgrind on PATH (or pass --no-instructions)")
        prefix = ["chrt", "-f", "10"] if os.geteuid() == 0 and shutil.which("chrt") else []
        folder = tempfile.mkdtemp(prefix="spin-benefit.")
        # valgrind 3.19 cannot read the DWARF 5 debug info of the C parts (see compare --instructions).
        stripped = os.path.join(folder, "delivery-cell")
        subprocess.run(["strip", "--strip-debug", "-o", stripped, binary], check=True)
        print(f"1. callgrind, (Ir(M={M2}) - Ir(M={M1})) / {M2 - M1} per delivery, {pairs} pairs per cell"
              + (", under chrt -f 10" if prefix else " (not root: without chrt)"))
        counts = {cell: [] for cell in CELLS}
        for pair in range(pairs):
            for cell in CELLS if pair % 2 == 0 else reversed(CELLS):
                small = callgrind_total(prefix, stripped, cell, M1, folder)
                large = callgrind_total(prefix, stripped, cell, M2, folder)
                counts[cell].append((large - small) / (M2 - M1))
                print(f"    {cell} pair {pair + 1}: {counts[cell][-1]:.1f} Ir/delivery", flush=True)
        os.unlink(stripped)
        os.rmdir(folder)
        report("instructions", "Ir/delivery", counts, 0)

    print(f"2. wall and CPU time per delivery, M = {elements}, {rounds} rounds")
    walls = {cell: [] for cell in CELLS}
    cpus = {cell: [] for cell in CELLS}
    for round in range(rounds):
        for cell in CELLS if round % 2 == 0 else reversed(CELLS):
            wall, cpu = timed(binary, cell, elements)
            walls[cell].append(wall)
            cpus[cell].append(cpu)
            print(f"    {cell} round {round + 1}: wall {wall * 1e9:.1f} ns, CPU {cpu * 1e9:.1f} ns per delivery",
                  flush=True)
    report("wall", "ns/delivery", walls, 1, scale=1e9)
    report("CPU", "ns/delivery", cpus, 1, scale=1e9)


if __name__ == "__main__":
    main()
