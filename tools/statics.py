#!/usr/bin/env python3
"""No process-wide state outside tests: every `static` holding something that can change
(`OnceLock`, `LazyLock`, `Mutex`, `RwLock`, atomics, cells, `thread_local!`) and every struct
field of type `OnceLock` (a part set after its construction) must be named, with the reason, in
tools/statics-allowance.txt. What may stay there: memos of constants (a compiled regex, a parsed
time zone), the metrics registry, and what a sandbox child process keeps for its own short life.
A tool's declaration (`static DECL: LazyLock<ToolDecl>`, built from literals) is a constant by
construction: counted, not listed.
Everything else is a field of the value that owns it, given to it by the daemon's wiring step
(src/daemon/wiring.rs).

Usage: python3 tools/statics.py [WORKSPACE_ROOT]      (default: the current directory)

The files are those tools/sizes.py measures (src/, crates/, channels/, cards/, without tests/,
benches/ and fuzz/); `#[cfg(test)]` modules and the files of `#[cfg(test)] mod x;` are skipped.
An allowance is one `PATH:NAME  reason` a line. A new static or field not allowed, or an
allowance no longer found, is printed and the exit status is 1. Text-based, not a compiler.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sizes  # noqa: E402  (the same files, test modules and comment blanking)

ALLOWANCE = os.path.join("tools", "statics-allowance.txt")
STATEFUL = r"(?:OnceLock|OnceCell|LazyLock|LazyCell|Lazy|Mutex|RwLock|Atomic\w+|Cell|RefCell)\b"
STATIC = re.compile(r"\bstatic\s+(?:mut\s+)?([A-Z_][A-Z0-9_]*)\s*:\s*([^=;]*)")
THREAD_LOCAL = re.compile(r"\bthread_local!\s*\{[^}]*?static\s+([A-Z_][A-Z0-9_]*)")
# A tool's declaration (`static DECL: LazyLock<ToolDecl>` in its `decl()`): built once from
# literals, with no interior mutability, so a memo of a constant by construction; counted, not listed.
DECLARATION = re.compile(r"LazyLock\s*<\s*(?:[\w:]+::)?ToolDecl\s*>")
ONCE_FIELD = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:\s*(?:[\w:]*Arc\s*<\s*)?(?:[\w:]+::)?OnceLock\s*<",
    re.M)


def found(root):
    """{PATH:NAME: line} of every stateful static and OnceLock field outside tests."""
    out, test_files, texts = {}, set(), {}
    decls = found.decls = []
    files = list(sizes.source_files(root))
    for path in files:
        texts[path] = open(path, encoding="utf-8", errors="replace").read()
        test_files |= sizes.test_module_files(path, texts[path])
    for path in files:
        norm = os.path.normpath(path)
        if norm in test_files or any(norm.startswith(t + os.sep) for t in test_files):
            continue
        src = sizes.blank(texts[path])
        spans = [(m.start(), sizes.matching(src, m.end() - 1))
                 for m in sizes.CFG_TEST_MOD.finditer(src) if m.group(2) == "{"]
        rel = os.path.relpath(path, root)

        def keep(name, at):
            if not any(a <= at <= b for a, b in spans):
                out[f"{rel}:{name}"] = sizes.line_of(src, at)

        for m in STATIC.finditer(src):
            if DECLARATION.fullmatch(m.group(2).strip()):
                decls.append(f"{rel}:{m.group(1)}")
            elif re.search(STATEFUL, m.group(2)):
                keep(m.group(1), m.start())
        for m in THREAD_LOCAL.finditer(src):
            keep(m.group(1), m.start())
        for m in ONCE_FIELD.finditer(src):
            keep(m.group(1), m.start())
    return out


def allowance(root):
    out = {}
    with open(os.path.join(root, ALLOWANCE), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, why = line.partition(" ")
                if not why.strip():
                    print(f"{ALLOWANCE}: {key} has no reason")
                out[key] = why.strip()
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    have, allowed = found(root), allowance(root)
    bad = 0
    for key, line in sorted(have.items()):
        if key not in allowed:
            path = key.rsplit(":", 1)[0]
            print(f"{path}:{line}: {key.rsplit(':', 1)[1]} is process-wide or set-after-construction "
                  f"state; make it a field of its owner, given by the wiring step (or, for a memo "
                  f"of a constant, name it in {ALLOWANCE} with the reason)")
            bad += 1
    for key in sorted(set(allowed) - set(have)):
        print(f"{key} is gone; remove its line from {ALLOWANCE}")
        bad += 1
    if bad:
        return 1
    print(f"no process-wide state outside tests but the {len(have)} named in {ALLOWANCE} "
          f"(and {len(found.decls)} tools' declarations, constants built once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
