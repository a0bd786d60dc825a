#!/usr/bin/env python3
"""Module cycles at every depth, in every crate of the workspace.

Usage: python3 tools/modcycles.py [WORKSPACE_ROOT]      (default: the current directory)

A crate is a folder with a Cargo.toml and src/lib.rs or src/main.rs. Each source file is a module
(src/tools/engine/policy.rs is tools::engine::policy; a mod.rs is its folder's module). A path in a
file (`crate::a::b`, `super::x`, `self::x`, in `use` or inline, `use` groups expanded) names the
deepest module it reaches. For every module P, its child modules form a graph: child A points at
child B when a file inside A names something inside B. A cycle in any such graph is printed, with
one file and path for each arrow. `#[cfg(test)]` modules are skipped. Exit status 1 when a cycle
exists. Text-based, not a compiler: good enough to find real cycles.
"""
import os
import re
import sys

CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE = re.compile(r"\buse\s+([^;]*);", re.S)


def blank_literals(src):
    """Comments, strings (raw ones too) and char literals out, so braces and paths in them count
    for nothing."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 20]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
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


def strip(src):
    src = blank_literals(src)
    out, i = [], 0
    for m in CFG_TEST.finditer(src):
        if m.start() < i:
            continue
        out.append(src[i:m.start()])
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        i = j
    out.append(src[i:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, 0, []
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0]]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p2 for p in parts if p for p2 in expand_use(prefix + p)]


def module_of(rel):
    """src-relative file -> module path tuple."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


def crate_modules(src_dir):
    files = {}
    for root, _dirs, names in os.walk(src_dir):
        for n in names:
            if n.endswith(".rs"):
                path = os.path.join(root, n)
                rel = os.path.relpath(path, src_dir)
                if rel.startswith("bin" + os.sep):
                    continue
                if rel == "main.rs" and os.path.exists(os.path.join(src_dir, "lib.rs")):
                    continue  # the binary is a crate of its own over the library
                files[module_of(rel)] = path
    return files


def resolve(mod, kind, segs, known):
    if kind == "crate":
        base = ()
    elif kind == "self":
        base = mod
    else:
        base, segs = mod[:-1], segs
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
    target = base
    for s in segs:
        if target + (s,) in known:
            target = target + (s,)
        else:
            break
    return target


def edges_of(mod, path, known):
    src = strip(open(path, encoding="utf-8", errors="replace").read())
    refs = []
    for m in USE.finditer(src):
        for u in expand_use(m.group(1)):
            head = u.split("::")
            if head[0] in ("crate", "super", "self"):
                refs.append((head[0], head[1:], u))
    for m in PATH.finditer(src):
        segs = m.group(2).split("::")[1:]
        refs.append((m.group(1), segs, m.group(0)))
    out = []
    for kind, segs, text in refs:
        segs = [s for s in segs if s not in ("{", "*")]
        target = resolve(mod, kind, segs, known)
        out.append((target, text))
    return out


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


TEST_MOD_DECL = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def drop_test_files(files):
    """Files of modules declared `#[cfg(test)] mod x;`, and everything below them, dropped."""
    test_mods = set()
    for mod, path in files.items():
        src = blank_literals(open(path, encoding="utf-8", errors="replace").read())
        for m in TEST_MOD_DECL.finditer(src):
            test_mods.add(mod + (m.group(1),))
    return {
        mod: path
        for mod, path in files.items()
        if not any(mod[: len(t)] == t for t in test_mods)
    }


def check_crate(name, src_dir):
    files = drop_test_files(crate_modules(src_dir))
    known = set(files)
    for m in list(known):
        for i in range(len(m)):
            known.add(m[:i])
    # graph[parent][child_a] = {child_b: (file, text)}
    graph = {}
    for mod, path in files.items():
        for target, text in edges_of(mod, path, known):
            i = 0
            while i < min(len(mod), len(target)) and mod[i] == target[i]:
                i += 1
            if i >= len(mod) or i >= len(target):
                continue  # an ancestor or a descendant: not between siblings
            parent, a, b = mod[:i], mod[i], target[i]
            graph.setdefault(parent, {}).setdefault(a, {}).setdefault(b, (path, text))
    found = []
    for parent, g in sorted(graph.items()):
        for comp in cycles({a: set(bs) for a, bs in g.items()}):
            where = "::".join(("crate",) + parent)
            lines = [f"cycle in crate {name}, inside {where}: {' <-> '.join(comp)}"]
            for a in comp:
                for b in comp:
                    if b in g.get(a, {}):
                        path, text = g[a][b]
                        lines.append(f"  {a} -> {b}: {text} ({path})")
            found.append("\n".join(lines))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "node_modules", "fuzz", "vendor")]
        if "Cargo.toml" in names:
            src = os.path.join(dirpath, "src")
            if os.path.exists(os.path.join(src, "lib.rs")) or os.path.exists(
                os.path.join(src, "main.rs")
            ):
                name = os.path.relpath(dirpath, root)
                found += check_crate(name, src)
    print("\n".join(found) if found else "no module cycles at any depth")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
