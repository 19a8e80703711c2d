#!/usr/bin/env bash
# Regenerates every figure the READMEs quote, from one measurement:
#
#   Benchmarks/figures.sh            measure (about 10 minutes on 2 cores), then render
#   Benchmarks/figures.sh --quick    the same with `compare --quick` (a few minutes; says so in the READMEs)
#   Benchmarks/figures.sh --smoke    seconds: checks the pipeline, the numbers mean nothing (not to commit)
#   Benchmarks/figures.sh --runs K   K runs of compare instead of 3
#   Benchmarks/figures.sh --render   no measuring: re-render from Results/figures.json
#   Benchmarks/figures.sh --check    no measuring: exit 1 if README.md, Benchmarks/README.md or
#                                    Results/deliveries.svg differ from what Results/figures.json renders (CI)
#
# Measuring: builds compare and delivery-cell (release), runs `compare --json` K times in a row
# (every scenario; implementations interleaved inside each run; latency and slow-producer switch
# themselves to SCHED_FIFO 10 when root), then `compare --instructions --json` once, under
# `chrt -f 10` when root (valgrind's serialized threads then are not interrupted by other load).
# figures.py merges the raw files with the machine, the Swift version, the date and the commit into
# Results/figures.json, and renders from it: the table between the figures markers of README.md, the
# results table of Benchmarks/README.md and the chart Results/deliveries.svg. Nothing is copied by hand.
# Run it on an otherwise idle machine; the raw outputs stay in a temporary folder (printed).
set -euo pipefail

cd "$(dirname "$0")"

mode=full
runs=3
action=measure
while [[ $# -gt 0 ]]; do
    case "$1" in
        --full | --quick | --smoke) mode="${1#--}" ;;
        --runs)
            runs="$2"
            shift
            ;;
        --render) action=render ;;
        --check) action=check ;;
        -h | --help)
            sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "figures.sh: unknown argument $1 (--help)" >&2
            exit 2
            ;;
    esac
    shift
done

case "$action" in
    check) exec python3 figures.py check ;;
    render) exec python3 figures.py render ;;
esac

started=$SECONDS
swift build -c release --product compare
swift build -c release --product delivery-cell

raw="$(mktemp -d "${TMPDIR:-/tmp}/figures.XXXXXX")"
echo "figures.sh: raw outputs and logs in $raw"
loads=()
files=()
for run in $(seq 1 "$runs"); do
    load="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
    loads+=(--load "$load")
    echo "figures.sh: compare --$mode, run $run of $runs (load average $load)"
    if awk -v l="${load%% *}" 'BEGIN { exit !(l > 1.0) }'; then
        echo "figures.sh: warning: the machine is busy (load average ${load%% *}); the figures will show it" >&2
    fi
    .build/release/compare "--$mode" --json "$raw/run-$run.json" | tee "$raw/run-$run.log"
    files+=("$raw/run-$run.json")
done

instructions=()
if command -v valgrind >/dev/null 2>&1; then
    realtime=()
    if [[ $(id -u) -eq 0 ]] && command -v chrt >/dev/null 2>&1; then
        realtime=(chrt -f 10)
    fi
    echo "figures.sh: ${realtime[*]:+${realtime[*]} }compare --$mode --instructions"
    "${realtime[@]}" .build/release/compare "--$mode" --instructions --json "$raw/instructions.json" \
        | tee "$raw/instructions.log"
    instructions=(--instructions "$raw/instructions.json")
else
    echo "figures.sh: valgrind is not installed: no instruction counts (the README row is left out)" >&2
fi

python3 figures.py merge --mode "$mode" --seconds "$((SECONDS - started))" "${loads[@]}" \
    "${instructions[@]}" "${files[@]}"
python3 figures.py render
echo "figures.sh: done in $((SECONDS - started)) s; commit Results/figures.json, Results/deliveries.svg and both READMEs"
