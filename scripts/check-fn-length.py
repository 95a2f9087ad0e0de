#!/usr/bin/env python3
"""Fail when a function in the bash guard (crates/policy/src/guard/**) is longer than 80 lines.

A function's length runs from its `fn` line to its closing brace. The scan skips strings, raw
strings, character literals and comments, so braces inside them do not count.
Usage: python3 scripts/check-fn-length.py [--list] [ROOT...]
"""
import pathlib
import re
import sys

LIMIT = 80
ROOTS = ["crates/policy/src/guard"]
FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def code_only(text):
    """The text with strings, chars and comments blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^'\\])'", text[i:i + 12]):
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^'\\])'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of every function with a body in one file."""
    code = code_only(path.read_text())
    for m in FN.finditer(code):
        # The body starts at the first `{` after the signature, unless a `;` ends it first.
        k = m.end()
        depth_paren = 0
        while k < len(code):
            ch = code[k]
            if ch in "([<":
                depth_paren += 1
            elif ch in ")]>":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                k = -1
                break
            elif ch == "{" and depth_paren <= 0:
                break
            k += 1
        if k < 0 or k >= len(code):
            continue
        depth = 0
        j = k
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, j) + 1
        yield m.group(1), first, last - first + 1


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    listing = "--list" in sys.argv
    long = []
    for root in args or ROOTS:
        for path in sorted(pathlib.Path(root).rglob("*.rs")):
            for name, line, length in functions(path):
                if length > LIMIT:
                    long.append((length, f"{path}:{line}", name))
    long.sort(reverse=True)
    for length, where, name in long:
        print(f"{where}: fn {name} is {length} lines (limit {LIMIT})")
    if long and not listing:
        sys.exit(1)
    if not long:
        print(f"no function over {LIMIT} lines in {', '.join(args or ROOTS)}")


if __name__ == "__main__":
    main()
