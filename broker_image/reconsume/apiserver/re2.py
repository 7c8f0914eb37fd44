"""RE2 regular expressions (what the API server uses for ``pattern`` and CEL's ``matches``)
run by Python's ``re``, translating where the two differ on the same text.

Translated: ``$`` matches at the very end only (Python's also matches before a final
newline), ``\\z``, ``\\Q...\\E`` quoting, POSIX classes such as ``[[:alpha:]]``, and ``\\d``,
``\\w``, ``\\s`` and ``\\b`` are ASCII-only (``\\s`` without the vertical tab); ``\\12`` is
octal, not a backreference; a ``{`` that does not start an RE2 count is a literal (Python reads
``a{,3}`` as a count); ``(?<name>`` is ``(?P<name>``.

Refused as the API server refuses them (:class:`re.error` with RE2's message), although Python
takes them: backreferences (``\\1``, ``(?P=name)``), lookahead and lookbehind, atomic groups
``(?>``, conditionals ``(?(1)a|b)``, comments ``(?#``, flags other than ``i``, ``m``, ``s`` and
``U`` (``(?x)``, ``(?a)``, ``(?u)``), a repetition of a repetition (the possessive ``a*+``),
counts above 1000 (also as the product of nested counts, ``(a{100}){100}``), and escapes RE2
does not define (``\\Z``, ``\\u``, ``\\U``, ``\\N{...}``, ``[\\b]``, a backslash before
another letter or digit or before a non-ASCII character).

Not supported (:class:`re.error`, though RE2 takes them): Unicode classes ``\\pL`` /
``\\p{Greek}``, ``\\x{...}``, the ``U`` flag, flags after the start of the pattern, group
names that start with a digit or come twice, and groups nested some hundreds deep.
Known difference: ``(?i)`` folds ASCII letters only.
"""

from __future__ import annotations

import functools
import re

_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_OUTSIDE = {"$": "\\Z", "\\z": "\\Z", "\\s": "[\\t\\n\\f\\r ]", "\\S": "[^\\t\\n\\f\\r ]"}
# The letters RE2 takes after a backslash in a character class; outside one also \A, \b, \B,
# \z (and \Q, read before). \p and \P pass, for Python to refuse.
_CLASS_ESCAPES = frozenset("afnrtvdDsSwWpPx")
_ESCAPES = _CLASS_ESCAPES | frozenset("AbBz")
# RE2's octal escapes: \0 with up to two more digits, or two or three digits (\1 alone would
# be a backreference).
_OCTAL = re.compile(r"0[0-7]{0,2}|[1-7][0-7]{1,2}")
# A count as RE2 reads one: no leading zeros, no missing minimum.
_COUNT = re.compile(r"\{(0|[1-9][0-9]*)(?:(,)(0|[1-9][0-9]*)?)?\}")
_MAX_COUNT = 1000


def _translate(pattern: str) -> str:
    out: list[str] = []
    index, in_class = 0, False
    multiline = re.match(r"\(\?[a-zA-Z]*m", pattern) is not None
    repeats = _Repeats(pattern)
    while index < len(pattern):
        char = pattern[index]
        if not in_class and pattern.startswith("\\Q", index):
            end = pattern.find("\\E", index + 2)
            end = len(pattern) if end < 0 else end
            out.append(re.escape(pattern[index + 2 : end]))
            index = end + 2
            repeats.atom()
            continue
        if char == "\\" and index + 1 < len(pattern):
            escape, index = _escape(pattern, index, in_class)
            out.append(escape)
            if not in_class:
                repeats.atom()
            continue
        if in_class:
            posix = re.match(r"\[:(\^?)([a-z]+):\]", pattern[index:])
            if posix and posix.group(2) in _POSIX:
                if posix.group(1):
                    raise re.error(f"negated POSIX class {posix.group(0)} is not supported")
                out.append(_POSIX[posix.group(2)])
                index += len(posix.group(0))
                continue
            if char == "]" and not _class_start(out):
                in_class = False
            out.append(char)
        elif char == "(":
            opening, index = _group(pattern, index)
            out.append(opening)
            if opening.endswith(")"):  # flags alone, such as (?i)
                repeats.atom()
            else:
                repeats.open()
            continue
        elif char == ")":
            repeats.close()
            out.append(char)
        elif char in "*+?":
            repeats.repeat(index, index + 1)
            out.append(char)
        elif char == "{":
            count = _COUNT.match(pattern, index)
            if count is None:  # a literal in RE2
                repeats.atom()
                out.append("\\{")
            else:
                low = int(count.group(1))
                high = low if not count.group(2) else int(count.group(3) or -1)
                repeats.repeat(index, count.end(), low, high)
                out.append(count.group())
                index = count.end()
                continue
        else:
            if char == "[":
                in_class = True
            repeats.atom()
            out.append(_OUTSIDE["$"] if char == "$" and not multiline else char)
        index += 1
    return "".join(out)


def _escape(pattern: str, index: int, in_class: bool) -> tuple[str, int]:
    """The escape at ``index`` for Python, and the index after it; re.error for one RE2 does
    not define."""
    char = pattern[index + 1]
    octal = _OCTAL.match(pattern, index + 1)
    if octal:
        return f"\\u{int(octal.group(), 8):04x}", octal.end()
    if char not in (_CLASS_ESCAPES if in_class else _ESCAPES) and (
        not char.isascii() or char.isalnum()
    ):
        raise re.error(f"invalid escape sequence: `\\{char}`")
    pair = pattern[index : index + 2]
    return (pair if in_class else _OUTSIDE.get(pair, pair)), index + 2


def _group(pattern: str, index: int) -> tuple[str, int]:
    """The group opening (or flags) at ``index`` for Python, and the index after it; re.error
    for the ``(?`` forms RE2 does not define."""
    rest = pattern[index:]
    if not rest.startswith("(?"):
        return "(", index + 1
    if rest.startswith(("(?P<", "(?<")):  # also (?<= and (?<!, which RE2 reads as names
        end = rest.find(">")
        name = rest[rest.index("<") + 1 : end]
        if end < 0 or not re.fullmatch(r"[0-9A-Za-z_]+", name):
            raise re.error(f"invalid named capture: `{rest if end < 0 else rest[: end + 1]}`")
        return f"(?P<{name}>", index + end + 1
    end = len(rest) - len(rest[2:].lstrip("imsU-"))  # after the flags, if any
    if rest[end : end + 1] not in (":", ")"):
        raise re.error(f"invalid or unsupported Perl syntax: `{rest[: end + 1]}`")
    return rest[: end + 1], index + end + 1


class _Repeats:
    """RE2's rules for repetitions, stricter than Python's: no repetition of a repetition
    (``a**``, the possessive ``a*+``; a ``?`` after one makes it lazy), no count above 1000,
    and no product above 1000 of counts nested in one another."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.start = -1
        """Where the repetition just read began; -1 after anything else."""
        self.lazy = False
        """Whether a ``?`` has made that repetition lazy."""
        self.groups = [0]
        """For each open group, the largest product of nested counts in what it holds so far."""
        self.last = 0
        """The product of nested counts in what was read last, counted in ``groups`` when the
        next atom starts (a ``{0}`` after it still cancels it)."""

    def atom(self) -> None:
        self.groups[-1] = max(self.groups[-1], self.last)
        self.start, self.last = -1, 0

    def open(self) -> None:
        self.atom()
        self.groups.append(0)

    def close(self) -> None:
        self.atom()
        if len(self.groups) > 1:  # else Python reports the unbalanced ")"
            self.last = self.groups.pop()

    def repeat(self, start: int, end: int, low: int = -1, high: int = -1) -> None:
        """``*``, ``+`` or ``?``, or a count ``{low,high}`` (``high`` -1: no maximum), at
        ``pattern[start:end]``."""
        text = self.pattern[start:end]
        if low > _MAX_COUNT or high > _MAX_COUNT or 0 <= high < low:
            raise re.error(f"invalid repeat count: `{text}`")
        # RE2's messages quote a repetition with the "?" that makes it lazy.
        quoted_end = end + 1 if self.pattern.startswith("?", end) else end
        if self.start >= 0:
            if text == "?" and not self.lazy:
                self.lazy = True
                return
            raise re.error(
                f"invalid nested repetition operator: `{self.pattern[self.start : quoted_end]}`"
            )
        self.start, self.lazy = start, False
        times = high if high >= 0 else low
        if high == 0:
            self.last = 0
        elif times > 0:
            self.last = times * max(self.last, 1)
            if self.last > _MAX_COUNT:
                raise re.error(f"invalid repeat count: `{self.pattern[start:quoted_end]}`")


def _class_start(out: list[str]) -> bool:
    """Whether a ``]`` here is a literal (first in its class, as in ``[]a]`` or ``[^]a]``)."""
    return out[-1] == "[" or (out[-1] == "^" and len(out) > 1 and out[-2] == "[")


@functools.lru_cache(maxsize=512)
def re2_compile(pattern: str) -> re.Pattern[str]:
    """``pattern`` (RE2 syntax) compiled for Python; :class:`re.error` when it does not
    compile."""
    translated = _translate(pattern)
    try:
        return re.compile(translated, re.ASCII)
    except RecursionError:  # Python's parser recurses once per nested group
        raise re.error("expression nests too deeply") from None


def re2_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (RE2 and CEL's ``matches`` are
    unanchored)."""
    return re2_compile(pattern).search(text) is not None
