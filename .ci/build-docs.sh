#!/usr/bin/env bash
# Builds the library's documentation catalog (Sources/AsyncMulticast/AsyncMulticast.docc, whose
# guides are links to Guides/*.md) with the toolchain's own `docc`, no plugin and no package
# dependency: the compiler emits the symbol graph, `docc convert` turns it and the catalog into
# a documentation archive. Any DocC warning (a broken symbol link, an undocumented parameter,
# a guide that does not resolve) fails.
#
#   .ci/build-docs.sh [OUTPUT_DIR]      default: .build-docs/AsyncMulticast.doccarchive
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
output="${1:-.build-docs/AsyncMulticast.doccarchive}"
symbols="$(mktemp -d "${TMPDIR:-/tmp}/asyncmulticast-symbols.XXXXXX")"
trap 'rm -rf "$symbols"' EXIT

# Extension block symbols let DocC document (and link to) `share()` and the other operators,
# which extend the standard library's AsyncSequence.
swift build --target AsyncMulticast --scratch-path .build-docs \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$symbols" \
    -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public \
    -Xswiftc -emit-extension-block-symbols

log="$symbols/docc.log"
docc convert Sources/AsyncMulticast/AsyncMulticast.docc \
    --additional-symbol-graph-dir "$symbols" \
    --fallback-display-name AsyncMulticast \
    --fallback-bundle-identifier org.asyncmulticast.AsyncMulticast \
    --output-dir "$output" \
    --warnings-as-errors 2>&1 | tee "$log"
# --warnings-as-errors already fails the command; this also catches a warning printed by a
# docc that ignores the flag.
if grep -Eq "(^|: )(warning|error):" "$log"; then
    echo "build-docs: DocC reported problems (above)" >&2
    exit 1
fi
echo "build-docs: documentation built without warnings: $output"
