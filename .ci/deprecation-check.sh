#!/usr/bin/env bash
# Checks that code written for 0.1.0 still compiles: every renamed spelling (Deprecated.swift)
# must build with a deprecation warning that names its replacement and offers the fix-it, and
# behave as the new name does.
#
#   1. builds .ci/deprecations, a package that depends on the repository by path and uses
#      every deprecated spelling, each on a line ending `// deprecated: NEW` (scratch path
#      .build-deprecations, kept between runs; its source is touched so that it compiles, and
#      warns, every time);
#   2. checks the compiler's diagnostics: no error; a warning on each marked line and on no
#      other (none from the library either), saying `renamed to 'NEW'` (or `replaced by` for
#      an initializer) with the marker's NEW, and a fix-it note `use 'NEW' instead` at the
#      same place;
#   3. runs it: it prints "ok" when each old spelling behaved as its new name.
#
# A new deprecation gets a marked line there; a removed one (in a breaking version) loses it.
#
#   .ci/deprecation-check.sh        (from anywhere; about 20 s once .build-deprecations exists)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/.ci/lib.sh"
ci_begin "deprecation check"

package="$root/.ci/deprecations"
source_file="$package/Sources/DeprecatedSpellings/DeprecatedSpellings.swift"
scratch="$root/.build-deprecations"

ci_step "swift build .ci/deprecations (scratch path .build-deprecations)"
touch "$source_file"
# The llvm style prints each fix-it as a note with its replacement.
status=0
swift build --package-path "$package" --scratch-path "$scratch" \
    -Xswiftc -diagnostic-style -Xswiftc llvm 2>&1 | tee "$CI_LOGS/build.log" || status=$?
[[ $status -eq 0 ]] || ci_fail "the deprecated spellings no longer compile (exit $status): see above"

ci_step "one deprecation warning with its fix-it per marked line, and nothing else"
python3 - "$source_file" "$CI_LOGS/build.log" <<'PY' || ci_fail "the diagnostics are not one deprecation warning with its fix-it per marked line (listed above)"
import re, sys

source_path, log_path = sys.argv[1], sys.argv[2]
expected = {}
with open(source_path) as f:
    for number, line in enumerate(f, 1):
        m = re.search(r"// deprecated: (\S+)\s*$", line)
        if m:
            expected[number] = m.group(1)

diagnostic = re.compile(r"^(/[^:]+\.swift):(\d+):(\d+): (error|warning|note): (.*)$")
warnings, notes, problems = {}, {}, []
with open(log_path) as f:
    for raw in f:
        m = diagnostic.match(raw.rstrip("\n"))
        if not m:
            continue
        path, line, column, kind, message = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)
        if kind == "error":
            problems.append(f"error: {raw.strip()}")
        elif path != source_path:
            if kind == "warning":
                problems.append(f"a warning outside the check's source: {raw.strip()}")
        elif kind == "warning":
            warnings.setdefault(line, set()).add((column, message))
        else:
            notes.setdefault(line, set()).add((column, message))

for line, new in sorted(expected.items()):
    found = warnings.get(line, set())
    said = [(c, msg) for c, msg in found
            if re.search(r"is deprecated: (renamed to|replaced by) '" + re.escape(new) + "'", msg)]
    if not said:
        problems.append(f"line {line}: no deprecation warning naming '{new}' (got {sorted(found) or 'none'})")
        continue
    for column, _ in said:
        if (column, f"use '{new}' instead") not in notes.get(line, set()):
            problems.append(f"line {line}:{column}: the warning has no fix-it note \"use '{new}' instead\"")
for line in sorted(set(warnings) - set(expected)):
    problems.append(f"line {line}: an unexpected warning: {sorted(warnings[line])}")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(expected)} deprecated uses, each warned with its fix-it; {sum(len(v) for v in warnings.values())} warnings in all, no other")
PY

ci_step "the deprecated spellings behave as their new names"
"$scratch/debug/DeprecatedSpellings" 2>&1 | tee "$CI_LOGS/run.log"
grep -q "^ok:" "$CI_LOGS/run.log" || ci_fail "an old spelling behaved differently from its new name (see above)"

ci_end
