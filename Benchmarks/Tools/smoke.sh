#!/usr/bin/env bash
# Smoke test for the Benchmarks package (CI calls this; it checks that everything
# builds and runs, not how fast):
#   1. builds `compare` in release,
#   2. runs the harness tests and the overload test (swift test, Swift Testing),
#   3. runs every package-benchmark benchmark for at most 3 iterations on small
#      sizes, with no thresholds (MULTICAST_BENCH_SMOKE=1),
#   4. runs `compare --smoke` (every scenario, the cost scenario included), and the topics
#      scenario, which runs only when named (`--only topics`),
#   5. checks against.py's table (`--self-test`; the interleaved A/B itself is not run),
#   6. runs `compare --smoke --instructions` (callgrind over delivery-cell, deliveries and
#      joining and leaving, ~30 s) where valgrind is installed, and says it skipped it
#      where it is not, or when SMOKE_SKIP_INSTRUCTIONS=1 (the full CI run: its instruction
#      gate, the step after this one, counts every cell of ours).
# Exits non-zero on the first failure. Jobs: SWIFT_BUILD_JOBS (default: all cores).
set -euo pipefail

cd "$(dirname "$0")/.."   # Benchmarks/, the package
# Headers, timing and the failure report: the repository's shared CI helper.
source ../.ci/lib.sh
ci_begin "Benchmarks smoke"

jobs="${SWIFT_BUILD_JOBS:-$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)}"

ci_step "swift build -c release --product compare, delivery-cell (jobs: $jobs)"
swift build -c release -j "$jobs" --product compare
swift build -c release -j "$jobs" --product delivery-cell

ci_step "swift test (thresholds file, heap jitter, overload check: AsyncAlgorithms + AsyncMulticast imported together)"
# Release, and only the test product: reuses the release modules just built for
# compare instead of compiling everything again in debug (the test needs no
# @testable import). --disable-xctest: the tests use Swift Testing; this skips
# XCTest's empty "Executed 0 tests" run.
swift build -c release -j "$jobs" --product AsyncMulticastBenchmarksPackageTests
swift test -c release --skip-build --disable-xctest

ci_step "swift package benchmark (MULTICAST_BENCH_SMOKE=1: <= 3 iterations each, small sizes, no thresholds)"
log="$CI_LOGS/benchmark.log"
MULTICAST_BENCH_SMOKE=1 swift package -j "$jobs" benchmark --no-progress 2>&1 | tee "$log"
# A benchmark that reported an error is only listed, with exit code 0: catch it here.
if grep -q "The following benchmarks failed" "$log"; then
    ci_fail "some benchmarks failed (see the list above)"
fi

ci_step "compare --smoke"
.build/release/compare --smoke

ci_step "compare --smoke --only topics (fan-out by key; only when named)"
.build/release/compare --smoke --only topics

ci_step "Tools/against.py --self-test (the interleaved A/B's table; it builds and runs nothing)"
python3 Tools/against.py --self-test

if [[ "${SMOKE_SKIP_INSTRUCTIONS:-0}" == 1 ]]; then
    ci_step "compare --smoke --instructions: SKIPPED, the instruction gate counts the cells next (SMOKE_SKIP_INSTRUCTIONS=1)"
elif command -v valgrind >/dev/null 2>&1; then
    ci_step "compare --smoke --instructions (callgrind)"
    .build/release/compare --smoke --instructions
else
    ci_step "compare --smoke --instructions: SKIPPED, valgrind is not installed"
fi

ci_end
