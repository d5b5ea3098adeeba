#!/usr/bin/env python3
"""Lists functions longer than a limit that do not say why they are one piece.

A function over LIMIT lines (Rust under crates/, Python under python/ and
bench/) must carry, in its doc comment or the comment lines right above it,
a sentence with the words "one piece" saying why it is not split. Exits 1
and names each offender otherwise. Run by `make lint`.

Rust is read with a small lexer (strings, raw strings, chars, comments)
so braces inside them do not count; Python with its own `ast`.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

LIMIT = 80
ROOT = Path(__file__).resolve().parent.parent
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")


def rust_code_only(text: str) -> str:
    """The source with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
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
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", text[i:])):
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def says_why(lines: list[str], first: int) -> bool:
    """A "one piece" sentence in the comment block above line index ``first``."""
    j = first - 1
    while j >= 0 and re.match(r"\s*(//|#\[|#|@)", lines[j]):
        if "one piece" in lines[j].lower():
            return True
        j -= 1
    return False


def rust_functions(path: Path):
    text = path.read_text()
    code = rust_code_only(text).split("\n")
    lines = text.split("\n")
    for i, line in enumerate(code):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(code)):
            if not opened and code[j].rstrip().endswith(";") and "{" not in code[j]:
                break
            depth += code[j].count("{") - code[j].count("}")
            opened = opened or "{" in code[j]
            if opened and depth <= 0:
                yield m.group(1), i + 1, j - i + 1, says_why(lines, i)
                break


def python_functions(path: Path):
    text = path.read_text()
    lines = text.split("\n")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            doc = ast.get_docstring(node) or ""
            why = "one piece" in doc.lower() or says_why(lines, first)
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1, why


def main() -> int:
    found = []
    for path in sorted((ROOT / "crates").rglob("*.rs")):
        if "target" not in path.parts:
            found += [(path, *f) for f in rust_functions(path)]
    for d in ("python", "bench"):
        for path in sorted((ROOT / d).rglob("*.py")):
            found += [(path, *f) for f in python_functions(path)]
    bad = [f for f in found if f[3] > LIMIT and not f[4]]
    for path, name, line, length, _ in sorted(bad, key=lambda f: -f[3]):
        print(f"{path.relative_to(ROOT)}:{line}: {name} is {length} lines; split it, or say in a comment above "
              "it why it is one piece")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
