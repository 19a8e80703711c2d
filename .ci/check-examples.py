#!/usr/bin/env python3
"""Fails (exit 1) if a Swift example in the documentation is neither compiled by a test nor
marked as not compiled: python3 .ci/check-examples.py [--list]

Examples checked:
  - every ```swift block of README.md, Guides/*.md and the articles of the documentation
    catalog (Sources/AsyncMulticast/**/*.docc/*.md; its links to the guides count once);
  - every ```swift block inside `///` doc comments of Sources/AsyncMulticast/**/*.swift.

An example is checked when its lines appear, as one contiguous run, in one file among
Tests/**/*.swift, Examples/**/*.swift and Compatibility/Tests/**/*.swift (folders whose name
starts with "." skipped, so no .build*). The guides' tests live in
Tests/AsyncMulticastTests/Guides/, the doc comments' in Tests/AsyncMulticastTests/DocComments/,
Examples/ holds example packages built on their own (snippets of Guides/ScalingOut.md), and
Compatibility/Tests the guides' snippets that use another library (the metrics adapter).

Normalisation, the same on both sides, line by line:
  - doc comments: the leading whitespace and `///` are removed first;
  - leading and trailing whitespace is removed (indentation never matters);
  - outside string literals, every run of spaces and tabs becomes one space (aligned
    trailing comments may be aligned differently); inside a one-line string literal
    whitespace is kept exactly, since it is printed output (the scan is per line, so the
    body lines of a multi-line literal count as code);
  - blank lines are ignored on both sides.
Everything else must match exactly: code, the comments of the example, punctuation. So the
example's lines must follow one another in the test, except that:
  - the test may interleave blank lines, and lines carrying a test-side marker anywhere:
    `// (test only)`, `// [test only]` or `// [test gate]` (the line is the test's own: a
    stub, a recorder, a gate that waits for the previous step). A line of the example
    cannot be changed by marking it: a marked line is skipped, so the example's own line
    must still follow;
  - a test's line may add `private ` or `fileprivate ` in front of the example's line
    (a test declares an example's top-level types at file scope, where they must not clash
    with other test files); never the other way round;
  - the example's `import` lines are not part of the run (Swift allows them only at the top
    of a file): each must appear, exactly, anywhere in the same test file.

An example is exempt when it is marked as not compiled, with a reason, on the line right
before its opening fence:
  - markdown:      <!-- not compiled: REASON -->
  - doc comments:  /// (Not compiled: REASON)

Every unchecked example is printed with file:line, and the closest run found in a test (the
file and offset where most of its lines matched) with the lines that differ. --list also
prints every example and what covers it. Exit status: 0 all checked, 1 some unchecked,
2 a usage error.
"""
import difflib
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TEST_MARKERS = ("// (test only)", "// [test only]", "// [test gate]")
MARKDOWN_EXEMPT = re.compile(r"^\s*<!--\s*not compiled:\s*(\S.*?)\s*-->\s*$")
DOC_EXEMPT = re.compile(r"^\(Not compiled:\s*(\S.*?)\)$")
DOC_PREFIX = re.compile(r"^\s*///")


def normalise(line):
    """The line without indentation, with whitespace runs outside string literals collapsed."""
    line = line.strip()
    out = []
    in_string = False
    in_comment = False
    i = 0
    while i < len(line):
        c = line[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < len(line):
                out.append(line[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c in " \t":
            j = i
            while j < len(line) and line[j] in " \t":
                j += 1
            out.append(" ")
            i = j
            continue
        else:
            out.append(c)
            if not in_comment:
                if c == '"':
                    in_string = True
                elif c == "/" and i + 1 < len(line) and line[i + 1] == "/":
                    in_comment = True  # quotes in a comment do not open a string
        i += 1
    return "".join(out)


def relative(path):
    return os.path.relpath(path, ROOT)


def swift_files(top):
    for directory, folders, files in os.walk(top):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(files):
            if name.endswith(".swift"):
                yield os.path.join(directory, name)


class Block:
    def __init__(self, path, line, lines, exemption):
        self.path = path          # relative to the root
        self.line = line          # 1-based line of the opening fence
        self.lines = lines        # [(line number, normalised text)], blank lines removed
        self.exemption = exemption


def fenced_blocks(path, lines, strip, exemption_pattern):
    """The ```swift blocks of `lines` (already stripped of any comment prefix by `strip`,
    which returns None for a line outside the doc comment)."""
    blocks = []
    open_fence = None  # (line index, is swift, fence text)
    body = []
    for index, raw in enumerate(lines):
        text = strip(raw)
        if text is None:
            if open_fence is not None:
                # A doc comment ended inside a fence: report what was collected.
                if open_fence[1]:
                    blocks.append((open_fence[0], body))
                open_fence, body = None, []
            continue
        stripped = text.strip()
        if open_fence is None:
            match = re.match(r"^(`{3,})\s*(\S*)", stripped)
            if match:
                open_fence = (index, match.group(2).lower() == "swift", match.group(1))
                body = []
        elif stripped.startswith(open_fence[2]) and stripped.strip("`") == "":
            if open_fence[1]:
                blocks.append((open_fence[0], body))
            open_fence, body = None, []
        else:
            body.append((index + 1, text))
    if open_fence is not None and open_fence[1]:
        blocks.append((open_fence[0], body))

    result = []
    for fence_index, body in blocks:
        exemption = None
        if fence_index > 0:
            before = strip(lines[fence_index - 1])
            if before is not None:
                match = exemption_pattern.match(before.strip())
                if match:
                    exemption = match.group(1)
        normalised = [(n, normalise(t)) for n, t in body if t.strip()]
        result.append(Block(relative(path), fence_index + 1, normalised, exemption))
    return result


def markdown_blocks(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return fenced_blocks(path, lines, lambda line: line, MARKDOWN_EXEMPT)


def doc_comment_blocks(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")

    def strip(line):
        match = DOC_PREFIX.match(line)
        return line[match.end():] if match else None

    return fenced_blocks(path, lines, strip, DOC_EXEMPT)


ACCESS_PREFIXES = ("fileprivate ", "private ")


def declaration_key(text):
    """`text` without a leading `fileprivate` or `private`: the key a test line is indexed by."""
    for prefix in ACCESS_PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def same_line(example, test):
    """Whether a test line stands for an example line: equal, or with an access modifier added."""
    return test == example or any(test == prefix + example for prefix in ACCESS_PREFIXES)


def is_import(text):
    return re.match(r"^(@testable )?import \S+$", text) is not None


class Candidate:
    """A test or example file: its normalised lines, blank and test-only lines removed."""

    def __init__(self, path):
        self.path = relative(path)
        self.lines = []    # normalised text
        self.numbers = []  # 1-based line numbers in the file
        with open(path, encoding="utf-8") as f:
            for number, raw in enumerate(f.read().split("\n"), start=1):
                if not raw.strip() or any(marker in raw for marker in TEST_MARKERS):
                    continue
                self.lines.append(normalise(raw))
                self.numbers.append(number)
        self.imports = {t for t in self.lines if is_import(t)}
        self.positions = defaultdict(list)
        for position, text in enumerate(self.lines):
            self.positions[declaration_key(text)].append(position)

    def find(self, imports, texts):
        """The line number where a contiguous run standing for `texts` starts, or None.
        `imports` must appear anywhere in the file."""
        if not set(imports) <= self.imports:
            return None
        if not texts:
            return self.numbers[0] if self.lines else None
        for start in self.positions.get(declaration_key(texts[0]), []):
            run = self.lines[start:start + len(texts)]
            if len(run) == len(texts) and all(same_line(e, t) for e, t in zip(texts, run)):
                return self.numbers[start]
        return None

    def best_alignment(self, texts):
        """(lines in place, start) of the offset where most distinctive lines of `texts` line
        up (lines of brackets alone, such as `}`, do not count)."""
        votes = defaultdict(int)
        for i, text in enumerate(texts):
            if not re.search(r"\w", text):
                continue
            for position in self.positions.get(declaration_key(text), []):
                if same_line(text, self.lines[position]):
                    votes[position - i] += 1
        if not votes:
            return 0, None
        start = max(votes, key=lambda s: (votes[s], -s))
        return votes[start], start


def split_imports(block):
    imports = [t for _, t in block.lines if is_import(t)]
    rest = [(n, t) for n, t in block.lines if not is_import(t)]
    return imports, rest


def explain(block, candidates):
    """Prints where the block nearly appears, as a diff against the closest test lines."""
    imports, lines = split_imports(block)
    texts = [t for _, t in lines]
    if not texts:
        print("    (the block has no code)")
        return
    best = max(((c.best_alignment(texts), c) for c in candidates),
               key=lambda pair: pair[0][0], default=((0, None), None))
    (matching, start), candidate = best
    if matching == 0 or 3 * matching < len(texts):
        print("    no test holds most of its lines")
        return
    # The window around the alignment is widened on both sides, so that the test's extra
    # lines show as insertions; insertions before the example's start or past its end are
    # then trimmed.
    low = max(start - len(texts), 0)
    high = min(start + 2 * len(texts), len(candidate.lines))
    window = candidate.lines[low:high]
    keys = [declaration_key(t) for t in window]
    matcher = difflib.SequenceMatcher(a=[declaration_key(t) for t in texts], b=keys, autojunk=False)
    opcodes = matcher.get_opcodes()
    while opcodes and opcodes[-1][0] == "insert":
        opcodes.pop()
    while opcodes and opcodes[0][0] == "insert":
        opcodes.pop(0)
    first = opcodes[0][3] if opcodes else 0
    print("    closest: %s:%d (%d of %d lines); - only in %s, + only in the test:"
          % (candidate.path, candidate.numbers[low + first], matching, len(texts), block.path))
    for name in imports:
        if name not in candidate.imports:
            print("    - %s (missing from the test file)" % name)
    for tag, a0, a1, b0, b1 in opcodes:
        if tag == "equal":
            for i, j in zip(range(a0, a1), range(b0, b1)):
                if not same_line(texts[i], window[j]):  # a modifier other than fileprivate/private
                    print("    - %s:%d: %s" % (block.path, lines[i][0], texts[i]))
                    print("    + %s:%d: %s" % (candidate.path, candidate.numbers[low + j], window[j]))
            continue
        for i in range(a0, a1):
            print("    - %s:%d: %s" % (block.path, lines[i][0], texts[i]))
        for j in range(b0, b1):
            print("    + %s:%d: %s" % (candidate.path, candidate.numbers[low + j], window[j]))


def main(argv):
    listing = "--list" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--list"]
    if unknown:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2

    blocks = []
    markdown = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "Guides", n) for n in os.listdir(os.path.join(ROOT, "Guides")) if n.endswith(".md"))
    # The documentation catalog's articles; its links to the guides are read once, as guides.
    for directory, folders, files in os.walk(os.path.join(ROOT, "Sources", "AsyncMulticast")):
        folders.sort()
        if directory.endswith(".docc"):
            markdown += sorted(os.path.join(directory, n) for n in files if n.endswith(".md"))
    seen = set()
    for path in markdown:
        if os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            blocks += markdown_blocks(path)
    for path in swift_files(os.path.join(ROOT, "Sources", "AsyncMulticast")):
        blocks += doc_comment_blocks(path)

    candidates = [Candidate(p) for top in ("Tests", "Examples", os.path.join("Compatibility", "Tests"))
                  if os.path.isdir(os.path.join(ROOT, top))
                  for p in swift_files(os.path.join(ROOT, top))]

    unchecked = []
    counts = defaultdict(int)
    for block in blocks:
        where = "doc" if block.path.endswith(".swift") else "guide"
        imports, lines = split_imports(block)
        found = None
        if block.lines:
            for candidate in candidates:
                number = candidate.find(imports, [t for _, t in lines])
                if number is not None:
                    found = "%s:%d" % (candidate.path, number)
                    break
        if found:
            counts[where, "compiled"] += 1
            if listing:
                print("%s:%d: compiled in %s" % (block.path, block.line, found))
        elif block.exemption:
            counts[where, "not compiled"] += 1
            if listing:
                print("%s:%d: not compiled: %s" % (block.path, block.line, block.exemption))
        else:
            counts[where, "unchecked"] += 1
            unchecked.append(block)

    for block in unchecked:
        print("%s:%d: unchecked ```swift block: not found in Tests/, Examples/ or Compatibility/Tests/, not marked "
              "as not compiled" % (block.path, block.line))
        explain(block, candidates)

    summary = ", ".join("%s %s: %d" % (where, state, counts[where, state])
                        for where in ("guide", "doc")
                        for state in ("compiled", "not compiled", "unchecked"))
    print("check-examples: %s" % summary)
    return 1 if unchecked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
