#!/usr/bin/env bash
# Counts the catch-up waits (Sources/AsyncMulticast/Engine/CatchUpSpin.swift) that the
# slow-producer scenario of `compare` pays, without changing the library: Linux uprobes on
# the compare binary's CatchUpSpin.waitForOffers (each time a caught-up sole subscriber may
# wait) and CatchUpSpin.spin (each wait actually made; its return value says whether the
# producer offered something meanwhile), attributed to each run of the scenario by a probe
# on its entry point. Needs root (or CAP_SYS_ADMIN for tracefs), perf, and a release build:
#
#   swift build -c release --product compare
#   sudo ./catchup-waits.sh              # compare --only slowproducer (full: 10,000 elements a run)
#   sudo ./catchup-waits.sh --quick      # other compare options are passed on
#
# The probes' own traps cost a few µs each, so the CPU table compare prints under this
# script is inflated; read the counts (and the durations as upper bounds), not that table.
set -euo pipefail

cd "$(dirname "$0")"
binary="$(pwd)/.build/release/compare"
tracing=/sys/kernel/tracing
[ -x "$binary" ] || { echo "build compare first: swift build -c release --product compare" >&2; exit 1; }
[ -e "$tracing/uprobe_events" ] || mount -t tracefs nodev "$tracing"

group=compare_catchup
remove_probes() {
    for event in wait spin spinret mark_stream mark_share mark_subject; do
        echo "-:$group/$event" >>"$tracing/uprobe_events" 2>/dev/null || true
    done
}
remove_probes  # left over from an interrupted run
symbols="$(mktemp)"
data="$(mktemp)"
trap 'remove_probes; rm -f "$symbols" "$data"' EXIT
nm "$binary" | swift demangle >"$symbols"

# The address of the first symbol whose demangled name matches $1 (a regex); the text
# segment is mapped at file offset 0, so this is also the probe's offset.
address() {
    local found
    found="$(grep -E "$1" "$symbols" | grep -v 'async function pointer' | head -1 | awk '{print $1}')"
    [ -n "$found" ] || { echo "no symbol matches: $1" >&2; exit 1; }
    echo "0x$found"
}
# The copies the storage calls (specialised for its default `eachRound` closure).
wait_at="$(address '^[0-9a-f]+ t function signature specialization .* of AsyncMulticast\.CatchUpSpin\.waitForOffers')"
spin_at="$(address '^[0-9a-f]+ t function signature specialization .* of AsyncMulticast\.CatchUpSpin\.spin')"
run='of MulticastScenarios\.slowProducerRun'
{
    echo "p:$group/wait $binary:$wait_at"
    echo "p:$group/spin $binary:$spin_at"
    echo "r:$group/spinret $binary:$spin_at ret=%ax:u8"
    echo "p:$group/mark_stream $binary:$(address "generic specialization <Swift\.AsyncStream<Swift\.Int>> $run")"
    echo "p:$group/mark_share $binary:$(address "generic specialization <AsyncMulticast\.AsyncShareSequence<Swift\.AsyncStream<Swift\.Int>>> $run")"
    echo "p:$group/mark_subject $binary:$(address "generic specialization <AsyncMulticast\.AsyncPassthroughSubject<Swift\.Int, Swift\.Never>> $run")"
} >>"$tracing/uprobe_events"

perf record -q -e "$group:*" -o "$data" -- "$binary" --only slowproducer "$@"

echo
echo "Catch-up waits per run of the slow-producer scenario (the first run of each variant is its warm-up):"
perf script --ns -i "$data" -F tid,time,event,trace 2>/dev/null | awk '
    function flush() {
        if (variant != "")
            printf "%-8s %9d %8d %9d %8d %14.1f %12.2f\n", variant, considered, waits, fruitless, waits - fruitless,
                total * 1e6, (waits ? total / waits * 1e6 : 0)
    }
    BEGIN {
        printf "%-8s %9s %8s %9s %8s %14s %12s\n", "variant", "catch-ups", "waits", "fruitless", "fruitful",
            "waited us", "us per wait"
    }
    {
        tid = $1; time = $2 + 0; sub(":", "", $2)
        event = $3; sub(/^compare_catchup:/, "", event); sub(/:$/, "", event)
        if (event ~ /^mark_/) {
            flush(); variant = substr(event, 6); considered = waits = fruitless = total = 0; next
        }
        if (event == "wait") considered++
        else if (event == "spin") { waits++; started[tid] = time }
        else if (event == "spinret") {
            if ($0 ~ /ret=0([^0-9x]|$)/ || $0 ~ /ret=0x0([^0-9a-f]|$)/) fruitless++
            if (tid in started) { total += time - started[tid]; delete started[tid] }
        }
    }
    END { flush() }'
echo "(catch-ups: a caught-up sole subscriber found nothing and may wait; waits: it did (no backoff, token"
echo " taken); fruitless: the producer offered nothing meanwhile. \"waited\" includes the probes' own overhead."
echo " \"stream\" rows are (a) and (d): both consume an AsyncStream<Int>, and neither has a catch-up spin.)"
