#!/usr/bin/env python3
"""Module dependency cycles inside each crate of the workspace.

    scripts/check-module-cycles.py [CRATE_DIR ...]   (default: every crates/*/)

Reads every `src/**/*.rs` of a crate, maps files to module paths (`a.rs` and `a/mod.rs` are
`a`, `a/b.rs` is `a::b`), and collects an edge A -> B for each `crate::`, `super::` or `self::`
path in module A (in `use` declarations, braces expanded, and in code) that names module B or
an item in it. Edges between a module and its own ancestors are left out (a parent declares
and may re-export its children; a child may use what its parent defines), and so is the crate
root, which only declares modules and re-exports the public API. Comments are ignored.

Prints each crate's strongly connected components of more than one module and exits 1 if
there is any, else prints "no cycles" per crate and exits 0.
"""
import os
import re
import sys
from pathlib import Path


def module_of(src: Path, f: Path):
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts in (["lib"], ["main"]):
        return ()
    if parts and parts[0] == "bin":
        return None  # binaries are crate roots of their own
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] if "//" in line and '"' not in line.split("//", 1)[0] else line
                     for line in text.splitlines() if not line.lstrip().startswith("//"))


def expand(tree: str):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [tree]
    prefix, inner = tree[:i], tree[i + 1 : tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    out = []
    for it in filter(None, items):
        out += expand(prefix + it)
    return out


def paths_in(text: str):
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        yield from expand(m.group(1))
    for m in re.finditer(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
        yield m.group(1)


def resolve(path: str, here: tuple, modules: set):
    parts = re.sub(r"\s+as\s+\w+$", "", path).split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    elif parts[0] in ("super", "self"):
        base = here
        while parts and parts[0] in ("super", "self"):
            if parts.pop(0) == "super":
                base = base[:-1]
        rest = parts
    else:
        return None
    best = base if base in modules else None
    for k in range(1, len(rest) + 1):
        cand = base + tuple(rest[:k])
        if cand in modules:
            best = cand
    return best


def cycles(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def check(crate: Path) -> bool:
    src = crate / "src"
    files = {}
    for f in sorted(src.rglob("*.rs")):
        m = module_of(src, f)
        if m is not None:
            files[m] = f
    modules = set(files)
    graph = {m: set() for m in modules if m}
    for m, f in files.items():
        if not m:
            continue
        for p in paths_in(strip_comments(f.read_text())):
            t = resolve(p, m, modules)
            if t is None or t == () or t == m:
                continue
            if t[: len(m)] == m or m[: len(t)] == t:
                continue  # own descendant or ancestor
            graph[m].add(t)
    found = cycles(graph)
    name = crate.name
    if not found:
        edges = sum(len(v) for v in graph.values())
        print(f"{name}: no cycles ({len(graph)} modules, {edges} edges)")
        return True
    for comp in found:
        names = ["::".join(c) for c in comp]
        print(f"{name}: cycle among {', '.join(names)}")
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print(f"    {'::'.join(a)} -> {'::'.join(b)}")
    return False


def main():
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in sys.argv[1:]] or sorted(p for p in (root / "crates").iterdir() if (p / "src").is_dir())
    ok = all([check(c) for c in crates])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
