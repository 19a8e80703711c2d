#!/usr/bin/env bash
# Builds and tests Examples/BroadcastServer, from a clean clone as from a warm one:
#
#   swift build --build-tests   the server, the library (../..), Hummingbird, and the tests
#   swift test                  the integration tests (real HTTP on 127.0.0.1)
#
# Fails (non-zero) on a build error, on a compiler warning in the example's own Sources/ or
# Tests/, on a failing test, or when the run does not report passing tests. A first build
# takes 4 to 6 minutes on 2 cores (Hummingbird and SwiftNIO in debug); the tests take about
# 15 seconds. Headers, timing and the failure report come from the repository's .ci/lib.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../.ci/lib.sh"
cd "$here"
ci_begin "Examples/BroadcastServer"

ci_step "swift build --build-tests"
swift build --build-tests 2>&1 | tee "$CI_LOGS/build.log"
ci_no_warnings "$CI_LOGS/build.log" "$here"

ci_step "swift test"
swift test 2>&1 | tee "$CI_LOGS/test.log"
ci_no_warnings "$CI_LOGS/test.log" "$here"
ci_tests_passed "$CI_LOGS/test.log"
ci_end
