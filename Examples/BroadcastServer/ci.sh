#!/usr/bin/env bash
# Builds and tests Examples/BroadcastServer, from a clean clone as from a warm one:
#
#   swift build --build-tests   the servers (BroadcastServer, chat-rooms), the library (../..),
#                               Hummingbird, and the tests
#   swift test                  the integration tests of both (real HTTP and WebSocket on 127.0.0.1)
#
# Fails (non-zero) on a build error, on a compiler warning in the example's own Sources/ or
# Tests/, on a failing test, or when the run does not report passing tests. A first build
# takes 4 to 7 minutes on 2 cores (Hummingbird, hummingbird-websocket and SwiftNIO in debug);
# the tests (both servers') take about 15 seconds. Headers, timing and the failure report come from the repository's .ci/lib.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../.ci/lib.sh"
ci_begin "Examples/BroadcastServer"

ci_build_and_test "$here"
ci_end
