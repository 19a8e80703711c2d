#!/usr/bin/env python3
"""Interleaved A/B of `compare` between a base commit and the working tree.

    python3 Benchmarks/Tools/against.py BASE [--runs K] [--rounds N] [--builds B] [--only S,S] [--json FILE]

Both sides run the working tree's harness (Benchmarks/): only the library's sources differ
(`git archive BASE Package.swift Sources` on one side, the working tree's on the other), so
a change to the harness cannot pass for a change to the library. Each side is built B times
(default 3), each with its code laid out differently: build b aligns every function to
16 * 2^b bytes (b = 0: the compiler's default), in a folder of its own. On this kind of
machine two builds of the same sources, differing only in their folder, measured up to 5-12%
apart on some fan-out cases, as much as some library changes: a change that only moved
things can look like a regression or a speed-up (Mytkowicz et al., "Producing wrong data
without doing anything obviously wrong!", ASPLOS 2009). So each figure is compared layout by
layout (the base and the working tree built alike), and only a difference that holds in
every layout, and is larger than the spread between layouts, is the library's.

Then K runs (default 3), one after the other; in each, every scenario (`--only`, default
fanout,subject,churn,memory,cancel) goes N rounds (default 31), and each round runs every
build once, in a shuffled order, `compare --quick --only S --impls ours --json
--heap-jitter H --cancel-samples 400` (under `chrt -f 10` when root; 400 cancellations, not
--quick's 100, so that a p99 is not the second-largest of 100 samples). H is drawn anew each round and is the same
for every build of the round: it lays each AsyncMulticast cell out differently in the heap
(compare's HeapJitter.swift), so each median is taken over many heap layouts, not measured
in one that happens to favour one side (a 128-byte allocation more at the storage's creation
once shrank a 13-14% fan-out difference to 0-3%).

The table gives, per figure, each side's median per run; the working tree against the base
per run and per layout, each the median of ratios taken within a round, so that the machine
changing speed between rounds cancels out (above 1.00 is better, whichever way the figure
goes); the largest spread between layouts of one side; and a verdict: `worse` or `better`
when every layout and every run says so by more than that spread and by more than 1%, `n/a`
when the figure is missing on a side or in a layout, else `same`. Process CPU is the CPU
time of each compare run.

Takes about 10 minutes for the builds and 5 for the runs on 2 cores; run it on an idle
machine. Nothing here runs in CI: it is for a change that claims a speed-up, or that must
show no regression against a release or an earlier state (paste its table in the note).
"""

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))  # Benchmarks/Tools
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
SCENARIOS = ["fanout", "subject", "churn", "memory", "cancel"]
# The smallest difference a verdict reports, whatever the spread: 1% (a heap figure that
# moves by 0.02 bytes in 88 is not worse).
MINIMUM_EFFECT = 1.01
# Cancellation samples per compare run: --quick's 100 make its p99 the second-largest sample.
CANCEL_SAMPLES = 400
# Figures where lower is better; every other figure is a rate.
LOWER = ("process CPU", "return-p50", "return-p99", "upstream-end-p50", "upstream-end-p99", "heap")


class Failure(Exception):
    """Stops the script with its message (the scratch folder is removed first)."""


def prepare(folder, base):
    """A package tree in `folder`: the working tree's Benchmarks, and the library of `base`
    (a commit) or of the working tree (`base` None)."""
    os.makedirs(folder)
    shutil.copytree(
        BENCH, os.path.join(folder, "Benchmarks"),
        ignore=shutil.ignore_patterns(".build", ".build-*", "Package.resolved", "Results"))
    if base is None:
        shutil.copy(os.path.join(ROOT, "Package.swift"), folder)
        shutil.copytree(os.path.join(ROOT, "Sources"), os.path.join(folder, "Sources"))
    else:
        archive = subprocess.run(["git", "-C", ROOT, "archive", base, "Package.swift", "Sources"], capture_output=True)
        if archive.returncode != 0:
            raise Failure(f"git archive {base} Package.swift Sources failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)


def layout_flags(b):
    """The compiler flags of build `b`: the default layout, then functions aligned to 32, 64, ... bytes."""
    return [] if b == 0 else ["-Xswiftc", "-Xllvm", "-Xswiftc", f"-align-all-functions={4 + b}"]


def build(folder, b):
    result = subprocess.run(
        ["swift", "build", "-c", "release", "--product", "compare"] + layout_flags(b),
        cwd=os.path.join(folder, "Benchmarks"), capture_output=True, text=True)
    if result.returncode != 0:
        raise Failure(f"building compare in {folder} failed (does the working tree's harness "
                      f"compile against that library?):\n{result.stdout[-3000:]}{result.stderr[-2000:]}")
    return os.path.join(folder, "Benchmarks", ".build", "release", "compare")


def measure(binary, scenario, scratch, heap):
    """One compare run in heap layout `heap`: {(figure, case): value}, process CPU included."""
    out = os.path.join(scratch, "one.json")
    command = [binary, "--quick", "--only", scenario, "--impls", "ours", "--json", out, "--heap-jitter", str(heap),
               "--cancel-samples", str(CANCEL_SAMPLES)]
    if os.geteuid() == 0 and shutil.which("chrt"):
        command = ["chrt", "-f", "10"] + command
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise Failure(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    figures = {("process CPU", ""): after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime}
    with open(out) as file:
        for record in json.load(file)["records"]:
            if record["metric"] == "delivered":
                continue
            case = " ".join(x for x in [record.get("policy", ""), f"N={record['n']}" if "n" in record else ""] if x)
            figures[(record["metric"], case)] = statistics.median(record["samples"])
    return figures


def middle(values):
    """The median, or None without values (a figure compare did not give in some run)."""
    return statistics.median(values) if values else None


def ratio(base, head, lower):
    """The working tree against the base, above 1 when it is better; None when a side is
    missing, or when the figure it would divide by is 0 and the other is not."""
    if base is None or head is None:
        return None
    if base == head:
        return 1.0
    divisor = head if lower else base
    if divisor == 0:
        return None
    return base / head if lower else head / base


def paired_ratios(base_samples, head_samples, lower):
    """The ratio of each round's two samples (the i-th of each list: every round adds one
    per build); None when the lists are empty, of different lengths, or a ratio is undefined."""
    if not base_samples or len(base_samples) != len(head_samples):
        return None
    ratios = [ratio(b, h, lower) for b, h in zip(base_samples, head_samples)]
    return None if None in ratios else ratios


def pooled(ratio_lists):
    """The median of all the ratios in `ratio_lists`; None if any list is None (missing)."""
    if not ratio_lists or None in ratio_lists:
        return None
    return middle([x for ratios in ratio_lists for x in ratios])


def table(data, sides, runs, builds):
    """Markdown: one row per (scenario, figure, case)."""
    base, head = sides
    lines = [
        f"| scenario | figure | case | {base}: median per run | working tree: median per run "
        f"| working tree vs {base}, per run | per layout | spread between layouts | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(data, key=lambda k: (SCENARIOS.index(k[0]) if k[0] in SCENARIOS else 99, k[1], k[2])):
        scenario, figure, case = key
        cells = data[key]
        lower = figure.startswith(LOWER)
        medians = {side: [middle([v for b in range(builds) for v in cells[side][r][b]]) for r in range(runs)]
                   for side in sides}
        # Ratios of samples taken in the same round, then their median: a round runs every
        # build within seconds, so a change of the machine's speed between rounds (this
        # kind of VM has two, 2.5x apart) cancels out instead of weighing on one layout.
        paired = {(r, b): paired_ratios(cells[base][r][b], cells[head][r][b], lower)
                  for r in range(runs) for b in range(builds)}
        per_run = [pooled([paired[(r, b)] for b in range(builds)]) for r in range(runs)]
        per_layout = [pooled([paired[(r, b)] for r in range(runs)]) for b in range(builds)]
        # How far the layouts of one side are apart: each build against build 0 of the same
        # side, round by round.
        spread = 1.0
        for side in sides:
            factors = [1.0] + [pooled([paired_ratios(cells[side][r][0], cells[side][r][b], False)
                                       for r in range(runs)]) for b in range(1, builds)]
            factors = [f for f in factors if f]
            spread = max(spread, max(factors) / min(factors))
        # Every layout and every run must say so, by more than the spread and than 1%; a
        # figure missing anywhere, or measured in one layout only, gets no verdict.
        verdict = "n/a"
        bar = max(spread, MINIMUM_EFFECT)
        ratios = per_layout + per_run
        if builds >= 2 and ratios and None not in ratios:
            verdict = "worse" if max(ratios) < 1 / bar else "better" if min(ratios) > bar else "same"
        fmt = lambda values, digits=".4g": " / ".join("n/a" if v is None else f"{v:{digits}}" for v in values)
        lines.append(f"| {scenario} | {figure} | {case} | {fmt(medians[base])} | {fmt(medians[head])} "
                     f"| {fmt(per_run, '.3f')} | {fmt(per_layout, '.3f')} | {spread:.3f} | {verdict} |")
    return "\n".join(lines)


def self_test():
    """The table from made-up figures (smoke.sh runs this; it builds nothing)."""
    sides = ("base", "head")
    data = {("cancel", "return-p50", ""): {"base": [[[2.0], [2.0]]], "head": [[[1.0], [1.0]]]},
            ("fanout", "rate", "N=1"): {"base": [[[100.0], [110.0]]], "head": [[[50.0], [55.0]]]}}
    data[("cancel", "return-p99", "")] = {"base": [[[4.0], []]], "head": [[[], []]]}
    text = table(data, sides, runs=1, builds=2)
    assert "| cancel | return-p50 |  | 2 | 1 | 2.000 | 2.000 / 2.000 | 1.000 | better |" in text, text
    assert "| fanout | rate | N=1 | 105 | 52.5 | 0.500 | 0.500 / 0.500 | 1.100 | worse |" in text, text
    # A figure missing on one side, or in one layout, gets no verdict.
    assert "| cancel | return-p99 |  | 4 | n/a | n/a | n/a / n/a | 1.000 | n/a |" in text, text
    data = {("fanout", "rate", "N=16"): {"base": [[[100.0], [100.0]]], "head": [[[50.0], []]]}}
    assert "| 0.500 / n/a | 1.000 | n/a |" in table(data, sides, runs=1, builds=2)
    # A difference within the spread between layouts is no verdict, even in one direction.
    data = {("subject", "rate", "N=1"): {"base": [[[100.0], [100.0]]], "head": [[[102.0], [110.0]]]}}
    assert "| 1.020 / 1.100 | 1.078 | same |" in table(data, sides, runs=1, builds=2)
    # Nor is one smaller than 1%, however steady.
    data = {("memory", "heap", "N=10000"): {"base": [[[88.19], [88.19]]], "head": [[[88.21], [88.21]]]}}
    assert "| 1.000 | same |" in table(data, sides, runs=1, builds=2)
    # Nor one that some run contradicts.
    data = {("churn", "joins", ""): {"base": [[[100.0], [100.0]], [[100.0], [100.0]]],
                                     "head": [[[130.0], [130.0]], [[90.0], [90.0]]]}}
    assert "| 1.300 / 0.900 | 1.100 / 1.100 | 1.000 | same |" in table(data, sides, runs=2, builds=2)
    # Nor one measured in a single layout.
    data = {("churn", "joins", ""): {"base": [[[100.0]]], "head": [[[80.0]]]}}
    assert "| 0.800 | 0.800 | 1.000 | n/a |" in table(data, sides, runs=1, builds=1)
    # A slow round (the machine's other speed) weighs on no layout: rounds are compared within.
    data = {("fanout", "rate", "N=16"): {"base": [[[100.0, 100.0, 40.0], [100.0, 40.0, 40.0]]],
                                         "head": [[[100.0, 100.0, 40.0], [100.0, 40.0, 40.0]]]}}
    assert "| 1.000 | 1.000 / 1.000 | 1.000 | same |" in table(data, sides, runs=1, builds=2)
    # Zero: equal zeros are the same; a zero divisor is no ratio.
    assert ratio(0.0, 0.0, True) == 1.0 and ratio(0.0, 5.0, False) is None and ratio(5.0, 0.0, True) is None
    print("against.py: self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", nargs="?", help="the commit to measure the working tree against")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--json", help="also write every sample here")
    parser.add_argument("--self-test", action="store_true")
    options = parser.parse_args()
    if options.self_test:
        return self_test()
    if not options.base:
        parser.error("a base commit is needed")
    if options.builds < 2:
        parser.error("--builds takes 2 or more: a verdict needs layouts to agree")
    base = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "--short", options.base + "^{commit}"],
                          capture_output=True, text=True)
    if base.returncode != 0:
        sys.exit(f"against.py: {options.base} is not a commit of this repository")
    base = base.stdout.strip()
    scenarios = options.only.split(",")
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            sys.exit(f"against.py: --only takes {','.join(SCENARIOS)}, not {scenario}")

    scratch = tempfile.mkdtemp(prefix="asyncmulticast-against-")
    try:
        measure_all(options, base, scenarios, scratch)
    except Failure as failure:
        sys.exit(f"against.py: {failure}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure_all(options, base, scenarios, scratch):
    print(f"against.py: building {options.builds} x 2 in {scratch}", flush=True)
    binaries = {base: [], "working tree": []}
    for b in range(options.builds):
        for side in binaries:
            # Each build its own code layout (`layout_flags`), and its own path, as separate clones have.
            folder = os.path.join(scratch, f"{'base' if side == base else 'tree'}-{b}" + "x" * b)
            prepare(folder, base if side == base else None)
            binaries[side].append(build(folder, b))
            print(f"against.py: built {side} #{b + 1}", flush=True)

    sides = (base, "working tree")
    data = {}
    for r in range(options.runs):
        for scenario in scenarios:
            for _ in range(options.rounds):
                order = [(side, b) for side in sides for b in range(options.builds)]
                random.shuffle(order)
                heap = random.getrandbits(32)  # this round's heap layout, the same for every build
                for side, b in order:
                    for (figure, case), value in measure(binaries[side][b], scenario, scratch, heap).items():
                        cells = data.setdefault((scenario, figure, case), {
                            s: [[[] for _ in range(options.builds)] for _ in range(options.runs)] for s in sides})
                        cells[side][r][b].append(value)
        print(f"against.py: run {r + 1} of {options.runs} done (load {os.getloadavg()[0]:.2f})", flush=True)
    # The samples first: a problem in the table must not lose them.
    if options.json:
        with open(options.json, "w") as file:
            json.dump({"base": base, "runs": options.runs, "rounds": options.rounds, "builds": options.builds,
                       "figures": [{"scenario": k[0], "figure": k[1], "case": k[2], "samples": v}
                                   for k, v in data.items()]}, file)
    print()
    print(table(data, sides, options.runs, options.builds))


if __name__ == "__main__":
    main()
