"""Safe arithmetic for GSM8K-style solutions: evaluate, check and re-derive ``<<expr=value>>``
steps.

Nothing here calls ``eval``: expressions are parsed with ``ast`` and only numbers, ``+ - * / //``,
unary signs and brackets are accepted. ``alternatives`` gives other verified ways to compute one
step (another order, a split product, repeated addition, an inverse check, regrouping, multiplying
out a bracket); the rule teacher (``pr1lib.worlds.teachers.RuleTeacher``) turns them into parallel
paths.

>>> alternatives("3*16", "48")["repeat"]
'16+16+16=<<16+16+16=48>>48'
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Callable

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}
_SYM = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_PREC = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2}


def parse_expr(expr: str) -> ast.expr:
    """Parse ``expr`` and reject anything but numbers, ``+ - * / //``, unary signs and brackets."""
    if len(expr) > 200:
        raise ValueError("expression too long")
    node = ast.parse(expr.replace(",", "").strip(), mode="eval").body
    for sub in ast.walk(node):
        allowed = isinstance(sub, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop))
        if not allowed or (isinstance(sub, ast.BinOp) and type(sub.op) not in _OPS):
            raise ValueError(f"not plain arithmetic: {expr!r}")
        if isinstance(sub, ast.UnaryOp) and not isinstance(sub.op, (ast.USub, ast.UAdd)):
            raise ValueError(f"not plain arithmetic: {expr!r}")
        if isinstance(sub, ast.Constant) and type(sub.value) not in (int, float):
            raise ValueError(f"not a number: {sub.value!r}")
    return node


def _eval(node: ast.expr) -> float:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    return _OPS[type(node.op)](_eval(node.left), _eval(node.right))


def compute(expr: str) -> float:
    """Evaluate plain arithmetic without ``eval`` (an ``ast`` whitelist).

    >>> compute("100-50-30-15"), compute("80/100*10"), compute("(2+3)*4")
    (5, 8.0, 20)
    >>> compute("__import__('os')")
    Traceback (most recent call last):
    ...
    ValueError: not plain arithmetic: "__import__('os')"
    """
    return _eval(parse_expr(expr))


def close(a: float, b: float) -> bool:
    """Numbers equal up to rounding noise."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def format_number(x: float) -> str:
    """Integers without a decimal point, others to at most 6 decimals.

    >>> format_number(24.0), format_number(0.30000000000000004), format_number(-2.5)
    ('24', '0.3', '-2.5')
    """
    if close(x, round(x)):
        return str(int(round(x)))
    return f"{x:.6f}".rstrip("0").rstrip(".")


ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>=]+)>>")


def check_arithmetic(text: str) -> list[str]:
    """Errors for every ``<<expr=value>>`` annotation in ``text`` that is wrong or unreadable.

    >>> check_arithmetic("3*4=<<3*4=12>>12 and 5+5=<<5+5=11>>11")
    ['5+5 is 10, not 11']
    """
    errors = []
    for expr, stated in ANNOTATION.findall(text):
        try:
            value = compute(expr)
            if not close(value, float(stated.replace(",", ""))):
                errors.append(f"{expr} is {format_number(value)}, not {stated}")
        except (ValueError, SyntaxError, ZeroDivisionError, TypeError):
            errors.append(f"cannot check <<{expr}={stated}>>")
    return errors


def unparse(node: ast.expr) -> str:
    """Compact GSM8K-style text for an arithmetic tree, with only the brackets it needs.

    >>> unparse(parse_expr("( 2 + 3 ) * 4 - (5 - 1)"))
    '(2+3)*4-(5-1)'
    """
    if isinstance(node, ast.Constant):
        return format_number(node.value)
    if isinstance(node, ast.UnaryOp):
        inner = unparse(node.operand)
        return ("-" if isinstance(node.op, ast.USub) else "") + (
            inner if isinstance(node.operand, ast.Constant) else f"({inner})"
        )
    prec = _PREC[type(node.op)]
    left, right = unparse(node.left), unparse(node.right)
    if _prec(node.left) < prec:
        left = f"({left})"
    if _prec(node.right) < prec or (
        _prec(node.right) == prec and type(node.op) in (ast.Sub, ast.Div, ast.FloorDiv)
    ):
        right = f"({right})"
    return f"{left}{_SYM[type(node.op)]}{right}"


def _prec(node: ast.expr) -> int:
    return _PREC[type(node.op)] if isinstance(node, ast.BinOp) else 3


def _num(node: ast.expr) -> float | None:
    """The value of a bare (possibly signed) number, else ``None``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return _eval(node)
    return None


def annotate(expr: str, value: float | str) -> str:
    """``expr=<<expr=value>>value`` after checking that it is true (``ArithmeticError`` if not).

    >>> annotate("48/2", 24.0)
    '48/2=<<48/2=24>>24'
    """
    shown = value if isinstance(value, str) else format_number(value)
    if not close(compute(expr), float(shown)):
        raise ArithmeticError(f"{expr} != {shown}")
    return f"{expr}=<<{expr}={shown}>>{shown}"


# ----------------------------------------------------------------------- alternative computations
def _chain(node: ast.expr, ops: tuple[type, ...]) -> list[tuple[type, ast.expr]]:
    """Flatten a left-leaning chain of ``ops`` into ``[(op, operand), ...]`` (first op is
    ops[0])."""
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        return [*_chain(node.left, ops), (type(node.op), node.right)]
    return [(ops[0], node)]


def _alt_reorder(node: ast.expr, result: str) -> str | None:
    """Same terms in another order (commuted sum or product; signed terms keep their sign)."""
    for ops in ((ast.Add, ast.Sub), (ast.Mult, ast.Div)):
        terms = _chain(node, ops)
        if len(terms) < 2:
            continue
        first = [t for t in terms if t[0] is ops[0]]
        if len(first) < 2:
            return None
        reordered = first[::-1] + [t for t in terms if t[0] is not ops[0]]
        text = "".join(
            ("" if i == 0 else _SYM[op]) + _operand(n, op, i) for i, (op, n) in enumerate(reordered)
        )
        return None if text == unparse(node) else annotate(text, result)
    return None


def _operand(node: ast.expr, op: type, index: int) -> str:
    text = unparse(node)
    needs = _prec(node) < _PREC[op] or (
        index > 0 and _prec(node) == _PREC[op] and op in (ast.Sub, ast.Div)
    )
    return f"({text})" if needs else text


def _alt_inverse(node: ast.expr, result: str) -> str | None:
    """Compute, then undo the last operation as a check: ``a+b=c; check: c-b=a``.

    The result comes first, so the path stands on its own: under the unseen mask a path cannot
    read its siblings, and a check that opened with the answer would have to guess it."""
    if not isinstance(node, ast.BinOp) or _num(node.right) is None or _num(node.left) is None:
        return None
    inverse = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*"}.get(type(node.op))
    b, a = unparse(node.right), _eval(node.left)
    if inverse is None or (inverse == "/" and _num(node.right) == 0):
        return None
    b_text = f"({b})" if b.startswith("-") else b
    check = annotate(f"{result}{inverse}{b_text}", a)
    return f"{annotate(unparse(node), result)}; check: {check}."


def _alt_split(node: ast.expr, result: str) -> str | None:
    """Multiply in two parts: ``12*52 = 12*50 + 12*2``."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return None
    for a, b in ((_num(node.left), _num(node.right)), (_num(node.right), _num(node.left))):
        if a is None or not isinstance(b, int) or b < 11:
            continue
        hi = b - b % 10 if b % 10 else b - b % 100
        if 0 < hi < b:
            x, lo = format_number(a), b - hi
            p, q = format_number(a * hi), format_number(a * lo)
            return (
                f"{annotate(f'{x}*{hi}', p)} and {annotate(f'{x}*{lo}', q)}, so "
                f"{annotate(f'{p}+{q}', result)}."
            )
    return None


def _alt_repeat(node: ast.expr, result: str) -> str | None:
    """A small product as repeated addition: ``3*16 = 16+16+16``."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return None
    for k, x in ((_num(node.left), _num(node.right)), (_num(node.right), _num(node.left))):
        if isinstance(k, int) and 2 <= k <= 4 and x is not None and x > 0:
            return annotate("+".join([format_number(x)] * k), result)
    return None


def _alt_regroup(node: ast.expr, result: str) -> str | None:
    """A chain of one operation, later terms grouped first: ``a-b-c = a-(b+c)``, ``a+b+c =
    a+(b+c)``."""
    for ops, join in (
        ((ast.Add, ast.Sub), {ast.Add: "+", ast.Sub: "+"}),
        ((ast.Mult, ast.Div), {ast.Mult: "*", ast.Div: "*"}),
    ):
        terms = _chain(node, ops)
        kinds = {op for op, _ in terms[1:]}
        if len(terms) < 3 or len(kinds) != 1 or any(_prec(t) < 3 for _, t in terms):
            continue
        op = kinds.pop()
        rest = join[op].join(unparse(t) for _, t in terms[1:])
        value = compute(rest)
        shown = format_number(value)
        if value < 0 or not close(value, float(shown)):
            return None
        return (
            f"{annotate(rest, shown)}, then "
            f"{annotate(unparse(terms[0][1]) + _SYM[op] + shown, result)}."
        )
    return None


def _alt_distribute(node: ast.expr, result: str) -> str | None:
    """Multiply out a bracket: ``(a+b)*c = a*c+b*c``."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return None
    for group, k in ((node.left, _num(node.right)), (node.right, _num(node.left))):
        if (
            k is None
            or not isinstance(group, ast.BinOp)
            or not isinstance(group.op, (ast.Add, ast.Sub))
        ):
            continue
        a, b = _num(group.left), _num(group.right)
        if a is None or b is None:
            continue
        kt, p, q = format_number(k), format_number(a * k), format_number(b * k)
        sign = _SYM[type(group.op)]
        return (
            f"{annotate(f'{format_number(a)}*{kt}', p)} and "
            f"{annotate(f'{format_number(b)}*{kt}', q)}, "
            f"so {annotate(f'{p}{sign}{q}', result)}."
        )
    return None


ALTERNATIVES: dict[str, Callable[[ast.expr, str], str | None]] = {
    "reorder": _alt_reorder,
    "inverse": _alt_inverse,
    "split": _alt_split,
    "repeat": _alt_repeat,
    "regroup": _alt_regroup,
    "distribute": _alt_distribute,
}


def alternatives(expr: str, result: str) -> dict[str, str]:
    """Other verified ways to compute ``expr`` (whose value is ``result``), by kind.

    >>> alternatives("48+24", "72")
    {'reorder': '24+48=<<24+48=72>>72', 'inverse': '48+24=<<48+24=72>>72; check: 72-24=<<72-24=48>>48.'}
    >>> alternatives("12*52", "624")["split"]
    '12*50=<<12*50=600>>600 and 12*2=<<12*2=24>>24, so 600+24=<<600+24=624>>624.'
    """  # noqa: E501 - doctest output / table rows stay whole
    try:
        node = parse_expr(expr)
        if not close(_eval(node), float(result.replace(",", ""))):
            return {}
    except (ValueError, SyntaxError, ZeroDivisionError, TypeError):
        return {}
    found, shown = {}, format_number(float(result.replace(",", "")))
    for kind, fn in ALTERNATIVES.items():
        try:
            text = fn(node, shown)
        except (ArithmeticError, ValueError, SyntaxError, TypeError):
            text = None
        if text:
            found[kind] = text
    return found
