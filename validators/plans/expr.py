"""A safe arithmetic evaluator (Python's ``ast`` with a whitelist, never ``eval``) and number reading.

Used by the argument-fidelity rules: a precision tool's expression is parsed and computed here, and the numbers a
query states are read here, with every reading a number may have ("12.750" is 12750 in German, 12.75 in English).
"""

from __future__ import annotations

import ast
import functools
import math
import re
from itertools import product

# functions a calculate expression may call (the runtime's calculate accepts these names)
_FUNCS = {
    "sqrt": math.sqrt, "log": math.log, "ln": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "abs": abs, "round": round, "floor": math.floor,
    "ceil": math.ceil, "factorial": math.factorial, "min": min, "max": max, "pow": pow,
}
_NAMES = {"pi": math.pi, "e": math.e}
_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
        ast.Pow: lambda a, b: a ** b}
PLACEHOLDER = re.compile(r"\{\s*result_of\s*:\s*([\w.-]+)\s*\}")


class ExprError(ValueError):
    """The expression cannot be parsed or computed safely."""


_CALL = re.compile(r"[A-Za-z_]\w*\s*\(")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL_COMMA = re.compile(r"(?<=\d),(?=\d)")
_PERCENT_SIGN = re.compile(r"(?<=\d)\s*%(?!\s*\d)")
_NOT_NAME = re.compile(r"[^0-9A-Za-z_]")


def normalise(text: str) -> str:
    """Spellings a planner writes for Python's operators: ^ × · ÷ −, decimal commas, result placeholders."""
    s = text.replace("^", "**").replace("×", "*").replace("·", "*").replace("÷", "/").replace("−", "-")
    if "," in s and not _CALL.search(s):  # in "log(10,2)" a comma separates arguments
        s = _THOUSANDS_COMMA.sub("", s)  # 1,847 -> 1847
        s = _DECIMAL_COMMA.sub(".", s)  # 2,5 -> 2.5
    if "%" in s:
        s = _PERCENT_SIGN.sub("/100", s)  # a trailing "17%" is a percentage, "7 % 3" modulo
    if "{" in s:
        s = PLACEHOLDER.sub(lambda m: f"__r_{_NOT_NAME.sub('_', m.group(1))}", s)
    return s


# levels of a syntax tree: `evaluate` recurses once a level and Python's stack holds ~1,000 frames, so a deeper tree
# would fail or not by how deep the caller already is (a sum of 400 numbers written out is 400 levels)
MAX_DEPTH = 400
_UNARY = (ast.USub, ast.UAdd)


def _plain(tree: ast.Expression) -> bool:
    """Is every node of the tree one `parse` accepts, and the tree at most MAX_DEPTH levels deep? One pass without
    ast.walk's generic field iteration (a plan record parses ~4 expressions: 15 us each with it)."""
    stack = [(tree.body, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        n, depth = pop()
        if depth > MAX_DEPTH:
            return False
        t = type(n)
        if t is ast.BinOp:
            if type(n.op) not in _BIN:
                return False
            push((n.left, depth + 1))
            push((n.right, depth + 1))
        elif t is ast.Constant:
            if type(n.value) not in (int, float):
                return False
        elif t is ast.Name:
            if n.id not in _FUNCS and n.id not in _NAMES and not n.id.startswith("__r_"):
                return False
        elif t is ast.UnaryOp:
            if type(n.op) not in _UNARY:
                return False
            push((n.operand, depth + 1))
        elif t is ast.Call:
            f = n.func
            if type(f) is not ast.Name or f.id not in _FUNCS or n.keywords:
                return False
            stack.extend((a, depth + 1) for a in n.args)
        else:
            return False
    return True


@functools.lru_cache(maxsize=256)
def parse(text: str) -> ast.Expression:
    """The syntax tree of an arithmetic expression, or ExprError. The trees of the last texts are kept (shared: no
    caller changes a tree): three rules read each calculate expression of a plan."""
    try:
        tree = ast.parse(normalise(text).strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ExprError(f"not an arithmetic expression ({getattr(exc, 'msg', exc)})") from None
    except RecursionError:  # the parser's own limit, some hundreds of operators deep
        raise ExprError(f"nested more than {MAX_DEPTH} levels deep") from None
    if _plain(tree):
        return tree
    # a tree `_plain` refuses: the first offending node in ast.walk's order names the error
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                raise ExprError(f"unknown function {ast.unparse(node.func)!r}")
        elif isinstance(node, ast.Name):
            if node.id not in _FUNCS and node.id not in _NAMES and not node.id.startswith("__r_"):
                raise ExprError(f"unknown name {node.id!r}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise ExprError(f"constant {node.value!r} is not a number")
        elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, ast.USub, ast.UAdd,
                                   *_BIN)):
            raise ExprError(f"{type(node).__name__} is not arithmetic")
    raise ExprError(f"nested more than {MAX_DEPTH} levels deep")


def constants(tree: ast.AST) -> list[float]:
    """The literal numbers of a parsed expression (a negative literal counts as its absolute value)."""
    return [float(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)]


def placeholders(tree: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id.startswith("__r_")]


def evaluate(tree: ast.AST, results: dict[str, float] | None = None) -> float:
    """The value of a parsed expression; ``results`` gives the values of result placeholders (``__r_<id>``)."""
    results = results or {}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in _NAMES:
                return _NAMES[n.id]
            if n.id in results:
                return results[n.id]
            raise ExprError(f"no value for {n.id}")
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Pow) and (abs(b) > 512 or (abs(a) > 1e6 and abs(b) > 8)):
                raise ExprError("power too large to compute safely")
            return _BIN[type(n.op)](a, b)
        if isinstance(n, ast.Call):
            args = [ev(a) for a in n.args]
            if n.func.id == "factorial" and (not args or args[0] > 1000 or args[0] != int(args[0])):
                raise ExprError("factorial of a large or fractional number")
            if n.func.id == "factorial":
                args = [int(args[0])]
            return _FUNCS[n.func.id](*args)
        raise ExprError(f"{type(n).__name__} is not arithmetic")

    try:
        v = ev(tree)
    except ExprError:
        raise
    except (ArithmeticError, ValueError, TypeError, OverflowError) as exc:
        raise ExprError(f"cannot be computed ({exc})") from None
    if isinstance(v, complex) or (isinstance(v, float) and not math.isfinite(v)):
        raise ExprError("the result is not a finite real number")
    return float(v)


def close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def matches(value: float, wanted: float, rel: float = 1e-6) -> bool:
    """Equal, or equal to the wanted value rounded to 0-4 decimals (the query may ask for rounding)."""
    return close(value, wanted, rel) or any(close(value, round(wanted, k), rel) for k in range(5))


# a number in a query: digits with separators, glued to a unit or not ("120mm", "5yrds"); e-notation is read apart
NUMBER = re.compile(r"(?<![\d.,])\d+(?:_\d{3})*(?:[.,]\d+)*(?!\d)")
SCIENTIFIC = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)e([-+]?\d+)(?!\w)", re.IGNORECASE)


def readings(token: str) -> tuple[float, ...]:
    """Every value a written number may have: "1,847" 1847 or 1.847, "12.750" 12750 or 12.75, "2,5" 2.5."""
    token = token.strip()
    out: list[float] = []
    seps = re.findall(r"[.,]", token)
    groups = re.split(r"[.,]", token)
    if not seps:
        return (float(token),)
    if all(len(g) == 3 for g in groups[1:]):  # may be thousands separators
        out.append(float("".join(groups)))
    if len(seps) == 1:
        out.append(float(token.replace(",", ".")))
    elif len(set(seps)) == 2:  # 1.234,5 or 1,234.5: the last separator is the decimal one
        dec = seps[-1]
        whole, frac = token.rsplit(dec, 1)
        out.append(float(re.sub(r"[.,]", "", whole) + "." + frac))
    return tuple(dict.fromkeys(out)) or (float(groups[0]),)


def numbers_in(text: str) -> list[tuple[float, ...]]:
    out = [readings(m.group(0).replace("_", "")) for m in NUMBER.finditer(text)]
    out += [(float(m.group(0)),) for m in SCIENTIFIC.finditer(text)]
    out += [(float(m.group(0)),) for m in re.finditer(r"(?<![\d.])\.\d+", text)]  # ".5 hours"
    return out


def combinations(per_number: list[tuple[float, ...]], limit: int = 64):
    """All reading combinations of a list of numbers, at most ``limit`` of them."""
    for i, combo in enumerate(product(*per_number)):
        if i >= limit:
            return
        yield combo
