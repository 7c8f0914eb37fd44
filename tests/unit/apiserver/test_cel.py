"""The CEL evaluator of embedded mode: every operator and function with cel-go's results,
precedence, errors with their positions, every rule of crds/ compiling, and properties
checked against Python (integer arithmetic, string functions, literals)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.apiserver import crds
from reconsume.apiserver.cel import ABSENT, CelError, compile_rule, unescape_field
from reconsume.apiserver.cel.functions import format_double
from reconsume.apiserver.re2 import re2_search
from reconsume.apiserver.schema import walk
from reconsume.errors import InvalidArgumentError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
int64s = st.integers(INT64_MIN, INT64_MAX)


def run(text: str, self_value: Any = None, old_self: Any = ABSENT) -> Any:
    return compile_rule(text).evaluate(self_value, old_self)


def failure(text: str, self_value: Any = None, old_self: Any = ABSENT) -> CelError:
    with pytest.raises(CelError) as raised:
        run(text, self_value, old_self)
    return raised.value


# ------------------------------------------------------------------------------- values
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", 42),
        ("0x2A", 42),
        ("-9223372036854775808", INT64_MIN),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("'single'", "single"),
        ('"double"', "double"),
        ("'''it's'''", "it's"),
        ('"""say "hi\\""""', 'say "hi"'),
        (r"'\n\t\\\'\"'", "\n\t\\'\""),
        (r"'\x41\u00e9\U0001F600\101'", "Aé\U0001f600A"),
        (r"r'\d+\n'", r"\d+\n"),
        ("true", True),
        ("false", False),
        ("null", None),
        ("[1, 'a', [true]]", [1, "a", [True]]),
        ("[]", []),
        ("{'a': 1, 'b': [2]}", {"a": 1, "b": [2]}),
        ("1 // a comment\n + 1", 2),
    ],
)
def test_literals(text: str, expected: Any) -> None:
    assert run(text) == expected
    assert type(run(text)) is type(expected)


def test_self_field_selection_and_indexing() -> None:
    document = {"spec": {"list": [10, 20], "map": {"k.x": "v"}, "a-b": 1, "namespace": 2}}
    assert run("self.spec.list[1]", document) == 20
    assert run("self.spec.map['k.x']", document) == "v"
    assert run("self.spec.a__dash__b", document) == 1
    assert run("self.spec.__namespace__", document) == 2
    assert run("self", 7) == 7
    assert run("oldSelf.x", None, {"x": 3}) == 3


@pytest.mark.parametrize(
    ("escaped", "name"),
    [
        ("a__dash__b", "a-b"),
        ("a__dot__b", "a.b"),
        ("a__slash__b", "a/b"),
        ("a__underscores__b", "a__b"),
        ("__namespace__", "namespace"),
        ("__in__", "in"),
        ("__x__", "__x__"),
        ("plain", "plain"),
    ],
)
def test_field_names_are_unescaped_as_kubernetes_escapes_them(escaped: str, name: str) -> None:
    assert unescape_field(escaped) == name


def test_has_tests_presence_only() -> None:
    assert run("has(self.a)", {"a": None}) is True
    assert run("has(self.a)", {}) is False
    assert run("has(self.a.b)", {"a": {"b": 1}}) is True
    assert failure("has(self.a.b)", {}).reason == "no such key: a"
    assert "invalid type for field selection" in failure("has(self.a)", 1).reason


# ------------------------------------------------------------------------------ operators
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("100 / 10 / 5", 2),
        ("-7 / 2", -3),
        ("7 / -2", -3),
        ("-7 % 2", -1),
        ("7 % -2", 1),
        ("1.5 + 2.0", 3.5),
        ("1.0 / 4.0", 0.25),
        ("'a' + 'b'", "ab"),
        ("[1] + [2]", [1, 2]),
        ("-(3)", -3),
        ("--3", 3),
        ("!!true", True),
        ("!false && true", True),
        ("1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3", True),
        ("1 < 1.5 && 2.0 > 1 && 'a' < 'b' && false < true", True),
        ("1 + 1 == 2", True),
        ("1 == 1.0", True),
        ("true == 1", False),
        ("'1' == 1", False),
        ("null == null", True),
        ("null != 0", True),
        ("[1, [2]] == [1, [2]]", True),
        ("{'a': [1]} == {'a': [1]}", True),
        ("{'a': 1} == {'a': 2}", False),
        ("2 in [1, 2]", True),
        ("2.0 in [1, 2]", True),
        ("'b' in {'a': 1}", False),
        ("1 in [] || 'a' in ['a']", True),
        ("true ? 1 : 2", 1),
        ("false ? 1 : true ? 2 : 3", 2),
        ("true || false && false", True),
        ("(true || false) && false", False),
        ("1 + 2 == 3 ? 'y' : 'n'", "y"),
        ("!(1 in [1])", False),
    ],
)
def test_operators_and_precedence(text: str, expected: Any) -> None:
    assert run(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(1 / 0 == 1) || true", True),
        ("true || (1 / 0 == 1)", True),
        ("(1 / 0 == 1) && false", False),
        ("false && (1 / 0 == 1)", False),
        ("self.missing || true", True),
        ("false && self.missing", False),
    ],
)
def test_and_or_absorb_an_error_when_the_other_side_decides(text: str, expected: bool) -> None:
    assert run(text, {}) is expected


@pytest.mark.parametrize(
    "text", ["(1 / 0 == 1) || false", "true && (1 / 0 == 1)", "(1 / 0 == 1) && true"]
)
def test_and_or_raise_the_error_when_nothing_decides(text: str) -> None:
    assert failure(text).reason == "division by zero"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1 / 0", "division by zero"),
        ("1 % 0", "modulus by zero"),
        ("9223372036854775807 + 1", "integer overflow"),
        ("-9223372036854775808 - 1", "integer overflow"),
        ("-9223372036854775808 / -1", "integer overflow"),
        ("4611686018427387904 * 2", "integer overflow"),
        ("[1, 2][2]", "index out of bounds: 2"),
        ("{'a': 1}['b']", "no such key: b"),
        ("self.nope", "no such key: nope"),
        ("1 + 'a'", "no such overload: _+_(int, string)"),
        ("1 + 1.0", "no such overload: _+_(int, double)"),
        ("1 < 'a'", "no such overload: _<_(int, string)"),
        ("!1", "no such overload: !_(int)"),
        ("true && 1", "no such overload: _&&_(int)"),
        ("1 || false", "no such overload: _||_(int)"),
        ("1 ? 2 : 3", "no such overload: _?_:_(int)"),
        ("-'a'", "no such overload: -_(string)"),
        ("1 in 1", "no such overload: _in_(int, int)"),
        ("size(1)", "no such overload: size(int)"),
        ("'a'.startsWith(1)", "no such overload: startsWith(string, int)"),
        ("oldSelf", "oldSelf is not available: there is no old value"),
        ("{[1]: 2}", "unsupported map key type: list"),
        ("{'a': 1, 'a': 2}", "duplicate map key: a"),
        ("{true: 1, 1: 2}", "map keys True and 1 are not supported together"),
    ],
)
def test_evaluation_errors(text: str, reason: str) -> None:
    error = failure(text, {})
    assert error.reason == reason
    assert isinstance(error, InvalidArgumentError)
    assert str(error).startswith(reason)


def test_an_evaluation_error_names_its_position() -> None:
    error = failure("self.a + \n self.b", {"a": 1})
    assert (error.reason, error.line, error.column) == ("no such key: b", 2, 7)
    assert str(error) == "no such key: b at 2:7"


# ------------------------------------------------------------------------------ functions
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("size('héllo')", 5),
        ("'héllo'.size()", 5),
        ("size([1, 2])", 2),
        ("size({'a': 1})", 1),
        ("'abc'.matches('b')", True),
        ("'abc'.matches('^b')", False),
        ("matches('abc', 'c$')", True),
        ("'abc\\n'.matches('c$')", False),
        ("'abc'.startsWith('ab')", True),
        ("'abc'.endsWith('bc')", True),
        ("'abc'.contains('d')", False),
        ("'tacocat'.substring(4)", "cat"),
        ("'tacocat'.substring(0, 4)", "taco"),
        ("'héllo'.substring(1, 2)", "é"),
        ("'abc'.substring(3)", ""),
        ("int('42')", 42),
        ("int('-9223372036854775808')", INT64_MIN),
        ("int('+7')", 7),
        ("int(-1.9)", -1),
        ("int(7)", 7),
        ("double(2)", 2.0),
        ("double('1.5e3')", 1500.0),
        ("string(12)", "12"),
        ("string(-3)", "-3"),
        ("string(true)", "true"),
        ("string('s')", "s"),
        ("string(1.5)", "1.5"),
        ("string(1e6)", "1e+06"),
        ("dyn(3) == 3", True),
    ],
)
def test_functions(text: str, expected: Any) -> None:
    assert run(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("'abc'.substring(4)", "index out of range: 4"),
        ("'abc'.substring(-1)", "index out of range: -1"),
        ("'abc'.substring(2, 1)", "invalid substring range. start: 2, end: 1"),
        ("'abc'.substring(0, 9)", "index out of range: 9"),
        ("int('1.5')", "type conversion error from 'string' to 'int': '1.5'"),
        ("int(' 1')", "type conversion error from 'string' to 'int': ' 1'"),
        (
            "int('9223372036854775808')",
            "type conversion error from 'string' to 'int': '9223372036854775808'",
        ),
        ("int(1e19)", "integer overflow"),
        ("double('x')", "type conversion error from 'string' to 'double': 'x'"),
        (
            "'a'.matches(self)",
            "invalid regular expression '(': missing ), unterminated subpattern at position 0",
        ),
    ],
)
def test_function_errors(text: str, reason: str) -> None:
    assert failure(text, "(").reason == reason


@pytest.mark.parametrize(
    ("value", "go"),
    [
        (1.5, "1.5"),
        (100.0, "100"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e21, "1e+21"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-7, "-2.5e-07"),
        (0.0, "0"),
        (-0.0, "-0"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_string_of_a_double_is_gos_shortest_g_format(value: float, go: str) -> None:
    assert format_double(value) == go


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("^a$", "a\n", False),
        ("a\\z", "a", True),
        ("^\\d+$", "١٢", False),
        ("^\\s$", "\v", False),
        ("^[[:alpha:]]+$", "abc", True),
        ("^[]a]+$", "]a", True),
        ("\\Q.*\\E", "x.*y", True),
        ("\\Q.*\\E", "xy", False),
        ("[$]", "$", True),
        ("(?m)^b$", "a\nb\nc", True),
    ],
)
def test_re2_patterns_behave_as_in_go(pattern: str, text: str, found: bool) -> None:
    assert re2_search(pattern, text) is found


# --------------------------------------------------------------------------------- compile
@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("self.", "Syntax error: expected a field name", 6),
        ("1 +", "Syntax error: expected an expression, found end of input", 4),
        ("foo", "undeclared reference to 'foo'", 1),
        ("self.all(x, x > 0)", "undeclared reference to method 'all'", 6),
        ("lowerAscii('A')", "undeclared reference to function 'lowerAscii'", 1),
        ("size(1, 2)", "wrong number of arguments to 'size': 2", 1),
        ("1u", "unsigned integer literals are not supported", 1),
        ("b'x'", "bytes literals are not supported", 1),
        ("'abc", "Syntax error: unterminated string", 1),
        ("'\\q'", "Syntax error: invalid escape \\q", 2),
        ("has(self)", "invalid argument to has() macro", 1),
        (
            "self.matches('(')",
            "invalid regular expression: missing ), unterminated subpattern at position 0",
            14,
        ),
        ("9223372036854775808", "invalid int literal: out of range", 1),
        ("self.x @ 1", "Syntax error: unexpected character '@'", 8),
        ("(1 + 2", "Syntax error: expected ')', found end of input", 7),
        ("1 2", "Syntax error: unexpected input, found 2", 3),
        ("while", "Syntax error: reserved identifier 'while'", 1),
        ("self.a ? 1", "Syntax error: expected ':', found end of input", 11),
    ],
)
def test_compile_errors_name_the_position(text: str, message: str, column: int) -> None:
    with pytest.raises(CelError) as raised:
        compile_rule(text)
    assert (raised.value.reason, raised.value.line, raised.value.column) == (message, 1, column)
    assert str(raised.value) == f"{message} at 1:{column}"


def test_an_expression_nested_too_deeply_is_refused() -> None:
    with pytest.raises(CelError, match="too deeply nested"):
        compile_rule("(" * 5000 + "1" + ")" * 5000)


def test_programs_are_compiled_once_and_know_whether_they_are_transition_rules() -> None:
    assert compile_rule("self == oldSelf") is compile_rule("self == oldSelf")
    assert compile_rule("has(self.a) == has(oldSelf.a)").uses_old_self
    assert not compile_rule("self.a == 'oldSelf'").uses_old_self


def every_rule() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for kind in crds.KINDS:
        for path, node in walk(crds.root_schema(kind)):
            for rule in node.get("x-kubernetes-validations", ()):
                yield kind, path, rule


RULES = list(every_rule())


def test_the_crds_have_rules() -> None:
    assert len(RULES) >= 20
    assert {kind for kind, _, _ in RULES} == set(crds.KINDS)


@pytest.mark.parametrize(("kind", "path", "rule"), RULES, ids=[f"{k}:{p}" for k, p, _ in RULES])
def test_every_rule_of_the_crds_compiles(kind: str, path: str, rule: dict[str, Any]) -> None:
    program = compile_rule(rule["rule"])
    assert program.uses_old_self == ("oldSelf" in rule["rule"])
    if "messageExpression" in rule:
        compile_rule(rule["messageExpression"])


# -------------------------------------------------------------------------------- properties
def go_divide(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


@given(int64s, int64s, st.sampled_from(["+", "-", "*", "/", "%"]))
def test_integer_arithmetic_is_64_bit_go_arithmetic(a: int, b: int, op: str) -> None:
    if op in "/%" and b == 0:
        expected: int | None = None
    else:
        expected = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: go_divide(a, b),
            "%": lambda: a - b * go_divide(a, b),
        }[op]()
    text = f"self.a {op} self.b"
    if expected is None or not INT64_MIN <= expected <= INT64_MAX:
        with pytest.raises(CelError):
            run(text, {"a": a, "b": b})
    else:
        assert run(text, {"a": a, "b": b}) == expected


@given(int64s, int64s)
def test_integer_comparisons_agree_with_python(a: int, b: int) -> None:
    values = {"a": a, "b": b}
    assert run("self.a < self.b", values) is (a < b)
    assert run("self.a <= self.b", values) is (a <= b)
    assert run("self.a == self.b", values) is (a == b)
    assert run("self.a != self.b", values) is (a != b)


@given(int64s)
def test_int_and_string_round_trip(n: int) -> None:
    assert run("string(self)", n) == str(n)
    assert run("int(string(self)) == self", n) is True
    assert run(str(n)) == n


@given(st.text(max_size=20), st.text(max_size=5))
def test_string_functions_agree_with_python(text: str, part: str) -> None:
    values = {"s": text, "p": part}
    assert run("self.s.startsWith(self.p)", values) is text.startswith(part)
    assert run("self.s.endsWith(self.p)", values) is text.endswith(part)
    assert run("self.s.contains(self.p)", values) is (part in text)
    assert run("size(self.s)", values) == len(text)
    assert run("self.s + self.p", values) == text + part
    assert run("self.s < self.p", values) is (text < part)


@given(st.text(max_size=20), st.data())
def test_substring_agrees_with_python_slices(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    assert run(f"self.substring({start}, {end})", text) == text[start:end]
    assert run(f"self.substring({start})", text) == text[start:]


@given(st.text(max_size=30))
def test_string_literals_round_trip(text: str) -> None:
    literal = json.dumps(text)  # JSON escapes are CEL escapes, but for surrogates
    if "\\ud8" in literal or "\\ud9" in literal or "\\uda" in literal or "\\udb" in literal:
        return
    assert run(literal) == text


@given(st.lists(st.integers(-5, 5), max_size=6), st.integers(-5, 5))
def test_in_agrees_with_python_membership(items: list[int], item: int) -> None:
    assert run("self.i in self.l", {"i": item, "l": items}) is (item in items)
