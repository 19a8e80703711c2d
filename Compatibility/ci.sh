#!/usr/bin/env bash
# Builds and tests Compatibility/, from a clean clone as from a warm one:
#
#   swift build --build-tests   the library (..), swift-clocks, swift-async-algorithms,
#                               OpenCombine, the CombineBridge target and the tests
#   swift test                  the compatibility tests (no network, no real waiting)
#
# Fails (non-zero) on a build error, on a compiler warning in this package's own Sources/ or
# Tests/, on a failing test, or when the run does not report passing tests. The last line
# it prints is the test runner's summary. A first build takes about a minute on 2 cores;
# the tests take well under a second (each suite has a 2-minute limit that only a hang
# reaches).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/compatibility-ci.XXXXXX")"
started=$SECONDS
step="setup"
trap 'status=$?; if [[ $status -ne 0 ]]; then
    printf "\n**** Compatibility/ci.sh FAILED in step: %s (exit %d, after %d s)\n**** logs: %s\n" \
        "$step" "$status" "$((SECONDS - started))" "$logs" >&2
fi' EXIT

# Fails if the compiler log $1 has a warning located in this package's own sources.
no_warnings_in_own_sources() {
    local warnings
    warnings="$(grep -E "^$here/(Sources|Tests)/[^:]+\.swift:[0-9]+:[0-9]+: warning:" "$1" | sort -u || true)"
    if [[ -n "$warnings" ]]; then
        printf '%s\n' "$warnings" >&2
        printf '**** compiler warnings in Compatibility (above)\n' >&2
        return 1
    fi
}

step="swift build --build-tests"
printf '==== Compatibility: %s ====\n' "$step"
swift build --build-tests 2>&1 | tee "$logs/build.log"
no_warnings_in_own_sources "$logs/build.log"
printf -- '---- built in %d s\n' "$((SECONDS - started))"

step="swift test"
printf '==== Compatibility: %s ====\n' "$step"
swift test 2>&1 | tee "$logs/test.log"
no_warnings_in_own_sources "$logs/test.log"
grep -Eq "Test run with [0-9]+ tests? .*passed" "$logs/test.log" || {
    printf '**** the test run did not report passing Swift Testing tests\n' >&2
    exit 1
}
