#!/usr/bin/env python3
"""Fails (exit 1) if a ThreadSanitizer log holds any report other than one known false
positive of the Swift runtime, which it lists separately.

The known one (https://github.com/swiftlang/swift/issues/57803): when a continuation is
resumed by another thread before its task reached the suspension point, the runtime's
early-return path in swift_continuation_await lacks the TSan acquire that the suspending
path has, so TSan pairs a read inside the stdlib's `UnsafeContinuation.resume` with a
write inside the stdlib's `withUnsafeContinuation`. Only a report whose *innermost* frames
on both sides are exactly those two stdlib functions is excused: a race in our own code
(our closure, our state) has our function as frame #0 and still fails the run.
This is a filter on the report, not a TSan suppression: TSan still checks everything.
"""
import re
import sys

text = open(sys.argv[1], errors="replace").read()
reports = re.findall(r"WARNING: ThreadSanitizer:.*?SUMMARY: ThreadSanitizer:[^\n]*", text, re.S)
if "WARNING: ThreadSanitizer" in text and not reports:
    print("tsan-check: a report without a SUMMARY line; treating it as a failure")
    sys.exit(1)

def innermost_frames(report):
    # The first frame (#0) after each access header ("Write of size", "Previous read of size"...).
    frames = []
    for block in re.split(r"\n  (?=(?:Previous )?(?:[Aa]tomic )?(?:[Rr]ead|[Ww]rite) of size)", report)[1:]:
        match = re.search(r"#0 (.*)", block)
        frames.append(match.group(1) if match else "")
    return frames

def is_known_runtime_false_positive(report):
    if "data race" not in report.split("\n", 1)[0]:
        return False
    frames = innermost_frames(report)
    if len(frames) != 2:
        return False
    kinds = set()
    for frame in frames:
        symbol = frame.split(" <")[0].split(" /")[0]  # drop the location
        if "AsyncMulticast" in symbol or symbol.startswith("closure"):
            return False  # our code is the innermost frame: a real report
        if re.match(r"(Swift\.)?withUnsafe(Throwing)?Continuation\b|\$ss2[0-9]withUnsafe", symbol):
            kinds.add("await")
        elif re.match(r"(Swift\.)?Unsafe(Throwing)?Continuation\.resume\b|\$sScc6resume", symbol):
            kinds.add("resume")
    return kinds == {"await", "resume"}

known = [r for r in reports if is_known_runtime_false_positive(r)]
unknown = [r for r in reports if not is_known_runtime_false_positive(r)]
if known:
    print(f"tsan-check: {len(known)} report(s) of the known Swift runtime false positive "
          "(swiftlang/swift#57803: withUnsafeContinuation vs UnsafeContinuation.resume)")
if unknown:
    print(f"tsan-check: {len(unknown)} ThreadSanitizer report(s) to fix:")
    for report in unknown:
        print(report)
    sys.exit(1)
print("tsan-check: no ThreadSanitizer report in our code")
