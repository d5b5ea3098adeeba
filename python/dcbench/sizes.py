"""Sizes and the sizing rules scenarios are written in.

Sizes are read as everywhere in the project (README, "Sizes"): fio's
grammar, where ``k``, ``m``, ``g``, ``t``, ``p`` (with or without ``b``) are
powers of 1024 and ``KiB``, ``MiB``, ... powers of 1000; dcbench also takes a
decimal fraction (``1.5g``).

A rule is an arithmetic expression over ``mem`` (the memory the page cache
may use in this run), size literals (``512m``, ``4k``, ``1g``) and ``min``/``max``: ``2*mem``, ``mem/4``,
``min(512m, mem/4)``. The result is rounded down to a whole MiB (below 1 MiB,
to whole 4 KiB pages) so that the block sizes used divide it.
"""

from __future__ import annotations

import ast
import re

_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgtp])(i?)b?|b?)\s*$", re.IGNORECASE)
_LITERAL = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([kmgtpKMGTP])([iI]?)(?:[bB])?\b")


def _unit(prefix: str | None, iec: str) -> int:
    """fio's default kb_base: ``k`` is 1024, ``KiB`` is 1000."""
    return (1000 if iec else 1024) ** _POWERS[(prefix or "").lower()]
MIB = 1 << 20
PAGE = 4096


def parse_size(text: str) -> int:
    """``4g``, ``512M``, ``1.5g``, ``4096`` -> bytes (``64KiB`` is 64,000: fio's grammar)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (like 512m, 4g or 1048576)")
    return int(float(m.group(1)) * _unit(m.group(2), m.group(3) or ""))


def format_size(n: float) -> str:
    """Bytes as the shortest exact-enough binary unit: ``8.0 GiB``, ``512 MiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def dcload_size(n: int) -> str:
    """A byte count as dcload reads it (``m`` suffix when whole MiB)."""
    return f"{n // MIB}m" if n % MIB == 0 else str(n)


_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_FUNCS = {"min": min, "max": max}


def check_rule(rule: str) -> None:
    """Raise ValueError if ``rule`` is not a valid sizing rule."""
    evaluate_rule(rule, 1 << 30)


def evaluate_rule(rule: str, mem: int) -> int:
    """The bytes ``rule`` gives for ``mem`` bytes of page-cache memory."""
    if not isinstance(rule, str) or not rule.strip():
        raise ValueError("a sizing rule must be a non-empty string such as '2*mem'")
    expr = _LITERAL.sub(lambda m: f"({m.group(1)}*{_unit(m.group(2), m.group(3))})", rule)
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ValueError(f"sizing rule {rule!r} is not an expression over mem, sizes, + - * / min max") from None

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id == "mem":
            return float(mem)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if b == 0:
                raise ValueError(f"sizing rule {rule!r} divides by zero")
            return a / b
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and node.args
            and not node.keywords
        ):
            return _FUNCS[node.func.id](ev(a) for a in node.args)
        raise ValueError(f"sizing rule {rule!r}: only mem, sizes (512m), numbers, + - * / and min/max are allowed")

    value = int(ev(tree))
    # Whole MiB (whole 4 KiB pages for small files), so every block size divides it.
    value = value // MIB * MIB if value >= MIB else value // PAGE * PAGE
    if value < PAGE:
        raise ValueError(f"sizing rule {rule!r} gives less than 4 KiB for mem={format_size(mem)}")
    return value
