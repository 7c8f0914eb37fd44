"""CEL's lexical layer for :mod:`reconsume.apiserver.cel`: the error every stage raises, with the
position, and the tokenizer (numbers, strings with CEL's quotes and escapes, identifiers,
operators, ``//`` comments). Unsigned and bytes literals are refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from reconsume.errors import InvalidArgumentError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
RESERVED: Final = frozenset(
    {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let"}
    | {"loop", "package", "namespace", "return", "var", "void", "while"}
)
"""Words CEL reserves: not identifiers, and written ``__word__`` as field names."""


class CelError(InvalidArgumentError):
    """A CEL expression that does not compile, or that failed to evaluate. ``position`` is
    the 0-based offset in ``text`` where, when known."""

    def __init__(self, message: str, position: int | None = None, text: str = "") -> None:
        self.reason = message
        self.position = position
        self.text = text
        super().__init__(f"{message} at {self.line}:{self.column}" if self.located else message)

    @property
    def located(self) -> bool:
        return self.position is not None and bool(self.text)

    @property
    def line(self) -> int:
        """1-based line of the position (0 when unknown)."""
        return self.text.count("\n", 0, self.position) + 1 if self.located else 0

    @property
    def column(self) -> int:
        """1-based column of the position (0 when unknown)."""
        if not self.located or self.position is None:
            return 0
        return self.position - (self.text.rfind("\n", 0, self.position) + 1) + 1


# ---------------------------------------------------------------------------------- tokens
@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    """``int``, ``double``, ``string``, ``ident``, ``op`` or ``end``."""
    value: object
    position: int


_OPERATORS = ("||", "&&", "==", "!=", "<=", ">=", *"<>+-*/%!?:.,()[]{}")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]+|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?"
)
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_SPACE = re.compile(r"(?:[ \t\r\n\f]+|//[^\n]*)+")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPES |= {"\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`"}
_HEX_ESCAPE = {"x": 2, "X": 2, "u": 4, "U": 8}


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    index = 0
    while True:
        space = _SPACE.match(text, index)
        if space:
            index = space.end()
        if index >= len(text):
            tokens.append(Token("end", None, index))
            return tokens
        start = index
        quote = re.match(r"([rRbB]?)('''|\"\"\"|'|\")", text[index : index + 4])
        number = _NUMBER.match(text, index)
        ident = _IDENT.match(text, index)
        if quote:
            value, index = _string(text, index, quote.group(1), quote.group(2))
            tokens.append(Token("string", value, start))
        elif number:
            tokens.append(_number(text, number.group(0), start))
            index = number.end()
        elif ident:
            tokens.append(Token("ident", ident.group(0), start))
            index = ident.end()
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, index)), None)
            if op is None:
                raise CelError(f"Syntax error: unexpected character {text[index]!r}", index, text)
            tokens.append(Token("op", op, start))
            index += len(op)


def _number(text: str, literal: str, position: int) -> Token:
    if literal[-1] in "uU":
        raise CelError("unsigned integer literals are not supported", position, text)
    if literal[:2] in ("0x", "0X"):
        return Token("int", int(literal, 16), position)
    if any(char in literal for char in ".eE"):
        return Token("double", float(literal), position)
    return Token("int", int(literal), position)


def _string(text: str, index: int, prefix: str, quote: str) -> tuple[str, int]:
    start = index
    if prefix in ("b", "B"):
        raise CelError("bytes literals are not supported", start, text)
    index += len(prefix) + len(quote)
    out: list[str] = []
    while True:
        if index >= len(text) or (len(quote) == 1 and text[index] == "\n"):
            raise CelError("Syntax error: unterminated string", start, text)
        if text.startswith(quote, index):
            return "".join(out), index + len(quote)
        char = text[index]
        if char != "\\" or prefix in ("r", "R"):
            out.append(char)
            index += 1
            continue
        escape = text[index + 1 : index + 2]
        if escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            index += 2
        elif escape in _HEX_ESCAPE:
            digits = text[index + 2 : index + 2 + _HEX_ESCAPE[escape]]
            if not re.fullmatch(r"[0-9a-fA-F]+", digits) or len(digits) < _HEX_ESCAPE[escape]:
                raise CelError(f"Syntax error: invalid escape \\{escape}", index, text)
            out.append(chr(int(digits, 16)))
            index += 2 + len(digits)
        elif re.fullmatch(r"[0-3][0-7][0-7]", text[index + 1 : index + 4]):
            out.append(chr(int(text[index + 1 : index + 4], 8)))
            index += 4
        else:
            raise CelError(f"Syntax error: invalid escape \\{escape}", index, text)
