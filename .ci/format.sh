#!/usr/bin/env bash
# The Swift files CI lints and a contributor formats: one list, used by both.
#
#   bash .ci/format.sh          formats them in place with the checked-in .swift-format (before a commit)
#   bash .ci/format.sh --lint   lints them as .ci/run does (its format step): any finding fails
#
# The library, its tests and the nested packages' Swift code (Benchmarks, Compatibility);
# Examples/ is not in the list (CI has never linted it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
paths=(
    Package.swift Sources Tests
    Benchmarks/Package.swift Benchmarks/Sources Benchmarks/Benchmarks Benchmarks/Tests
    Compatibility/Package.swift Compatibility/Sources Compatibility/Tests
)

case "${1:-}" in
    "") exec swift format format --in-place --recursive --parallel "${paths[@]}" ;;
    --lint) exec swift format lint --strict --recursive --parallel "${paths[@]}" ;;
    *)
        echo "usage: bash .ci/format.sh [--lint]" >&2
        exit 2
        ;;
esac
