#!/usr/bin/env bash
# Uses the library the way a new user does, from outside the repository:
#
#   1. clones the repository's HEAD into a bare git repository in a temporary folder, and tags
#      that commit with the version the README's installation tells users to require (its
#      `from: "X.Y.Z"`), so that the README's own requirement resolves to the commit under
#      test (the repository's tags are not copied: a later commit must be what is checked);
#   2. writes a throwaway package beside it whose manifest has the README's dependency line,
#      pointing at that clone by a file:// git URL, and whose executable is the README's quick
#      start, copied from the README, then a few lines that feed it and wait for both loops;
#   3. resolves, builds (no warning of the library may reach its user) and runs it, and checks
#      the output: both subscribers saw every reading.
#
# What it proves: the manifest, the product, the platforms and the quick start work for a
# package that is not inside this repository. Committed state only: uncommitted changes are
# not in the clone.
#
#   .ci/consumer-check.sh            (from anywhere; about a minute on 2 cores)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/.ci/lib.sh"
ci_begin "consumer check"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/asyncmulticast-consumer.XXXXXX")"
ci_on_exit "rm -rf '$tmp'"

ci_step "the README's requirement and quick start"
# The installation block's `.package(url: "…", from: "X.Y.Z")`: the version users write.
version="$(grep -Eo '\.package\(url: "[^"]+AsyncMulticast\.git", from: "[0-9]+\.[0-9]+\.[0-9]+"\)' "$root/README.md" \
    | head -1 | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' || true)"
[[ -n "$version" ]] || ci_fail "README.md has no .package(url: …AsyncMulticast.git, from: \"X.Y.Z\") line"
# The first ```swift block after "## Quick start", without its fences.
quick_start="$(awk '/^## Quick start/ { section = 1 } section && /^```swift$/ { inside = 1; next }
    inside && /^```$/ { exit } inside { print }' "$root/README.md")"
[[ -n "$quick_start" ]] || ci_fail "README.md has no \`\`\`swift block under \"## Quick start\""
printf 'README requires from: "%s"; its quick start has %d lines\n' \
    "$version" "$(printf '%s\n' "$quick_start" | wc -l)"

ci_step "a bare clone of HEAD, tagged $version"
git clone --quiet --bare --no-local --no-tags "$root" "$tmp/AsyncMulticast.git"
head="$(git -C "$root" rev-parse HEAD)"
git -C "$tmp/AsyncMulticast.git" tag "$version" "$head"
printf 'file://%s at %s, tagged %s\n' "$tmp/AsyncMulticast.git" "$head" "$version"

ci_step "a throwaway package that depends on it"
mkdir -p "$tmp/Consumer/Sources/Consumer"
cat >"$tmp/Consumer/Package.swift" <<EOF
// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Consumer",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        .package(url: "file://$tmp/AsyncMulticast.git", from: "$version"),
    ],
    targets: [
        .executableTarget(name: "Consumer", dependencies: [
            .product(name: "AsyncMulticast", package: "AsyncMulticast"),
        ]),
    ]
)
EOF
{
    printf '%s\n' "$quick_start"
    # Not the README's: waits until both loops have joined (the quick start's tasks join when
    # they start running), feeds three readings, ends the source and waits for both loops.
    cat <<'EOF'

// --- consumer check: feed the quick start and wait for it ---
while shared.subscriberCount < 2 { await Task.yield() }
for reading in [20.5, 21.0, 21.5] { continuation.yield(reading) }
continuation.finish()
await display.value
await logger.value
print("consumer check: both loops ended")
EOF
} >"$tmp/Consumer/Sources/Consumer/main.swift"

ci_step "swift build (resolves the dependency by its git URL)"
(cd "$tmp/Consumer" && timeout 900 swift build 2>&1) | tee "$CI_LOGS/build.log"
grep -q "AsyncMulticast" "$tmp/Consumer/Package.resolved" \
    || ci_fail "Package.resolved does not name AsyncMulticast"
grep -q "\"version\" : \"$version\"" "$tmp/Consumer/Package.resolved" \
    || ci_fail "the dependency did not resolve to version $version"
# A warning in the library's sources would reach every user's build log.
if grep -E "/AsyncMulticast/Sources/[^:]+\.swift:[0-9]+:[0-9]+: warning:" "$CI_LOGS/build.log"; then
    ci_fail "the library's sources warn in a user's build (above)"
fi

ci_step "swift run Consumer"
(cd "$tmp/Consumer" && timeout 120 swift run --skip-build Consumer 2>&1) | tee "$CI_LOGS/run.log"
for who in display logger; do
    for reading in 20.5 21.0 21.5; do
        grep -qx "$who: $reading" "$CI_LOGS/run.log" || ci_fail "the quick start's $who did not print $reading"
    done
done
grep -q "consumer check: both loops ended" "$CI_LOGS/run.log" || ci_fail "the loops did not end"
ci_end
