#!/usr/bin/env bash
# Builds and tests Compatibility/, from a clean clone as from a warm one:
#
#   swift build --build-tests   the library (..), swift-clocks, swift-async-algorithms,
#                               OpenCombine, swift-metrics, the CombineBridge and
#                               MulticastMetrics targets and the tests
#   swift test                  the compatibility tests (no network, no real waiting)
#
# Fails (non-zero) on a build error, on a compiler warning in this package's own Sources/ or
# Tests/, on a failing test, or when the run does not report passing tests. A first build
# takes about a minute on 2 cores; the tests take well under a second (each suite has a
# 2-minute limit that only a hang reaches). Headers, timing and the failure report come from
# the repository's .ci/lib.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../.ci/lib.sh"
ci_begin "Compatibility"

ci_build_and_test "$here"
ci_end
