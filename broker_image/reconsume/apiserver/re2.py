"""RE2 regular expressions (what the API server uses for ``pattern`` and CEL's ``matches``)
run by Python's ``re``, translating where the two differ on the same text.

Translated: ``$`` matches at the very end only (Python's also matches before a final
newline), ``\\z``, ``\\Q...\\E`` quoting, POSIX classes such as ``[[:alpha:]]``, and ``\\d``,
``\\w``, ``\\s`` and ``\\b`` are ASCII-only (``\\s`` without the vertical tab). Not supported
(:class:`re.error`): Unicode classes ``\\pL`` / ``\\p{Greek}``. Known difference: ``(?i)``
folds ASCII letters only.
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


def _translate(pattern: str) -> str:
    out: list[str] = []
    index, in_class = 0, False
    multiline = re.match(r"\(\?[a-zA-Z]*m", pattern) is not None
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("\\Q", index):
            end = pattern.find("\\E", index + 2)
            end = len(pattern) if end < 0 else end
            out.append(re.escape(pattern[index + 2 : end]))
            index = end + 2
            continue
        if char == "\\" and index + 1 < len(pattern):
            pair = pattern[index : index + 2]
            out.append(pair if in_class else _OUTSIDE.get(pair, pair))
            index += 2
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
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == "$" and not multiline:
            out.append(_OUTSIDE["$"])
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _class_start(out: list[str]) -> bool:
    """Whether a ``]`` here is a literal (first in its class, as in ``[]a]`` or ``[^]a]``)."""
    return out[-1] == "[" or (out[-1] == "^" and len(out) > 1 and out[-2] == "[")


@functools.lru_cache(maxsize=512)
def re2_compile(pattern: str) -> re.Pattern[str]:
    """``pattern`` (RE2 syntax) compiled for Python; :class:`re.error` when it does not
    compile."""
    return re.compile(_translate(pattern), re.ASCII)


def re2_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (RE2 and CEL's ``matches`` are
    unanchored)."""
    return re2_compile(pattern).search(text) is not None
