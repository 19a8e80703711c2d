# The steps every CI script here has in common, sourced by .ci/run, Benchmarks/Tools/smoke.sh,
# Compatibility/ci.sh and Examples/*/ci.sh, so that they all print, time, log and clean up the
# same way:
#
#   source "$repo/.ci/lib.sh"
#   ci_begin "Examples/BroadcastServer"      # a name for headers; a logs folder; the exit trap
#   ci_step "swift build --build-tests"      # a header; ends (and times) the step before it
#   swift build --build-tests 2>&1 | tee "$CI_LOGS/build.log"
#   ci_no_warnings "$CI_LOGS/build.log" "$here"
#   ci_on_exit "rm -rf '$tmp'"               # runs at exit, on failure too, last added first
#   ci_build_and_test "$here"                # or both steps of a nested package's check
#   ci_end                                   # ends the last step; prints the total time
#
# On a failing command (set -e) or `ci_fail MESSAGE`, the script exits non-zero with one line
# that names its step and its logs folder. Meant for bash with `set -euo pipefail`.

CI_NAME=""
CI_LOGS=""
CI_STEP=""
CI_STARTED=$SECONDS
CI_STEP_STARTED=$SECONDS
CI_REPORTED=0
CI_EXIT_STATUS=0
CI_CLEANUPS=()
CI_STEP_NUMBER=0
CI_STEP_TOTAL=""   # set it to number the steps' headers "k/N"

# Puts the toolchain on PATH when a non-login shell has not (CI images keep it in /opt/swift).
if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

# ci_begin NAME: starts the script's clock, makes its logs folder ($CI_LOGS) and sets the trap
# that reports a failure and runs the cleanups.
ci_begin() {
    CI_NAME="$1"
    CI_STARTED=$SECONDS
    local slug="${CI_NAME//[^A-Za-z0-9]/-}"
    CI_LOGS="$(mktemp -d "${TMPDIR:-/tmp}/ci-${slug,,}.XXXXXX")"
    trap ci_exit_trap EXIT
}

ci_exit_trap() {
    local status=$?
    local i
    CI_EXIT_STATUS=$status   # cleanups may read it (a failed run's cleanup prints more)
    for ((i = ${#CI_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${CI_CLEANUPS[i]}" || true
    done
    if [[ $status -ne 0 && $CI_REPORTED -eq 0 ]]; then
        printf '\n**** FAILED: %s: %s (exit %d, after %d s)\n**** logs: %s\n' \
            "$CI_NAME" "${CI_STEP:-setup}" "$status" "$((SECONDS - CI_STARTED))" "$CI_LOGS" >&2
    fi
    exit "$status"
}

# ci_on_exit COMMAND: runs COMMAND (a string, evaluated) when the script exits, however it
# exits. Cleanups run last added first; $CI_EXIT_STATUS is the script's exit status.
ci_on_exit() {
    CI_CLEANUPS+=("$1")
}

# ci_step TITLE: ends the current step (printing its time) and starts the next one.
ci_step() {
    ci_step_done
    CI_STEP_NUMBER=$((CI_STEP_NUMBER + 1))
    CI_STEP="$1"
    if [[ -n "$CI_STEP_TOTAL" ]]; then CI_STEP="$CI_STEP_NUMBER/$CI_STEP_TOTAL $1"; fi
    CI_STEP_STARTED=$SECONDS
    printf '\n==== %s: %s ====\n' "$CI_NAME" "$CI_STEP"
}

ci_step_done() {
    if [[ -n "$CI_STEP" ]]; then
        printf -- '---- ok: %s (%d s)\n' "$CI_STEP" "$((SECONDS - CI_STEP_STARTED))"
        CI_STEP=""
    fi
}

# ci_end: ends the last step and prints the script's total time.
ci_end() {
    ci_step_done
    printf '\n==== %s: all steps passed in %d s (logs: %s) ====\n' \
        "$CI_NAME" "$((SECONDS - CI_STARTED))" "$CI_LOGS"
}

# ci_fail MESSAGE: stops the script with MESSAGE, naming the step and the logs.
ci_fail() {
    CI_REPORTED=1
    printf '\n**** FAILED: %s: %s\n**** %s\n**** logs: %s\n' \
        "$CI_NAME" "${CI_STEP:-setup}" "$1" "$CI_LOGS" >&2
    exit 1
}

# ci_no_warnings LOG [DIR]: fails if the compiler log LOG has a warning located in DIR's own
# Sources/ or Tests/ (DIR: an absolute path; by default any Sources/ or Tests/ path, right for
# a package without dependencies). Dependencies' warnings are not ours to fix.
ci_no_warnings() {
    local log="$1" prefix="(^|/)"
    if [[ $# -ge 2 ]]; then prefix="^$2/"; fi
    local warnings
    warnings="$(grep -E "${prefix}(Sources|Tests)/[^:]+\.swift:[0-9]+:[0-9]+: warning:" "$log" | sort -u || true)"
    if [[ -n "$warnings" ]]; then
        printf '%s\n' "$warnings" >&2
        ci_fail "compiler warnings in our own sources (listed above)"
    fi
}

# ci_build_and_test DIR: the two steps of a nested package's check: `swift build
# --build-tests` and `swift test` in DIR (an absolute path), failing on a warning in DIR's own
# Sources/ or Tests/ or on a run that does not report passing tests.
ci_build_and_test() {
    local dir="$1"
    ci_step "swift build --build-tests"
    (cd "$dir" && swift build --build-tests) 2>&1 | tee "$CI_LOGS/build.log"
    ci_no_warnings "$CI_LOGS/build.log" "$dir"
    ci_step "swift test"
    (cd "$dir" && swift test) 2>&1 | tee "$CI_LOGS/test.log"
    ci_no_warnings "$CI_LOGS/test.log" "$dir"
    ci_tests_passed "$CI_LOGS/test.log"
}

# ci_tests_passed LOG: fails unless LOG has Swift Testing's summary of a passing run.
ci_tests_passed() {
    grep -Eq "Test run with [0-9]+ tests? .*passed" "$1" \
        || ci_fail "the run did not report passing Swift Testing tests ($1)"
}
