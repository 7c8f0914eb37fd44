"""An evaluator of the CEL subset reconsume's CRDs use in ``x-kubernetes-validations``.

Values are JSON values as Python holds them (``dict``, ``list``, ``str``, ``int``, ``float``,
``bool``, ``None``), as the API server presents an object to its rules. Supported:
literals, ``self`` and ``oldSelf``, field selection, ``has()``, indexing, list and map
literals, ``! - * / % + - < <= > >= == != in && || ?:``, ``size``, ``matches`` (RE2,
unanchored), ``startsWith``, ``endsWith``, ``contains``, ``substring``, ``int``, ``double``,
``string`` and ``dyn``. Semantics follow cel-go as Kubernetes configures it: 64-bit integers
that raise on overflow, division truncating toward zero, equality across types (``1 == 1.0``
but ``true != 1``), and ``&&`` / ``||`` that are commutative over errors (``error || true`` is
``true``). Anything else is refused when the rule is compiled; errors while evaluating are
:class:`CelError` too.

Field names that are CEL keywords or hold ``-``, ``.``, ``/`` or ``__`` are written escaped,
as Kubernetes requires (``self.__namespace__``, ``self.x__dash__y``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .functions import FUNCTIONS, cel_type, equal, overload_error
from .syntax import (
    Binary,
    Call,
    Conditional,
    Has,
    Ident,
    Index,
    ListExpr,
    Literal,
    MapExpr,
    Node,
    Select,
    Unary,
    children,
    parse,
)
from .tokens import INT64_MAX, INT64_MIN, RESERVED, CelError

__all__ = ["ABSENT", "CelError", "Program", "compile_rule", "unescape_field"]


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""``oldSelf`` when there is no old value (a create, or a node the old object lacks)."""


@dataclass(slots=True)
class _Env:
    self_value: object
    old_self: object


Run = Callable[[_Env], Any]


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled rule: :func:`compile_rule` makes them, once per text."""

    text: str
    uses_old_self: bool
    """Whether the rule mentions ``oldSelf`` (a transition rule)."""
    _run: Run = field(repr=False, compare=False)

    def evaluate(self, self_value: object, old_self: object = ABSENT) -> Any:
        """The rule's value for ``self_value`` (and ``old_self``); :class:`CelError` when it
        fails (a missing key, a type mismatch, an overflow, ``oldSelf`` without one)."""
        try:
            return self._run(_Env(self_value, old_self))
        except CelError as exc:
            raise CelError(exc.reason, exc.position, self.text) from None
        except RecursionError as exc:
            raise CelError("expression too deeply nested", None, self.text) from exc


@functools.lru_cache(maxsize=1024)
def compile_rule(text: str) -> Program:
    """``text`` compiled; :class:`CelError` with the position when it is not CEL this
    evaluator supports."""
    try:
        node = parse(text)
        return Program(text, _mentions_old_self(node), _compile(node))
    except RecursionError as exc:
        raise CelError("expression too deeply nested", None, text) from exc


def _mentions_old_self(node: Node) -> bool:
    if isinstance(node, Ident):
        return node.name == "oldSelf"
    return any(_mentions_old_self(child) for child in children(node))


_SPECIAL_NAMES = {"underscores": "__", "dot": ".", "dash": "-", "slash": "/"}


def unescape_field(name: str) -> str:
    """The property name a CEL field name stands for (``__dash__`` is ``-``, ...)."""
    reserved = re.fullmatch(r"__([a-z]+)__", name)
    if reserved and reserved.group(1) in RESERVED | {"true", "false", "null", "in"}:
        return reserved.group(1)
    return re.sub(r"__(underscores|dot|dash|slash)__", lambda m: _SPECIAL_NAMES[m.group(1)], name)


# ---------------------------------------------------------------------------------- compile
def _compile(node: Node) -> Run:
    match node:
        case Literal(value=value):
            return lambda env: value
        case Ident(name="self"):
            return lambda env: env.self_value
        case Ident(position=position):
            return functools.partial(_old_self, position=position)
        case Select(operand=operand, field=name, position=position):
            return functools.partial(_select, _compile(operand), unescape_field(name), position)
        case Has(select=Select(operand=operand, field=name), position=position):
            return functools.partial(_has, _compile(operand), unescape_field(name), position)
        case Index(operand=operand, index=index, position=position):
            return functools.partial(_index, _compile(operand), _compile(index), position)
        case ListExpr(items=items):
            runs = [_compile(item) for item in items]
            return lambda env: [run(env) for run in runs]
        case MapExpr(entries=entries, position=position):
            pairs = [(_compile(key), _compile(value)) for key, value in entries]
            return functools.partial(_map, pairs, position)
        case Call(function=function, target=target, args=args, position=position):
            runs = [_compile(arg) for arg in (args if target is None else (target, *args))]
            implementation = FUNCTIONS[function]
            return functools.partial(_call, implementation, function, runs, position)
        case Unary(op="!", operand=operand, position=position):
            return functools.partial(_not, _compile(operand), position)
        case Unary(operand=operand, position=position):
            return functools.partial(_negate, _compile(operand), position)
        case Binary(op=("&&" | "||") as op, left=left, right=right, position=position):
            return functools.partial(_logic, op == "||", _compile(left), _compile(right), position)
        case Binary(op=op, left=left, right=right, position=position):
            operator = _BINARY[op]
            return functools.partial(
                _binary, operator, op, _compile(left), _compile(right), position
            )
        case Conditional(condition=condition, then=then, otherwise=otherwise, position=position):
            return functools.partial(
                _conditional, _compile(condition), _compile(then), _compile(otherwise), position
            )
    raise AssertionError(f"unknown node {node!r}")


def _map(pairs: list[tuple[Run, Run]], position: int, env: _Env) -> dict[object, object]:
    built: dict[object, object] = {}
    for key_run, value_run in pairs:
        key = key_run(env)
        if cel_type(key) not in ("int", "bool", "string"):
            raise CelError(f"unsupported map key type: {cel_type(key)}", position)
        for existing in built:
            if equal(key, existing):
                raise CelError(f"duplicate map key: {key}", position)
            if key == existing:  # true and 1: one key to Python
                message = f"map keys {existing!r} and {key!r} are not supported together"
                raise CelError(message, position)
        built[key] = value_run(env)
    return built


def _old_self(env: _Env, position: int) -> object:
    if env.old_self is ABSENT:
        raise CelError("oldSelf is not available: there is no old value", position)
    return env.old_self


def _select(operand: Run, name: str, position: int, env: _Env) -> object:
    value = operand(env)
    if not isinstance(value, Mapping):
        raise CelError(f"no such field '{name}' on {cel_type(value)}", position)
    if name not in value:
        raise CelError(f"no such key: {name}", position)
    return value[name]


def _has(operand: Run, name: str, position: int, env: _Env) -> bool:
    value = operand(env)
    if not isinstance(value, Mapping):
        raise CelError(f"invalid type for field selection: {cel_type(value)}", position)
    return name in value


def _index(operand: Run, index: Run, position: int, env: _Env) -> object:
    container, key = operand(env), index(env)
    if isinstance(container, list) and cel_type(key) == "int":
        if not 0 <= key < len(container):
            raise CelError(f"index out of bounds: {key}", position)
        return container[key]
    if isinstance(container, Mapping):
        for candidate, value in container.items():
            if equal(candidate, key):
                return value
        raise CelError(f"no such key: {key}", position)
    raise overload_error("_[_]", position, container, key)


def _call(
    function: Callable[..., Any], name: str, runs: list[Run], position: int, env: _Env
) -> Any:
    args = [run(env) for run in runs]
    try:
        return function(*args)
    except CelError as exc:
        raise CelError(exc.reason, position) from None
    except (TypeError, ValueError) as exc:
        raise overload_error(name, position, *args) from exc


def _boolean(value: object, operator: str, position: int) -> bool:
    if not isinstance(value, bool):
        raise overload_error(operator, position, value)
    return value


def _not(operand: Run, position: int, env: _Env) -> bool:
    return not _boolean(operand(env), "!_", position)


def _negate(operand: Run, position: int, env: _Env) -> object:
    value = operand(env)
    if cel_type(value) == "int":
        return _checked_int(-value, position)
    if cel_type(value) == "double":
        return -value
    raise overload_error("-_", position, value)


def _logic(is_or: bool, left: Run, right: Run, position: int, env: _Env) -> bool:
    """``&&`` and ``||``: the deciding value wins over an error on the other side."""
    decisive = is_or
    outcomes: list[bool | CelError] = []
    for run in (left, right):
        try:
            value = _boolean(run(env), "_||_" if is_or else "_&&_", position)
        except CelError as exc:
            outcomes.append(exc)
            continue
        if value is decisive:
            return decisive
        outcomes.append(value)
    for outcome in outcomes:
        if isinstance(outcome, CelError):
            raise outcome
    return not decisive


def _conditional(condition: Run, then: Run, otherwise: Run, position: int, env: _Env) -> object:
    chosen = _boolean(condition(env), "_?_:_", position)
    return then(env) if chosen else otherwise(env)


def _binary(
    operator: Callable[[Any, Any], Any], op: str, left: Run, right: Run, position: int, env: _Env
) -> Any:
    a, b = left(env), right(env)
    try:
        result = operator(a, b)
    except CelError as exc:
        raise CelError(exc.reason, position) from None
    if result is NotImplemented:
        raise overload_error(f"_{op}_", position, a, b)
    if cel_type(result) == "int":
        return _checked_int(result, position)
    return result


def _checked_int(value: int, position: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelError("integer overflow", position)
    return value


# ------------------------------------------------------------------------------- operators
def _numbers(a: object, b: object) -> bool:
    return cel_type(a) in ("int", "double") and cel_type(b) in ("int", "double")


def _same(a: object, b: object, *types: str) -> bool:
    return cel_type(a) == cel_type(b) and cel_type(a) in types


def _add(a: Any, b: Any) -> Any:
    if _same(a, b, "int", "double", "string", "list"):
        return a + b
    return NotImplemented


def _subtract(a: Any, b: Any) -> Any:
    return a - b if _same(a, b, "int", "double") else NotImplemented


def _multiply(a: Any, b: Any) -> Any:
    return a * b if _same(a, b, "int", "double") else NotImplemented


def _divide(a: Any, b: Any) -> Any:
    if _same(a, b, "double"):
        if b == 0:
            return math.copysign(math.inf, a) * math.copysign(1, b) if a else math.nan
        return a / b
    if not _same(a, b, "int"):
        return NotImplemented
    if b == 0:
        raise CelError("division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _modulo(a: Any, b: Any) -> Any:
    if not _same(a, b, "int"):
        return NotImplemented
    if b == 0:
        raise CelError("modulus by zero")
    return a - b * _divide(a, b)


def _less(a: Any, b: Any) -> Any:
    return a < b if _numbers(a, b) or _same(a, b, "string", "bool") else NotImplemented


def _in(a: Any, b: Any) -> Any:
    if isinstance(b, list):
        return any(equal(a, item) for item in b)
    if isinstance(b, Mapping):
        return any(equal(a, key) for key in b)
    return NotImplemented


def _not_less(a: Any, b: Any) -> Any:
    result = _less(a, b)
    return result if result is NotImplemented else not result


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": _add,
    "-": _subtract,
    "*": _multiply,
    "/": _divide,
    "%": _modulo,
    "==": equal,
    "!=": lambda a, b: not equal(a, b),
    "<": _less,
    "<=": lambda a, b: _not_less(b, a),
    ">": lambda a, b: _less(b, a),
    ">=": _not_less,
    "in": _in,
}
