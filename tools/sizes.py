#!/usr/bin/env python3
"""Size limits of the source tree: no .rs file over 1,000 lines, no function body over 120 lines
outside tests.

Usage: python3 tools/sizes.py [WORKSPACE_ROOT]        (default: the current directory)

Files are the .rs files under src/, crates/, channels/ and cards/ (a crate's tests/, benches/ and
fuzz/ folders are not source). A file's size is all its lines. A function's body is the lines
between the line of its opening brace and the line of its closing one; functions in
`#[cfg(test)]` modules, in files of modules declared `#[cfg(test)] mod x;`, and those marked
`#[test]` (or `#[tokio::test]`…) are tests and not counted.

What is over a limit today and not yet split is named in tools/sizes-allowance.txt, one
`PATH LINES` (a file) or `PATH:FUNCTION LINES` (a function) a line, with the size it had when
written down: it may shrink, not grow. Anything else over a limit, or an allowance exceeded, is
printed and the exit status is 1. An allowance no longer needed is printed as a note (remove its
line). Text-based, not a compiler: good enough to find long files and functions.
"""
import os
import re
import sys

FILE_LIMIT = 1000
FN_LIMIT = 120
ROOTS = ("src", "crates", "channels", "cards")
SKIP_DIRS = {"tests", "benches", "fuzz", "target", "examples"}
ALLOWANCE = os.path.join("tools", "sizes-allowance.txt")

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([{;])")
TEST_ATTR = re.compile(r"#\[(?:[\w:]+::)?test\b[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*$")


def blank(src):
    """Comments, strings and char literals blanked out, every newline kept (line numbers hold)."""
    out, i, n = [], 0, len(src)

    def keep_lines(a, b):
        out.append("\n" * src.count("\n", a, b))

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            start, depth, i = i, 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            keep_lines(start, i)
        elif c in "rb" and re.match(r'(br|r|b)?#*"', src[i:i + 20]) and re.match(r'(br|r)#*"', src[i:i + 20]) \
                and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'(br|r)(#*)"', src[i:])
            end = '"' + m.group(2)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""')
            keep_lines(i, j)
            i = j
        elif c == '"':
            start = i
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
            keep_lines(start, i)
        elif c == "'":
            m = re.match(r"'(\\(x..|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", src[i:i + 14])
            if m:
                i += len(m.group(0))
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(src, open_at):
    """The index of the brace closing the one at `open_at`."""
    depth, j = 0, open_at
    while j < len(src):
        ch = src[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(src) - 1


def body_open(src, at):
    """The opening brace of the function whose `fn` is at `at`, or None (a declaration)."""
    depth, j = 0, at
    while j < len(src):
        ch = src[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return None
        elif depth == 0 and ch == "{":
            return j
        j += 1
    return None


def line_of(src, idx):
    return src.count("\n", 0, idx) + 1


def test_module_files(path, src):
    """Files of the modules `path` declares `#[cfg(test)] mod x;`."""
    here = os.path.dirname(path)
    name = os.path.basename(path)
    base = here if name in ("mod.rs", "lib.rs", "main.rs") else os.path.join(here, name[:-3])
    out = set()
    for m in CFG_TEST_MOD.finditer(src):
        if m.group(2) == ";":
            out.add(os.path.normpath(os.path.join(base, m.group(1) + ".rs")))
            out.add(os.path.normpath(os.path.join(base, m.group(1), "mod.rs")))
            out.add(os.path.normpath(os.path.join(base, m.group(1))))
    return out


def long_functions(src):
    """(name, body lines) of every function over the limit outside tests."""
    test_spans = []
    for m in CFG_TEST_MOD.finditer(src):
        if m.group(2) == "{":
            test_spans.append((m.start(), matching(src, m.end() - 1)))
    out = []
    for m in FN.finditer(src):
        if any(a <= m.start() <= b for a, b in test_spans):
            continue
        head = src[max(0, m.start() - 400):m.start()]
        head = re.sub(r"\b(pub(\([^)]*\))?|async|const|unsafe|extern(\s+\"\")?)\s*", "", head)
        if TEST_ATTR.search(head.rstrip()):
            continue
        open_at = body_open(src, m.end())
        if open_at is None:
            continue
        close_at = matching(src, open_at)
        lines = line_of(src, close_at) - line_of(src, open_at) - 1
        if lines > FN_LIMIT:
            out.append((m.group(1), lines))
    return out


def source_files(root):
    for top in ROOTS:
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for n in sorted(names):
                if n.endswith(".rs"):
                    yield os.path.join(dirpath, n)


def measure(root):
    """{key: lines} of everything over a limit; keys as in the allowance file."""
    found, test_files = {}, set()
    files = list(source_files(root))
    texts = {}
    for path in files:
        texts[path] = open(path, encoding="utf-8", errors="replace").read()
        test_files |= test_module_files(path, texts[path])
    for path in files:
        rel = os.path.relpath(path, root)
        text = texts[path]
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > FILE_LIMIT:
            found[rel] = lines
        norm = os.path.normpath(path)
        if norm in test_files or any(norm.startswith(t + os.sep) for t in test_files):
            continue
        for name, n in long_functions(blank(text)):
            key = f"{rel}:{name}"
            found[key] = max(n, found.get(key, 0))
    return found


def read_allowance(root):
    allowed, path = {}, os.path.join(root, ALLOWANCE)
    if not os.path.exists(path):
        return allowed
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].strip()
        if line:
            key, lines = line.rsplit(None, 1)
            allowed[key] = int(lines)
    return allowed


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found, allowed = measure(root), read_allowance(root)
    bad = 0
    for key, n in sorted(found.items()):
        limit = FILE_LIMIT if ":" not in key else FN_LIMIT
        what = "file" if ":" not in key else "function body"
        if key not in allowed:
            print(f"{key}: {what} of {n} lines, over the limit of {limit}")
            bad += 1
        elif n > allowed[key]:
            print(f"{key}: {what} of {n} lines, grown past its allowance of {allowed[key]} ({ALLOWANCE})")
            bad += 1
    for key in sorted(set(allowed) - set(found)):
        print(f"note: {key} is within the limits now; remove its line from {ALLOWANCE}")
    kept = sorted(set(allowed) & set(found))
    if kept:
        print(f"{len(kept)} still over a limit by allowance ({ALLOWANCE}):")
        for key in kept:
            print(f"  {key}: {found[key]} lines")
    if bad:
        print(f"{bad} over the limits (files {FILE_LIMIT} lines, function bodies {FN_LIMIT})")
        return 1
    print(f"no file over {FILE_LIMIT} lines, no function body over {FN_LIMIT} outside tests"
          + (" but those allowed above" if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
