#!/usr/bin/env python3
"""Checks the documentation's links, on GitHub and in the DocC archive. Standard library only.

    python3 .ci/check-links.py                      check the sources (no build; well under 1 s)
    python3 .ci/check-links.py --docc-catalog DIR   rewrite a copy of the catalog for DocC
    python3 .ci/check-links.py --archive DIR        check a built .doccarchive

1. The sources (the default). Every Markdown file of the repository (`git ls-files '*.md'`:
   README.md, CONTRIBUTING.md, CHANGELOG.md, Guides/*.md, Benchmarks/README.md,
   Examples/*/README.md, the catalog's landing page; a symbolic link such as the catalog's
   guides is checked once, as the file it points to) and the `///` doc comments of
   Sources/**/*.swift. Fenced code blocks, code spans and HTML comments are skipped.
   - A relative link (inline `[text](path#anchor)`, image or reference definition) must name
     a file or folder of the repository, inside it, tracked by git when git is there. Its
     `#anchor` must be a heading of the target Markdown file as GitHub spells it: the
     heading's text, lowercased, punctuation other than `-` and `_` removed (backticks
     included), each space a hyphen; the second heading of the same spelling gets `-1`, the
     third `-2`. On a file that is not Markdown only GitHub's line anchors (`#L10`,
     `#L10-L20`) are accepted.
   - A DocC link (`<doc:Article>`, `<doc:Article#Heading>`, `[text](<doc:...>)`) only works
     in the DocC archive: GitHub shows it as text. So it is an error in a file rendered on
     GitHub, except in a catalog article (the landing page) and in doc comments, where its
     `#Heading` must be a heading of that guide as DocC spells it (see docc_fragment). A
     DocC link to something that is not an article (a symbol) is left to docc.
   - A relative link in a doc comment is an error: it resolves nowhere, neither in Xcode nor
     in the archive. Link to a guide with <doc:Share#Structured-sharing>.
   - Absolute links (http:, https:, mailto:) are not fetched.

2. --docc-catalog DIR: DIR is a copy of Sources/AsyncMulticast/AsyncMulticast.docc with the
   links followed (cp -RL), named *.docc; .ci/build-docs.sh makes it. Each Markdown file in
   it is rewritten in place so that the GitHub links of the guides work in the archive:
   - a link to a guide or to the landing page, `[Replay](Replay.md#the-cache-when-the-upstream-stops)`
     or `[Restart](#restart)`, becomes `[Replay](<doc:Replay#The-cache-when-the-upstream-stops>)`:
     the GitHub anchor is resolved to its heading, and the heading to DocC's fragment. docc
     then checks the link, and an unresolved one is a warning, so an error in build-docs;
   - a link to any other file of the repository (`../Examples/...`) cannot be relative in
     the archive. With DOCS_REPOSITORY_URL set (say https://github.com/OWNER/REPO/blob/main)
     it becomes an absolute link under that URL; without it (the default: the repository
     has no published address yet) the link becomes its text followed by the file's path in
     the repository in code voice, so that the archive shows no link that leads nowhere.
   A link that does not resolve fails (exit 1), as in the check of the sources.
   Only the link destinations change: no line is added or removed, so docc's line numbers
   are those of the sources.

3. --archive DIR: after `docc convert`, every page of DIR/data fails the check if it has a
   link that DocC left relative (a reference of type "link" whose URL has no scheme, such
   as `Replay.md#...` or `#restart`): it would lead nowhere in the rendered archive.

Exit status: 0 no problem, 1 problems (each printed as file:line: message), 2 a usage error.
"""
import json
import os
import re
import subprocess
import sys
import unicodedata
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOG = os.path.join(ROOT, "Sources", "AsyncMulticast", "AsyncMulticast.docc")
SWIFT_SOURCES = os.path.join(ROOT, "Sources")

# ---------------------------------------------------------------------------------------------
# Markdown scanning


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")


def mask_code(text, mask_spans=True):
    """The text with fenced code blocks, HTML comments and (if mask_spans) code spans replaced
    by spaces, newlines kept, so that offsets and line numbers stay those of the text."""
    out = list(text)

    def blank(start, end):
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "

    # Fenced code blocks, at any indentation (they may sit in list items).
    pos = 0
    fence = None
    for line in text.splitlines(keepends=True):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(2)[0], len(m.group(2)))
                blank(pos, pos + len(line))
        else:
            blank(pos, pos + len(line))
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] \
                    and line.strip() == m.group(2):
                fence = None
        pos += len(line)
    masked = "".join(out)
    for m in re.finditer(r"<!--.*?-->", masked, re.S):
        blank(m.start(), m.end())
    if mask_spans:
        masked = "".join(out)
        i = 0
        while i < len(masked):
            if masked[i] == "\\":
                i += 2
                continue
            if masked[i] == "`":
                j = i
                while j < len(masked) and masked[j] == "`":
                    j += 1
                ticks = masked[i:j]
                close = re.compile(r"(?<!`)" + ticks + r"(?!`)")
                m = close.search(masked, j)
                # A span does not cross a blank line (the end of a paragraph).
                if m and "\n\n" not in masked[j:m.start()]:
                    blank(i, m.end())
                    i = m.end()
                    continue
                i = j
                continue
            i += 1
    return "".join(out)


_BRACKETED = r"(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*"
_DEST = r"<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*"
_TITLE = r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?"""
INLINE_LINK = re.compile(
    r"(?P<bang>!?)\[(?P<text>" + _BRACKETED + r")\]\(\s*(?P<dest>" + _DEST + r")" + _TITLE + r"\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[(?P<label>[^\]\n]+)\]:[ \t]*(?P<dest><[^<>\n]*>|\S+)", re.M)
AUTOLINK = re.compile(r"<(?P<dest>(?:doc:|[A-Za-z][A-Za-z0-9+.-]{1,31}:)[^<>\s]*)>")


class Link:
    def __init__(self, kind, dest, start, end, line, text=None, whole=None):
        self.kind = kind          # "inline", "image", "reference" or "autolink"
        self.dest = dest          # without the angle brackets
        self.start, self.end = start, end  # offsets of the destination (brackets included)
        self.line = line
        self.text = text          # inline links: the link's text, as written
        self.whole = whole        # inline links: offsets of the whole link


def find_links(text):
    masked = mask_code(text)
    links = []

    def line_of(offset):
        return text.count("\n", 0, offset) + 1

    for m in INLINE_LINK.finditer(masked):
        raw = m.group("dest")
        dest = raw[1:-1] if raw.startswith("<") else raw
        # The link's text may hold code spans: take it from the text, not the masked copy.
        links.append(Link("image" if m.group("bang") else "inline", dest,
                          m.start("dest"), m.end("dest"), line_of(m.start()),
                          text=text[m.start("text"):m.end("text")],
                          whole=(m.start(), m.end())))
    for m in REFERENCE_DEF.finditer(masked):
        raw = m.group("dest")
        dest = raw[1:-1] if raw.startswith("<") else raw
        links.append(Link("reference", dest, m.start("dest"), m.end("dest"), line_of(m.start())))
    taken = [(l.whole or (l.start, l.end)) for l in links]
    for m in AUTOLINK.finditer(masked):
        if any(a <= m.start() < b for a, b in taken):
            continue  # `[x](<doc:...>)`: already found as an inline link
        links.append(Link("autolink", m.group("dest"), m.start(), m.end(), line_of(m.start())))
    links.sort(key=lambda l: l.start)
    return links


ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def heading_texts(text):
    """The plain text of each ATX heading, in order (what GitHub and DocC make anchors from)."""
    masked = mask_code(text, mask_spans=False)
    headings = []
    for raw, kept in zip(text.splitlines(), masked.splitlines()):
        if not kept.strip():
            continue  # inside a code block
        m = ATX_HEADING.match(raw)
        if m:
            headings.append(plain_text(m.group(2)))
    return headings


def plain_text(markdown):
    s = re.sub(r"!?\[(" + _BRACKETED + r")\]\([^)]*\)", r"\1", markdown)  # links: their text
    s = re.sub(r"<[^>]+>", "", s)                                          # HTML tags
    s = re.sub(r"(`+)(.+?)\1", lambda m: m.group(2).strip(), s)            # code spans: content
    s = re.sub(r"(\*\*|__)(.+?)\1", r"\2", s)                               # strong
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", s)       # emphasis
    s = re.sub(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)", r"\1", s)
    s = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", s)                            # backslash escapes
    return s.strip()


def github_slug(heading):
    """GitHub's anchor for a heading: lowercased; everything but letters, marks, decimal and
    letter numbers, connector punctuation (`_`), spaces and hyphens removed (Ruby's
    /[^\p{Word}\- ]/); each space a hyphen (runs are not collapsed)."""
    kept = []
    for c in heading.lower():
        category = unicodedata.category(c)
        if c in " -" or category[0] in "LM" or category in ("Nd", "Nl", "Pc"):
            kept.append(c)
    return "".join(kept).replace(" ", "-")


def github_anchors(text):
    """GitHub anchor -> heading text, duplicates numbered as GitHub numbers them."""
    anchors = {}
    seen = set()
    for heading in heading_texts(text):
        slug = base = github_slug(heading)
        n = 0
        while slug in seen:
            n += 1
            slug = f"{base}-{n}"
        seen.add(slug)
        anchors[slug] = heading
    return anchors


def docc_fragment(heading):
    """DocC's fragment for a heading (swift-docc's urlReadableFragment): trimmed; each run of
    whitespace, hyphens, en or em dashes one hyphen; Unicode punctuation other than `-`, and
    backticks, removed. Case is kept."""
    parts = [p for p in re.split(r"[\s\-\u2013\u2014]+", heading.strip()) if p]
    return "".join(c for c in "-".join(parts)
                   if c == "-" or (c != "`" and not unicodedata.category(c).startswith("P")))


# Both spellings, pinned: GitHub's as its anchors read, DocC's as docc 6.3 wrote them into
# this package's archive. A wrong rule would silently accept broken anchors or reject good
# ones, so every run checks these first.
SPELLINGS = [
    ("Keeping the upstream alive: navigate away and back",
     "keeping-the-upstream-alive-navigate-away-and-back",
     "Keeping-the-upstream-alive-navigate-away-and-back"),
    ("Changing the value from several tasks: update(_:)",
     "changing-the-value-from-several-tasks-update_",
     "Changing-the-value-from-several-tasks-update"),
    ("Waiting for room: send(waitingForRoom:)",
     "waiting-for-room-sendwaitingforroom", "Waiting-for-room-sendwaitingForRoom"),
    ("SwiftUI: create the sequence once, iterate it in .task",
     "swiftui-create-the-sequence-once-iterate-it-in-task",
     "SwiftUI-create-the-sequence-once-iterate-it-in-task"),
    ("What bounds N = 1", "what-bounds-n--1", "What-bounds-N-=-1"),
    ("Iterators are per task; join before you spawn",
     "iterators-are-per-task-join-before-you-spawn",
     "Iterators-are-per-task-join-before-you-spawn"),
]


def check_spellings():
    for heading, github, docc in SPELLINGS:
        assert github_slug(heading) == github, (heading, github_slug(heading))
        assert docc_fragment(heading) == docc, (heading, docc_fragment(heading))
    assert plain_text("Sharing one asynchronous sequence: `share()`") == \
        "Sharing one asynchronous sequence: share()"


# ---------------------------------------------------------------------------------------------
# The repository


def rel(path):
    return os.path.relpath(path, ROOT)


def tracked_files():
    """Repository-relative paths git tracks, or None without git (then the disk decides)."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    files = set(p for p in out.split("\0") if p)
    return files


TRACKED = None


def exists_in_repository(path):
    """path: absolute, normalised. True for a tracked file or a folder holding one."""
    if not os.path.exists(path):
        return False
    if TRACKED is None:
        return True
    r = rel(path)
    if r == ".":
        return True
    if r in TRACKED:
        return True
    prefix = r + "/"
    return any(f.startswith(prefix) for f in TRACKED)


def markdown_files():
    if TRACKED is not None:
        names = sorted(f for f in TRACKED if f.endswith(".md"))
    else:
        names = []
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            names += [rel(os.path.join(d, f)) for f in sorted(files) if f.endswith(".md")]
    return [os.path.join(ROOT, n) for n in names]


_TEXT_CACHE = {}


def read(path):
    path = os.path.realpath(path)
    if path not in _TEXT_CACHE:
        with open(path, encoding="utf-8") as f:
            _TEXT_CACHE[path] = f.read()
    return _TEXT_CACHE[path]


def catalog_articles():
    """Article name (file stem) -> real path of its Markdown file, for the catalog."""
    return {os.path.splitext(n)[0]: os.path.realpath(os.path.join(CATALOG, n))
            for n in sorted(os.listdir(CATALOG)) if n.endswith(".md")}


def has_scheme(dest):
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", dest) is not None


def split_fragment(dest):
    path, _, fragment = dest.partition("#")
    return urllib.parse.unquote(path), urllib.parse.unquote(fragment), "#" in dest


def resolve_relative(source, dest):
    """(target path or None, fragment, problem or None) for a relative link of `source`."""
    path, fragment, has_fragment = split_fragment(dest)
    if path.startswith("/"):
        return None, fragment, f"`{dest}`: a path from the root does not resolve on GitHub; write it relative to the file"
    target = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
    if not (target == ROOT or target.startswith(ROOT + os.sep)):
        return None, fragment, f"`{dest}`: leads outside the repository"
    if not exists_in_repository(target):
        if os.path.exists(target):
            return None, fragment, f"`{dest}`: {rel(target)} is not tracked by git, so not on GitHub"
        return None, fragment, f"`{dest}`: no such file in the repository ({rel(target)})"
    if has_fragment:
        if target.endswith(".md"):
            anchors = github_anchors(read(target))
            if fragment not in anchors:
                near = [a for a in anchors if fragment and (fragment in a or a in fragment)]
                hint = f"; did you mean #{near[0]}?" if near else ""
                return target, fragment, (f"`{dest}`: {rel(os.path.realpath(target))} has no heading "
                                          f"with the GitHub anchor #{fragment}{hint}")
        elif not re.fullmatch(r"L\d+(-L\d+)?", fragment):
            return target, fragment, f"`{dest}`: #{fragment} on a file that is not Markdown"
    return target, fragment, None


def check_doc_link(dest, current_article, articles):
    """A problem with a DocC link `doc:...`, or None (also when docc must decide: a symbol)."""
    path, fragment, has_fragment = split_fragment(dest[len("doc:"):])
    name = path.rstrip("/").split("/")[-1] if path else current_article
    if name not in articles:
        return None
    if has_fragment:
        fragments = {docc_fragment(h) for h in heading_texts(read(articles[name]))}
        if fragment not in fragments and docc_fragment(fragment) not in fragments:
            return f"`<{dest}>`: the {name} guide has no heading with the DocC fragment #{fragment}"
    return None


# ---------------------------------------------------------------------------------------------
# 1. The sources


def doc_comment_blocks(path):
    """(first line number, Markdown text) of each run of `///` lines of a Swift file."""
    blocks, lines, first = [], [], None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"^\s*///(?: ?)(.*)$", line.rstrip("\n"))
            if m:
                if first is None:
                    first = number
                lines.append(m.group(1))
            elif lines:
                blocks.append((first, "\n".join(lines)))
                lines, first = [], None
    if lines:
        blocks.append((first, "\n".join(lines)))
    return blocks


def check_sources():
    problems = []
    articles = catalog_articles()
    article_of = {p: n for n, p in articles.items()}
    checked = set()
    count = 0
    for path in markdown_files():
        real = os.path.realpath(path)
        if real in checked:
            continue
        checked.add(real)
        text = read(real)
        # A catalog article that is its own file (the landing page) is DocC's; the guides are
        # GitHub's Markdown even though the catalog holds links to them.
        docc_native = os.path.dirname(path) == CATALOG and not os.path.islink(path)
        for link in find_links(text):
            count += 1
            where = f"{rel(real)}:{link.line}"
            if link.dest.startswith("doc:"):
                if not docc_native:
                    problems.append(f"{where}: `<{link.dest}>` is a DocC link, which GitHub shows as "
                                    f"text: link the Markdown file (`Replay.md#anchor`); "
                                    f".ci/build-docs.sh turns it into a DocC link")
                else:
                    p = check_doc_link(link.dest, article_of.get(real), articles)
                    if p:
                        problems.append(f"{where}: {p}")
                continue
            if has_scheme(link.dest):
                continue
            _, _, problem = resolve_relative(real, link.dest)
            if problem:
                problems.append(f"{where}: {problem}")
    for d, dirs, files in os.walk(SWIFT_SOURCES):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(d, name)
            for first, block in doc_comment_blocks(path):
                for link in find_links(block):
                    count += 1
                    where = f"{rel(path)}:{first + link.line - 1}"
                    if link.dest.startswith("doc:"):
                        p = check_doc_link(link.dest, None, articles)
                        if p:
                            problems.append(f"{where}: {p}")
                    elif not has_scheme(link.dest):
                        problems.append(f"{where}: `{link.dest}`: a relative link in a doc comment "
                                        f"resolves nowhere; link a guide as <doc:Share#Heading-Name>")
    return problems, count


# ---------------------------------------------------------------------------------------------
# 2. The catalog copy for docc


def rewrite_catalog(copy):
    problems = []
    articles = catalog_articles()
    article_of = {p: n for n, p in articles.items()}
    base_url = os.environ.get("DOCS_REPOSITORY_URL", "").rstrip("/")
    rewritten = 0
    for name in sorted(os.listdir(copy)):
        if not name.endswith(".md"):
            continue
        original = os.path.realpath(os.path.join(CATALOG, name))
        if not os.path.exists(original):
            problems.append(f"{name}: not in {rel(CATALOG)}; is {copy} a copy of it?")
            continue
        copy_path = os.path.join(copy, name)
        with open(copy_path, encoding="utf-8") as f:
            text = f.read()
        edits = []  # (start, end, replacement)
        for link in find_links(text):
            if link.dest.startswith("doc:") or has_scheme(link.dest):
                continue
            where = f"{rel(original)}:{link.line}"
            target, fragment, problem = resolve_relative(original, link.dest)
            if problem:
                problems.append(f"{where}: {problem}")
                continue
            target = os.path.realpath(target)
            if target in article_of:
                if link.kind != "inline":
                    problems.append(f"{where}: `{link.dest}`: only an inline link "
                                    f"([text](Guide.md#anchor)) can be rewritten to a DocC link")
                    continue
                doc = "doc:" + article_of[target]
                if fragment:
                    heading = github_anchors(read(target))[fragment]
                    doc += "#" + docc_fragment(heading)
                edits.append((link.start, link.end, f"<{doc}>"))
            else:
                path = rel(target)
                if base_url:
                    url = f"{base_url}/{urllib.parse.quote(path)}" + (f"#{fragment}" if fragment else "")
                    edits.append((link.start, link.end, url))
                elif link.kind == "inline":
                    label = link.text.strip()
                    shown = f"`{path}`"
                    replacement = shown if label in (path, shown) else f"{link.text} ({shown} in the repository)"
                    edits.append((link.whole[0], link.whole[1], replacement))
                else:
                    problems.append(f"{where}: `{link.dest}`: a {link.kind} link to a file outside "
                                    f"the catalog; set DOCS_REPOSITORY_URL or make it inline")
                    continue
        for start, end, replacement in sorted(edits, reverse=True):
            text = text[:start] + replacement + text[end:]
        rewritten += len(edits)
        with open(copy_path, "w", encoding="utf-8") as f:
            f.write(text)
    return problems, rewritten


# ---------------------------------------------------------------------------------------------
# 3. The built archive


def check_archive(archive):
    problems = []
    data = os.path.join(archive, "data")
    if not os.path.isdir(data):
        return [f"{archive}: no data/ folder: not a documentation archive"], 0
    pages = 0
    for d, dirs, files in os.walk(data):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            pages += 1
            path = os.path.join(d, name)
            with open(path, encoding="utf-8") as f:
                page = json.load(f)
            found = set()

            def walk(node):
                if isinstance(node, dict):
                    if node.get("type") == "link":
                        url = node.get("url", node.get("destination", ""))
                        if url and not has_scheme(url) and not url.startswith("/"):
                            found.add(url)
                    for value in node.values():
                        walk(value)
                elif isinstance(node, list):
                    for value in node:
                        walk(value)

            walk(page)
            for url in sorted(found):
                problems.append(f"{os.path.relpath(path, archive)}: a link to `{url}` that DocC left "
                                f"relative: it leads nowhere in the archive")
    return problems, pages


# ---------------------------------------------------------------------------------------------


def main(argv):
    global TRACKED
    check_spellings()
    TRACKED = tracked_files()
    if len(argv) == 1:
        problems, count = check_sources()
        summary = f"{count} links checked"
    elif len(argv) == 3 and argv[1] == "--docc-catalog":
        if not argv[2].rstrip("/").endswith(".docc") or not os.path.isdir(argv[2]):
            print("check-links: --docc-catalog needs a folder named *.docc", file=sys.stderr)
            return 2
        problems, count = rewrite_catalog(argv[2])
        summary = f"{count} links rewritten for DocC in {argv[2]}"
    elif len(argv) == 3 and argv[1] == "--archive":
        problems, count = check_archive(argv[2])
        summary = f"{count} archive pages checked"
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check-links: {len(problems)} broken link(s) ({summary})", file=sys.stderr)
        return 1
    print(f"check-links: ok, {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
