"""CEL's syntax, for the subset the CRDs' ``x-kubernetes-validations`` use: a recursive-descent
parser over :mod:`reconsume.apiserver.cel.tokens` giving an AST of frozen dataclasses. What it
does not know (macros such as ``all``, message construction, unknown functions or
identifiers) is a :class:`CelError` with the position, so that a rule the evaluator would
mis-read is refused up front. Evaluation is :mod:`reconsume.apiserver.cel`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ..re2 import re2_compile
from .tokens import INT64_MAX, INT64_MIN, RESERVED, CelError, Token, tokenize

VARIABLES: Final = frozenset({"self", "oldSelf"})
FUNCTIONS: Final = {
    "has": (1,),
    "size": (1,),
    "int": (1,),
    "string": (1,),
    "double": (1,),
    "dyn": (1,),
    "matches": (2,),
}
"""Global functions and their arities (``has`` is the macro)."""
METHODS: Final = {
    "size": (0,),
    "matches": (1,),
    "startsWith": (1,),
    "endsWith": (1,),
    "contains": (1,),
    "substring": (1, 2),
}
"""Receiver-style functions (``s.startsWith('x')``) and their arities."""


# ------------------------------------------------------------------------------------ AST
@dataclass(frozen=True, slots=True)
class Literal:
    value: object
    position: int


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class Select:
    operand: Node
    field: str
    position: int


@dataclass(frozen=True, slots=True)
class Has:
    select: Select
    position: int


@dataclass(frozen=True, slots=True)
class Index:
    operand: Node
    index: Node
    position: int


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    target: Node | None
    args: tuple[Node, ...]
    position: int


@dataclass(frozen=True, slots=True)
class ListExpr:
    items: tuple[Node, ...]
    position: int


@dataclass(frozen=True, slots=True)
class MapExpr:
    entries: tuple[tuple[Node, Node], ...]
    position: int


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node
    position: int


@dataclass(frozen=True, slots=True)
class Conditional:
    condition: Node
    then: Node
    otherwise: Node
    position: int


Node = (
    Literal
    | Ident
    | Select
    | Has
    | Index
    | Call
    | ListExpr
    | MapExpr
    | Unary
    | Binary
    | Conditional
)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``."""
    match node:
        case Select(operand=operand) | Unary(operand=operand):
            return (operand,)
        case Has(select=select):
            return (select,)
        case Index(operand=operand, index=index):
            return (operand, index)
        case Call(target=target, args=args):
            return args if target is None else (target, *args)
        case ListExpr(items=items):
            return items
        case MapExpr(entries=entries):
            return tuple(part for entry in entries for part in entry)
        case Binary(left=left, right=right):
            return (left, right)
        case Conditional(condition=condition, then=then, otherwise=otherwise):
            return (condition, then, otherwise)
    return ()


# ---------------------------------------------------------------------------------- parser
_RELATIONS = ("<", "<=", ">=", ">", "==", "!=", "in")


def parse(text: str) -> Node:
    """The AST of ``text``; :class:`CelError` with the position when it is not CEL this
    evaluator supports."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    # -- helpers
    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def at(self, *values: str) -> bool:
        """Whether the current token is one of these operators (or the keyword ``in``)."""
        token = self.token
        return token.kind in ("op", "ident") and token.value in values

    def advance(self) -> Token:
        token = self.token
        self.index += 1
        return token

    def expect(self, value: str) -> Token:
        if not self.at(value):
            raise self.error(f"Syntax error: expected {value!r}")
        return self.advance()

    def error(self, message: str, position: int | None = None) -> CelError:
        if position is None:
            token = self.token
            found = "end of input" if token.kind == "end" else repr(token.value)
            message, position = f"{message}, found {found}", token.position
        return CelError(message, position, self.text)

    # -- grammar
    def parse(self) -> Node:
        node = self.expression()
        if self.token.kind != "end":
            raise self.error("Syntax error: unexpected input")
        return node

    def expression(self) -> Node:
        condition = self.binary(0)
        if not self.at("?"):
            return condition
        position = self.advance().position
        then = self.binary(0)
        self.expect(":")
        return Conditional(condition, then, self.expression(), position)

    _LEVELS: Final = (("||",), ("&&",), _RELATIONS, ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.at(*self._LEVELS[level]):
            operator = self.advance()
            right = self.binary(level + 1)
            node = Binary(str(operator.value), node, right, operator.position)
        return node

    def unary(self) -> Node:
        if self.token.kind == "op" and self.token.value in ("!", "-"):
            operator = self.advance()
            number = self.token
            if operator.value == "-" and isinstance(number.value, int | float):
                # a negative literal, so that -9223372036854775808 is in range
                self.advance()
                return self.suffixes(self.literal(-number.value, operator.position))
            return Unary(str(operator.value), self.unary(), operator.position)
        return self.suffixes(self.primary())

    def literal(self, value: object, position: int) -> Literal:
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            raise self.error("invalid int literal: out of range", position)
        return Literal(value, position)

    def suffixes(self, node: Node) -> Node:
        """``node`` followed by field selections, method calls and indexes."""
        while True:
            if self.at("."):
                self.advance()
                name = self.advance()
                if name.kind != "ident":
                    raise self.error("Syntax error: expected a field name", name.position)
                field = str(name.value)
                if self.at("("):
                    node = self.call(field, node, name.position)
                else:
                    node = Select(node, field, name.position)
            elif self.at("["):
                position = self.advance().position
                index = self.expression()
                self.expect("]")
                node = Index(node, index, position)
            else:
                return node

    def arguments(self, closing: str) -> tuple[Node, ...]:
        args: list[Node] = []
        while not self.at(closing):
            args.append(self.expression())
            if not self.at(","):
                break
            self.advance()
        self.expect(closing)
        return tuple(args)

    def call(self, function: str, target: Node | None, position: int) -> Node:
        known = METHODS if target is not None else FUNCTIONS
        if function not in known:
            kind = "method" if target is not None else "function"
            raise self.error(f"undeclared reference to {kind} '{function}'", position)
        self.expect("(")
        args = self.arguments(")")
        if len(args) not in known[function]:
            raise self.error(f"wrong number of arguments to '{function}': {len(args)}", position)
        if function == "has":
            (select,) = args
            if not isinstance(select, Select):
                raise self.error("invalid argument to has() macro", position)
            return Has(select, position)
        pattern = args[-1] if function == "matches" else None
        if isinstance(pattern, Literal) and isinstance(pattern.value, str):
            try:
                re2_compile(pattern.value)
            except re.error as exc:
                raise self.error(f"invalid regular expression: {exc}", pattern.position) from exc
        return Call(function, target, args, position)

    def primary(self) -> Node:
        token = self.advance()
        if token.kind in ("int", "double", "string"):
            return self.literal(token.value, token.position)
        if token.kind == "ident":
            name = str(token.value)
            constants: dict[str, object] = {"true": True, "false": False, "null": None}
            if name in constants:
                return Literal(constants[name], token.position)
            if self.at("("):
                return self.call(name, None, token.position)
            if name in VARIABLES:
                return Ident(name, token.position)
            if name in RESERVED or name == "in":
                raise self.error(f"Syntax error: reserved identifier '{name}'", token.position)
            raise self.error(f"undeclared reference to '{name}'", token.position)
        if token.kind == "op" and token.value == "(":
            node = self.expression()
            self.expect(")")
            return node
        if token.kind == "op" and token.value == "[":
            return ListExpr(self.arguments("]"), token.position)
        if token.kind == "op" and token.value == "{":
            return MapExpr(self.entries(), token.position)
        self.index -= 1
        raise self.error("Syntax error: expected an expression")

    def entries(self) -> tuple[tuple[Node, Node], ...]:
        entries: list[tuple[Node, Node]] = []
        while not self.at("}"):
            key = self.expression()
            self.expect(":")
            entries.append((key, self.expression()))
            if not self.at(","):
                break
            self.advance()
        self.expect("}")
        return tuple(entries)
