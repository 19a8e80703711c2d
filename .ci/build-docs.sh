#!/usr/bin/env bash
# Builds the library's documentation catalog (Sources/AsyncMulticast/AsyncMulticast.docc, whose
# guides are links to Guides/*.md) with the toolchain's own `docc`, no plugin and no package
# dependency: the compiler emits the symbol graph, `docc convert` turns it and the catalog into
# a documentation archive. Any DocC warning (a broken symbol link, an undocumented parameter,
# a guide that does not resolve) fails.
#
# docc reads a copy of the catalog, not the catalog itself: the guides are written for GitHub,
# and link each other as `[Replay](Replay.md#the-cache-when-the-upstream-stops)`, which docc
# would leave as a relative link that leads nowhere in the archive. `.ci/check-links.py
# --docc-catalog` rewrites the copy's links into DocC links
# (`[Replay](<doc:Replay#The-cache-when-the-upstream-stops>)`), which docc resolves and checks;
# its lines are those of the sources, so docc's line numbers are too. Links to other files of
# the repository become their path in code voice, or absolute links under DOCS_REPOSITORY_URL
# if it is set (e.g. https://github.com/OWNER/REPO/blob/main). Once built, `--archive` fails
# on any link that docc still left relative.
#
#   .ci/build-docs.sh [OUTPUT_DIR]      default: .build-docs/AsyncMulticast.doccarchive
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
output="${1:-.build-docs/AsyncMulticast.doccarchive}"
work="$(mktemp -d "${TMPDIR:-/tmp}/asyncmulticast-docs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
symbols="$work/symbols"
mkdir "$symbols"
# docc reads a catalog only from a folder named *.docc.
catalog="$work/AsyncMulticast.docc"
cp -RL Sources/AsyncMulticast/AsyncMulticast.docc "$catalog"
python3 .ci/check-links.py --docc-catalog "$catalog"

# Extension block symbols let DocC document (and link to) `share()` and the other operators,
# which extend the standard library's AsyncSequence.
swift build --target AsyncMulticast --scratch-path .build-docs \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$symbols" \
    -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public \
    -Xswiftc -emit-extension-block-symbols

log="$work/docc.log"
docc convert "$catalog" \
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
python3 .ci/check-links.py --archive "$output"
echo "build-docs: documentation built without warnings: $output"
