#!/usr/bin/env python3
"""Check that the kernel crate's modules depend on each other one way only.

Every `.rs` file under crates/kernel/src is a module (lib.rs is the crate root, `x/mod.rs` is
`x`). A dependency is a `crate::…` or `super::…` path in code (comments and doc comments are
skipped); it points at the longest module its path names. A module may use its own submodules
(declared with `mod`); those bare paths are composition, not edges.

Fails (exit 1) on any cycle, and on any edge against the intended layering
kernel → chain → tools → exec (exec and its submodules never reach back into tools, chain or
kernel; tools never into chain or kernel; chain never into kernel). Prints the edges with -v.
"""

import importlib.util
import pathlib
import re
import sys

# The cycle search is the workspace-wide check's (scripts/check-module-cycles.py).
_spec = importlib.util.spec_from_file_location(
    "module_cycles", pathlib.Path(__file__).resolve().parent / "check-module-cycles.py"
)
module_cycles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(module_cycles)

SRC = pathlib.Path(__file__).resolve().parent.parent / "crates" / "kernel" / "src"

# The layers, outermost first: a module of a layer may depend on later layers only.
LAYERS = ["kernel", "chain", "tools", "exec"]


def module_of(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts == ["lib"]:
        return "crate"
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(parts)


def code_lines(text: str):
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        yield line.split("//")[0] if '"' not in line else line


def main() -> int:
    files = sorted(SRC.rglob("*.rs"))
    modules = {module_of(f): f for f in files}
    edges = {m: set() for m in modules}
    path_re = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)(::\{[^}]*\})?")
    for mod, f in modules.items():
        parent = mod.rsplit("::", 1)[0] if "::" in mod else "crate"
        # Comments out; lines joined so a `use crate::{…}` group over several lines is one.
        text = "\n".join(code_lines(f.read_text()))
        # `super::` inside an inline `mod tests { … }` of a file names the file's own module.
        inline = re.search(r"\n\s*mod \w+ \{", text)
        for m in path_re.finditer(text):
            base, rest, group = m.group(1), m.group(2), m.group(3)
            if base == "super":
                if inline and m.start() > inline.start():
                    continue
                anchor = [] if parent == "crate" else parent.split("::")
            else:
                anchor = []
            prefix = [p for p in rest.split("::") if p]
            paths = [prefix]
            if group:
                paths = []
                for item in group[3:-1].split(","):
                    item = item.strip().split(" as ")[0]
                    names = [p for p in item.split("::") if p and p not in ("self", "*")]
                    paths.append(prefix + names)
            for names in paths:
                target = None
                for i in range(len(names), -1, -1):
                    cand = "::".join(anchor + names[:i]) or "crate"
                    if cand in modules:
                        target = cand
                        break
                if target and target != mod and target != "crate":
                    edges[mod].add(target)

    def layer(m: str):
        top = m.split("::")[0]
        return LAYERS.index(top) if top in LAYERS else None

    problems = []
    for a, bs in sorted(edges.items()):
        for b in sorted(bs):
            la, lb = layer(a), layer(b)
            if la is not None and lb is not None and lb < la:
                problems.append(f"layering: {a} → {b} points back up ({' → '.join(LAYERS)})")
            if b.split("::")[0] == a.split("::")[0] and b.startswith(a + "::"):
                problems.append(f"parent reaches into a child by path: {a} → {b}")

    # Cycles: the workspace check's strongly connected components, over this graph.
    sccs = module_cycles.cycles(edges)
    for comp in sccs:
        problems.append("cycle: " + " ↔ ".join(comp))

    if "-v" in sys.argv:
        for a, bs in sorted(edges.items()):
            if bs:
                print(f"{a} → {', '.join(sorted(bs))}")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"kernel modules: {len(modules)}, no cycle, layering {' → '.join(LAYERS)} holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
