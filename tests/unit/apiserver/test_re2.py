"""RE2 patterns as the API server reads them: what RE2 refuses but Python's re would take is
refused with RE2's message, in a CRD schema's ``pattern`` and in CEL's ``matches()``, and what
RE2 reads otherwise than Python is translated. Each message and each result below is the one
Go's regexp package (the API server's RE2) gives."""

from __future__ import annotations

import re

import pytest

from reconsume.apiserver import crds
from reconsume.apiserver.cel import ABSENT, CelError, compile_rule
from reconsume.apiserver.re2 import re2_compile, re2_search
from reconsume.apiserver.schema import validate, walk

REFUSED = [
    # Backreferences.
    ("(a)\\1", "invalid escape sequence: `\\1`"),
    ("(a)\\9", "invalid escape sequence: `\\9`"),
    ("(?P<n>a)(?P=n)", "invalid or unsupported Perl syntax: `(?P`"),
    # Lookahead and lookbehind (RE2 reads "(?<" as the start of a group name).
    ("a(?=b)", "invalid or unsupported Perl syntax: `(?=`"),
    ("a(?!b)", "invalid or unsupported Perl syntax: `(?!`"),
    ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
    ("(?<!a)b", "invalid named capture: `(?<!a)b`"),
    # Atomic groups and possessive repetitions, and any other repetition of a repetition.
    ("(?>a+)b", "invalid or unsupported Perl syntax: `(?>`"),
    ("a*+b", "invalid nested repetition operator: `*+`"),
    ("a++b", "invalid nested repetition operator: `++`"),
    ("a?+b", "invalid nested repetition operator: `?+`"),
    ("a{2}+", "invalid nested repetition operator: `{2}+`"),
    ("a**", "invalid nested repetition operator: `**`"),
    ("a*??", "invalid nested repetition operator: `*??`"),
    ("a{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
    # Conditionals, comments, and flags other than i, m, s and U.
    ("(a)?(?(1)b|c)", "invalid or unsupported Perl syntax: `(?(`"),
    ("(?#note)a", "invalid or unsupported Perl syntax: `(?#`"),
    ("(?x)a b", "invalid or unsupported Perl syntax: `(?x`"),
    ("(?a)\\w", "invalid or unsupported Perl syntax: `(?a`"),
    ("(?u)\\w", "invalid or unsupported Perl syntax: `(?u`"),
    ("(?L)a", "invalid or unsupported Perl syntax: `(?L`"),
    ("(?'n'a)", "invalid or unsupported Perl syntax: `(?'`"),
    ("(?|a)", "invalid or unsupported Perl syntax: `(?|`"),
    # Escapes RE2 does not define.
    ("a\\Z", "invalid escape sequence: `\\Z`"),
    ("\\u0041", "invalid escape sequence: `\\u`"),
    ("\\U00000041", "invalid escape sequence: `\\U`"),
    ("\\N{DIGIT ONE}", "invalid escape sequence: `\\N`"),
    ("\\e", "invalid escape sequence: `\\e`"),
    ("\\G", "invalid escape sequence: `\\G`"),
    ("\\k<n>", "invalid escape sequence: `\\k`"),
    ("[\\b]", "invalid escape sequence: `\\b`"),
    ("[\\A]", "invalid escape sequence: `\\A`"),
    ("[\\Q]\\E]", "invalid escape sequence: `\\Q`"),
    ("\\é", "invalid escape sequence: `\\é`"),
    # Counts above 1000, also as the product of nested counts.
    ("a{1001}", "invalid repeat count: `{1001}`"),
    ("a{2,1001}", "invalid repeat count: `{2,1001}`"),
    ("a{3,2}", "invalid repeat count: `{3,2}`"),
    ("(a{100}){100}", "invalid repeat count: `{100}`"),
    ("(?:a{10}b{200}){10}?", "invalid repeat count: `{10}?`"),
]
IDS = [pattern for pattern, _ in REFUSED]


@pytest.mark.parametrize(("pattern", "message"), REFUSED, ids=IDS)
def test_what_re2_refuses_is_refused(pattern: str, message: str) -> None:
    with pytest.raises(re.error) as raised:
        re2_compile(pattern)
    assert str(raised.value) == message


@pytest.mark.parametrize(("pattern", "message"), REFUSED, ids=IDS)
def test_a_crd_pattern_re2_refuses_is_an_error(pattern: str, message: str) -> None:
    # The API server refuses such a CRD when it is created; the CRDs here come with the
    # package, so the error is the validator's.
    with pytest.raises(re.error) as raised:
        validate({"type": "string", "pattern": pattern}, "a")
    assert str(raised.value) == message


@pytest.mark.parametrize(("pattern", "message"), REFUSED, ids=IDS)
def test_a_cel_matches_literal_re2_refuses_does_not_compile(pattern: str, message: str) -> None:
    with pytest.raises(CelError) as raised:
        compile_rule(f'self.matches(r"{pattern}")')
    assert raised.value.reason == f"invalid regular expression: {message}"


@pytest.mark.parametrize(("pattern", "message"), REFUSED, ids=IDS)
def test_a_cel_matches_argument_re2_refuses_fails(pattern: str, message: str) -> None:
    with pytest.raises(CelError) as raised:
        compile_rule("'a'.matches(self)").evaluate(pattern, ABSENT)
    assert raised.value.reason == f"invalid regular expression {pattern!r}: {message}"


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        # Octal, where Python would read \12 as a backreference.
        ("^\\12$", "\n", True),
        ("^\\101$", "A", True),
        ("^\\0$", "\x00", True),
        ("^\\0123$", "\n3", True),
        ("[\\01-\\07]", "\x05", True),
        # A brace that does not start a count is itself; Python reads {,3} as a count.
        ("^a{,3}$", "a{,3}", True),
        ("^a{,3}$", "aa", False),
        ("^a{01}$", "a{01}", True),
        ("^a{01}$", "a", False),
        ("^(?<word>\\w+)$", "abc", True),
        ("^(a{10}){100}$", "a" * 1000, True),
        ("^(?:a{1000}){0}b$", "b", True),
        ("^a*?b??$", "ab", True),
        ("^a{2}?$", "aa", True),
        ("^\\_\\-\\ $", "_- ", True),
        ("^[\\d\\x41]+$", "1A", True),
        ("(?i)^ab$", "AB", True),
        ("^(?s:.)$", "\n", True),
    ],
)
def test_what_re2_takes_matches_as_in_go(pattern: str, text: str, found: bool) -> None:
    assert re2_search(pattern, text) is found
    problems = validate({"type": "string", "pattern": pattern}, text)
    assert (problems == []) is found


def test_groups_nested_too_deeply_for_python_are_refused() -> None:
    with pytest.raises(re.error, match="expression nests too deeply"):
        re2_compile("(" * 2000 + "a" + ")" * 2000)


def test_every_pattern_of_the_crds_is_re2() -> None:
    patterns = [
        node["pattern"]
        for kind in crds.KINDS
        for _, node in walk(crds.root_schema(kind))
        if "pattern" in node
    ]
    assert patterns
    for pattern in patterns:
        re2_compile(pattern)
