#!/usr/bin/env bash
# Regenerates every figure the READMEs quote, from one measurement:
#
#   Benchmarks/Tools/figures.sh            measure (about 10 minutes on 2 cores), then render
#   Benchmarks/Tools/figures.sh --quick    the same with `compare --quick` (a few minutes; says so in the READMEs)
#   Benchmarks/Tools/figures.sh --smoke    seconds: checks the pipeline, the numbers mean nothing (not to commit)
#   Benchmarks/Tools/figures.sh --runs K   K runs of compare instead of 3
#   Benchmarks/Tools/figures.sh --render   no measuring: re-render from Results/figures.json
#   Benchmarks/Tools/figures.sh --check    no measuring: exit 1 if README.md, Benchmarks/README.md or
#                                          Results/deliveries.svg differ from what Results/figures.json renders (CI)
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

self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."   # Benchmarks/, the package

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
            sed -n '2,19p' "$self" | sed 's/^# \{0,1\}//'
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
    check) exec python3 Tools/figures.py check ;;
    render) exec python3 Tools/figures.py render ;;
esac

# How much of the machine's CPU other processes used while this script waited or measured: the
# whole machine's busy time from /proc/stat minus what this script's children (compare) used.
# `times` runs in this shell, never in a $(...) subshell (whose children's times start at zero).
ticks() { awk '/^cpu /{t=0; for (i = 2; i <= NF; i++) t += $i; print t, $5 + $6}' /proc/stat; }
children_seconds() {
    times >"$raw/.times"
    ours_now="$(awk 'NR==2 {split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1]*60 + u[2] + s[1]*60 + s[2]}' \
        "$raw/.times")"
}
hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
window_start() {
    read -r w_total w_idle < <(ticks)
    children_seconds
    w_ours="$ours_now"
}
# Sets others_now: the other processes' share of the machine's CPU since window_start, in per cent.
others_percent() {
    local total idle
    read -r total idle < <(ticks)
    children_seconds
    others_now="$(awk -v t="$((total - w_total))" -v i="$((idle - w_idle))" -v o="$ours_now" -v o0="$w_ours" \
        -v hz="$hz" 'BEGIN { if (t <= 0) { print 0; exit }
            p = ((t - i) / hz - (o - o0)) / (t / hz) * 100; printf "%.1f\n", (p < 0 ? 0 : p) }')"
}

started=$SECONDS
swift build -c release --product compare
swift build -c release --product delivery-cell

raw="$(mktemp -d "${TMPDIR:-/tmp}/figures.XXXXXX")"
echo "figures.sh: raw outputs and logs in $raw"
loads=()
others=()
files=()
for run in $(seq 1 "$runs"); do
    load="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
    loads+=(--load "$load")
    window_start
    sleep 3
    others_percent
    echo "figures.sh: compare --$mode, run $run of $runs (load average $load; other processes used" \
        "$others_now% of the CPU in the 3 s before)"
    if awk -v p="$others_now" 'BEGIN { exit !(p > 10) }'; then
        echo "figures.sh: warning: the machine is busy; the figures will show it" >&2
    fi
    window_start
    .build/release/compare "--$mode" --json "$raw/run-$run.json" | tee "$raw/run-$run.log"
    others_percent
    echo "figures.sh: other processes used $others_now% of the CPU during run $run"
    others+=(--others "$others_now")
    files+=("$raw/run-$run.json")
done

instructions=()
if command -v valgrind >/dev/null 2>&1; then
    realtime=()
    if [[ $(id -u) -eq 0 ]] && command -v chrt >/dev/null 2>&1; then
        realtime=(chrt -f 10)
    fi
    echo "figures.sh: ${realtime[*]:+${realtime[*]} }compare --$mode --instructions"
    window_start
    "${realtime[@]}" .build/release/compare "--$mode" --instructions --json "$raw/instructions.json" \
        | tee "$raw/instructions.log"
    others_percent
    instructions=(--instructions "$raw/instructions.json" --others-instructions "$others_now")
else
    echo "figures.sh: valgrind is not installed: no instruction counts (the README row is left out)" >&2
fi

python3 Tools/figures.py merge --mode "$mode" --seconds "$((SECONDS - started))" "${loads[@]}" "${others[@]}" \
    "${instructions[@]}" "${files[@]}"
python3 Tools/figures.py render
rm -f "$raw/.times"
echo "figures.sh: done in $((SECONDS - started)) s; commit Results/figures.json, Results/deliveries.svg and both READMEs"
