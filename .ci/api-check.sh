#!/usr/bin/env bash
# Fails on a breaking change to the public API since the latest release, unless the
# CHANGELOG announces a new major version:
#
#   1. the baseline is the newest release in CHANGELOG.md (its first `## [X.Y.Z]` heading):
#      the tag X.Y.Z when the clone has it, otherwise the commit that added that heading (the
#      release commit), so that a clone without tags checks the same thing;
#   2. `swift package diagnose-api-breaking-changes BASELINE --products AsyncMulticast` (the
#      toolchain's API digester) compares the library's public API with the baseline's;
#   3. a breaking change passes only when the `## [Unreleased]` section has a line
#      `Next version: X.Y.Z` that SemVer lets break: a major number above the baseline's;
#      or, while the baseline is 0.y.z (SemVer 0.x: anything may change), a minor number above
#      the baseline's. Users who depend on `from: "BASELINE"` (up to the next major) or, in
#      0.x, `.upToNextMinor(from: "BASELINE")` then never receive it.
#
# Before the first release (no `## [X.Y.Z]` heading) there is nothing to compare with: it says
# so and passes.
#
#   .ci/api-check.sh            (from anywhere; about a minute: it builds both versions)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/.ci/lib.sh"
cd "$root"
ci_begin "API check"

ci_step "the baseline: the latest release in CHANGELOG.md"
release="$(grep -Eo '^## \[[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | head -1 | tr -d '#[] ' || true)"
if [[ -z "$release" ]]; then
    echo "CHANGELOG.md has no released version yet: no API to keep stable"
    ci_end
    exit 0
fi
if git rev-parse -q --verify "refs/tags/$release^{commit}" >/dev/null; then
    baseline="$release"
    echo "baseline: the tag $release ($(git rev-parse --short "$release^{commit}"))"
else
    # The oldest commit whose CHANGELOG.md gained the line "## [X.Y.Z]": the release commit.
    baseline="$(git log --format=%H -G"^## \[${release//./\\.}\]" -- CHANGELOG.md | tail -1)"
    [[ -n "$baseline" ]] || ci_fail "no tag $release and no commit that added its CHANGELOG heading"
    echo "baseline: the commit that released $release, $(git log -1 --format='%h %s' "$baseline") (no tag $release in this clone)"
fi

ci_step "swift package diagnose-api-breaking-changes $release"
status=0
swift package --scratch-path .build-api diagnose-api-breaking-changes "$baseline" \
    --products AsyncMulticast 2>&1 | tee "$CI_LOGS/api.log" || status=$?
if [[ $status -eq 0 ]]; then
    grep -q "No breaking changes detected in AsyncMulticast" "$CI_LOGS/api.log" \
        || ci_fail "the API digester neither passed nor listed breaking changes (see above)"
    ci_end
    exit 0
fi
grep -q "API breakage:" "$CI_LOGS/api.log" \
    || ci_fail "the API digester failed (exit $status) without listing a breaking change: see above"

ci_step "breaking changes: does the CHANGELOG announce a version that may break?"
unreleased="$(awk '/^## \[Unreleased\]/ { inside = 1; next } /^## \[/ { inside = 0 } inside' CHANGELOG.md)"
next="$(printf '%s\n' "$unreleased" | grep -Eo '^Next version: [0-9]+\.[0-9]+\.[0-9]+' | head -1 \
    | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' || true)"
IFS=. read -r release_major release_minor _ <<<"$release"
if [[ -n "$next" ]]; then
    IFS=. read -r next_major next_minor _ <<<"$next"
    if (( next_major > release_major )); then
        echo "the breaking changes above are announced: Next version: $next (a new major version after $release)"
        ci_end
        exit 0
    fi
    if (( release_major == 0 && next_major == 0 && next_minor > release_minor )); then
        echo "the breaking changes above are announced: Next version: $next (a new minor version of 0.x after $release, which SemVer lets break)"
        ci_end
        exit 0
    fi
fi
if (( release_major == 0 )); then
    wanted="0.$((release_minor + 1)).0"
else
    wanted="$((release_major + 1)).0.0"
fi
ci_fail "breaking changes since $release (listed above). Keep the old API (deprecate it), or announce \
a version that may break them: a line \"Next version: $wanted\" in CHANGELOG.md's [Unreleased] section"
