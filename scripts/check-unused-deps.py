#!/usr/bin/env python3
"""Fails when a crate of the workspace declares a dependency its code never names.

A dependency counts as used when its crate name (`-` read as `_`) appears as `name::`,
`use name`, or `extern crate name` in the crate's Rust files: `src/` and `build.rs` for
`[dependencies]`, and also `tests/`, `benches/` and `examples/` for `[dev-dependencies]`. A
dependency kept for another reason (a feature it switches on) is listed under
`[package.metadata.cargo-machete] ignored = ["name"]` in that crate's Cargo.toml.

Usage: python3 scripts/check-unused-deps.py   (from anywhere in the repository)
"""

import pathlib
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

ROOT = pathlib.Path(__file__).resolve().parent.parent

TABLES = ("dependencies", "build-dependencies", "dev-dependencies")


def load_manifest(path: pathlib.Path) -> dict:
    """The parts of a Cargo.toml this check reads (tomllib when there is one)."""
    text = path.read_text()
    if tomllib is not None:
        return tomllib.loads(text)
    out: dict = {}
    members = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    if members:
        out["workspace"] = {"members": re.findall(r'"([^"]+)"', members.group(1))}
    ignored = re.search(
        r"^\[package\.metadata\.cargo-machete\]\s*ignored\s*=\s*\[(.*?)\]", text, re.S | re.M
    )
    if ignored:
        out["package"] = {
            "metadata": {"cargo-machete": {"ignored": re.findall(r'"([^"]+)"', ignored.group(1))}}
        }
    section = None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            header = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
            section = header.group(1) if header else None  # [[bench]] and the like: no deps
            parts = (section or "").split(".", 1)
            if parts[0] in TABLES and len(parts) == 2:  # [dependencies.name]
                out.setdefault(parts[0], {})[parts[1]] = {}
            continue
        if section in TABLES and "=" in line:
            name = line.split("=", 1)[0].strip().split(".", 1)[0].strip('"')
            out.setdefault(section, {})[name] = {}
    return out


def rust_text(crate: pathlib.Path, dirs: list[str]) -> str:
    parts = []
    for d in dirs:
        p = crate / d
        if p.is_file():
            parts.append(p.read_text(errors="replace"))
        elif p.is_dir():
            parts.extend(f.read_text(errors="replace") for f in sorted(p.rglob("*.rs")))
    return "\n".join(parts)


def used(name: str, text: str) -> bool:
    ident = re.escape(name.replace("-", "_"))
    pattern = rf"(\b{ident}::|\buse\s+{ident}\b|\bextern\s+crate\s+{ident}\b)"
    return re.search(pattern, text) is not None


def main() -> int:
    workspace = load_manifest(ROOT / "Cargo.toml")
    unused = []
    for member in workspace["workspace"]["members"]:
        crate = ROOT / member
        manifest = load_manifest(crate / "Cargo.toml")
        ignored = set(
            manifest.get("package", {})
            .get("metadata", {})
            .get("cargo-machete", {})
            .get("ignored", [])
        )
        src = rust_text(crate, ["src", "build.rs"])
        everything = src + "\n" + rust_text(crate, ["tests", "benches", "examples"])
        for table, text in (
            ("dependencies", src),
            ("build-dependencies", src),
            ("dev-dependencies", everything),
        ):
            for name, spec in manifest.get(table, {}).items():
                # A renamed dependency is named in code by its key.
                if name in ignored or used(name, text):
                    continue
                unused.append(f"{member}/Cargo.toml [{table}] {name}")
    for line in unused:
        print(f"unused dependency: {line}")
    if unused:
        print(f"{len(unused)} unused dependencies: remove them (or list a feature-only one under "
              "[package.metadata.cargo-machete] ignored)", file=sys.stderr)
        return 1
    print("no unused dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
