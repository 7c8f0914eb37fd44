"""Cron schedules of DeadLetterJob spec.schedule: parsing, next runs, and what is refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconsume.embedded.cron import MACROS, CronSchedule
from reconsume.errors import InvalidArgumentError


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def runs(text: str, start: datetime, count: int) -> list[datetime]:
    schedule = CronSchedule.parse(text)
    found: list[datetime] = []
    when = start
    for _ in range(count):
        when = schedule.next_after(when)
        found.append(when)
    return found


# ------------------------------------------------------------------------------- examples


def test_every_half_hour() -> None:
    assert runs("*/30 * * * *", at(2025, 1, 3, 4, 0), 3) == [
        at(2025, 1, 3, 4, 30),
        at(2025, 1, 3, 5, 0),
        at(2025, 1, 3, 5, 30),
    ]


def test_next_after_is_strictly_after_and_ignores_seconds() -> None:
    schedule = CronSchedule.parse("*/30 * * * *")
    assert schedule.next_after(at(2025, 1, 3, 4, 30)) == at(2025, 1, 3, 5, 0)
    just_before = at(2025, 1, 3, 4, 29) + timedelta(seconds=59, microseconds=999_999)
    assert schedule.next_after(just_before) == at(2025, 1, 3, 4, 30)
    assert schedule.next_after(at(2025, 1, 3, 4, 30) + timedelta(seconds=1)) == at(2025, 1, 3, 5)


def test_the_end_of_a_year_rolls_over() -> None:
    assert runs("*/30 * * * *", at(2024, 12, 31, 23, 45), 1) == [at(2025, 1, 1, 0, 0)]


def test_weekday_mornings() -> None:
    # 2025-01-03 is a Friday: the next runs are Monday to Friday at 03:00.
    assert runs("0 3 * * 1-5", at(2025, 1, 3, 4, 0), 6) == [
        at(2025, 1, 6, 3),
        at(2025, 1, 7, 3),
        at(2025, 1, 8, 3),
        at(2025, 1, 9, 3),
        at(2025, 1, 10, 3),
        at(2025, 1, 13, 3),
    ]
    assert runs("0 3 * * MON-FRI", at(2025, 1, 3, 4, 0), 6) == runs(
        "0 3 * * 1-5", at(2025, 1, 3, 4, 0), 6
    )


def test_both_day_fields_restricted_means_either_day() -> None:
    # The 1st, the 15th, and every Monday (2025-01-01 is a Wednesday).
    assert runs("0 0 1,15 * MON", at(2025, 1, 1, 0, 0), 7) == [
        at(2025, 1, 6),
        at(2025, 1, 13),
        at(2025, 1, 15),
        at(2025, 1, 20),
        at(2025, 1, 27),
        at(2025, 2, 1),
        at(2025, 2, 3),
    ]


def test_a_stepped_star_restricts_a_day_field_as_in_kubernetes() -> None:
    # robfig/cron v3: "*/2" is a restriction, so the two day fields are OR-ed.
    schedule = CronSchedule.parse("0 0 */2 * 1")
    assert schedule.either_day
    # 2025-01-02 is a Thursday: the 3rd (odd), the 5th, then Monday the 6th.
    assert runs("0 0 */2 * 1", at(2025, 1, 2), 3) == [
        at(2025, 1, 3),
        at(2025, 1, 5),
        at(2025, 1, 6),
    ]
    assert not CronSchedule.parse("0 0 */1 * 1").either_day


@pytest.mark.parametrize("text", ["0 0 * * MON", "0 0 ? * MON", "0 0 *,5 * MON"])
def test_an_unrestricted_day_of_month_means_both(text: str) -> None:
    schedule = CronSchedule.parse(text)
    assert not schedule.either_day
    assert runs(text, at(2025, 1, 1), 2) == [at(2025, 1, 6), at(2025, 1, 13)]


def test_only_a_day_of_week_restricted_keeps_both_day_fields_anded() -> None:
    assert runs("0 0 13 * FRI", at(2025, 1, 1), 2) == [at(2025, 1, 3), at(2025, 1, 10)]
    assert runs("0 0 13 * *", at(2025, 1, 1), 2) == [at(2025, 1, 13), at(2025, 2, 13)]
    assert runs("0 0 13 * ?", at(2025, 1, 1), 1) == [at(2025, 1, 13)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # croniter, which does the date arithmetic, would read these otherwise: an equal range
        # as the whole field, "*/1" in a day field as a restriction (so either day), and a list
        # with a stepped star in each day field as no restriction (so both days).
        ("5-5 * * * *", [at(2025, 1, 1, 0, 5), at(2025, 1, 1, 1, 5)]),
        ("0 0 1-1 * *", [at(2025, 2, 1), at(2025, 3, 1)]),
        ("0 0 */1 * MON", [at(2025, 1, 6), at(2025, 1, 13)]),
        ("0 0 */2,2-30/2 * */2", [at(2025, 1, 2), at(2025, 1, 3)]),
    ],
)
def test_schedules_croniter_reads_otherwise_run_as_in_kubernetes(
    text: str, expected: list[datetime]
) -> None:
    assert runs(text, at(2025, 1, 1), len(expected)) == expected


def test_either_day_near_the_year_9999_still_finds_the_day_of_the_week() -> None:
    # The 1st of the month is past the year 9999; the next Sunday is not.
    assert runs("0 0 1 * SUN", at(9999, 12, 2), 1) == [at(9999, 12, 5)]


def test_the_31st_skips_shorter_months() -> None:
    assert runs("0 0 31 * *", at(2025, 1, 31), 3) == [
        at(2025, 3, 31),
        at(2025, 5, 31),
        at(2025, 7, 31),
    ]


def test_month_ends() -> None:
    assert runs("59 23 30 * *", at(2025, 1, 1), 3) == [
        at(2025, 1, 30, 23, 59),
        at(2025, 3, 30, 23, 59),
        at(2025, 4, 30, 23, 59),
    ]
    assert runs("0 0 28-31 2 *", at(2025, 1, 1), 2) == [at(2025, 2, 28), at(2026, 2, 28)]
    assert runs("0 0 28-31 2 *", at(2024, 1, 1), 2) == [at(2024, 2, 28), at(2024, 2, 29)]


def test_a_day_february_lacks_does_not_hide_the_first_of_march() -> None:
    # croniter 6.0 went from February to 30 March here; pyproject.toml asks for 6.1 or later.
    assert runs("0 0 1,30 * *", at(2025, 2, 2), 2) == [at(2025, 3, 1), at(2025, 3, 30)]


def test_leap_days() -> None:
    assert runs("0 0 29 2 *", at(2024, 3, 1), 2) == [at(2028, 2, 29), at(2032, 2, 29)]
    # 2100 is no leap year: the longest wait there is.
    assert runs("0 0 29 2 *", at(2097, 3, 1), 1) == [at(2104, 2, 29)]
    assert runs("0 0 29 FEB MON", at(2025, 1, 1), 1) == [at(2025, 2, 3)]


@pytest.mark.parametrize(
    ("macro", "first", "second"),
    [
        ("@yearly", at(2026, 1, 1), at(2027, 1, 1)),
        ("@annually", at(2026, 1, 1), at(2027, 1, 1)),
        ("@monthly", at(2025, 6, 1), at(2025, 7, 1)),
        ("@weekly", at(2025, 5, 18), at(2025, 5, 25)),  # Sundays
        ("@daily", at(2025, 5, 15), at(2025, 5, 16)),
        ("@midnight", at(2025, 5, 15), at(2025, 5, 16)),
        ("@hourly", at(2025, 5, 14, 11), at(2025, 5, 14, 12)),
    ],
)
def test_macros(macro: str, first: datetime, second: datetime) -> None:
    assert runs(macro, at(2025, 5, 14, 10, 30), 2) == [first, second]
    schedule = CronSchedule.parse(macro)
    assert schedule.text == macro
    fields = CronSchedule.parse(MACROS[macro])
    assert (schedule.minutes, schedule.hours, schedule.days_of_month) == (
        fields.minutes,
        fields.hours,
        fields.days_of_month,
    )
    assert (schedule.months, schedule.days_of_week, schedule.either_day) == (
        fields.months,
        fields.days_of_week,
        fields.either_day,
    )


@pytest.mark.parametrize(
    ("text", "attribute", "values"),
    [
        ("5/20 * * * *", "minutes", (5, 25, 45)),
        ("10-30/10 * * * *", "minutes", (10, 20, 30)),
        ("0,59,30 * * * *", "minutes", (0, 30, 59)),
        ("0-4,2-6 * * * *", "minutes", (0, 1, 2, 3, 4, 5, 6)),
        ("* */7 * * *", "hours", (0, 7, 14, 21)),
        ("* 05 * * *", "hours", (5,)),
        ("* * */10 * *", "days_of_month", (1, 11, 21, 31)),
        ("* * * jan,Jul,DEC *", "months", (1, 7, 12)),
        ("* * * FEB-apr *", "months", (2, 3, 4)),
        ("* * * */5 *", "months", (1, 6, 11)),
        ("* * * * 7", "days_of_week", (0,)),
        ("* * * * 5-7", "days_of_week", (0, 5, 6)),
        ("* * * * 0-7", "days_of_week", (0, 1, 2, 3, 4, 5, 6)),
        ("* * * * 1/2", "days_of_week", (1, 3, 5)),
        ("* * * * */2", "days_of_week", (0, 2, 4, 6)),
        ("* * * * sun,Sat", "days_of_week", (0, 6)),
        ("? ? ? ? ?", "minutes", tuple(range(60))),
        ("*/61 * * * *", "minutes", (0,)),
    ],
)
def test_field_values(text: str, attribute: str, values: tuple[int, ...]) -> None:
    assert getattr(CronSchedule.parse(text), attribute) == values


def test_whitespace_between_fields_is_free_and_the_text_is_kept() -> None:
    schedule = CronSchedule.parse(" 0  3 * *\t1 ")
    assert schedule.text == " 0  3 * *\t1 "
    assert schedule.hours == (3,)


def test_times_in_other_zones_are_converted_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    result = CronSchedule.parse("0 3 * * *").next_after(datetime(2025, 1, 3, 4, 0, tzinfo=plus_two))
    assert result == at(2025, 1, 3, 3, 0)
    assert result.tzinfo is UTC


def test_naive_times_are_refused() -> None:
    schedule = CronSchedule.parse("* * * * *")
    with pytest.raises(InvalidArgumentError, match="naive"):
        schedule.next_after(datetime(2025, 1, 1))
    with pytest.raises(InvalidArgumentError, match="naive"):
        schedule.matches(datetime(2025, 1, 1))


def test_matches_looks_at_the_minute() -> None:
    schedule = CronSchedule.parse("30 4 * * *")
    assert schedule.matches(at(2025, 1, 3, 4, 30) + timedelta(seconds=42))
    assert not schedule.matches(at(2025, 1, 3, 4, 31))


def test_no_run_after_the_year_9999() -> None:
    with pytest.raises(InvalidArgumentError, match="no run after"):
        CronSchedule.parse("* * * * *").next_after(datetime.max.replace(tzinfo=UTC))
    with pytest.raises(InvalidArgumentError, match="no run after"):
        CronSchedule.parse("@yearly").next_after(at(9999, 6, 1))
    assert CronSchedule.parse("@daily").next_after(at(9999, 12, 30, 12)) == at(9999, 12, 31)


# --------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "cron schedule '': expected five fields"),
        ("* * * *", "expected five fields (minute hour day-of-month month day-of-week), got 4"),
        ("* * * * * *", "got 6"),
        ("@every 5m", "cron schedule '@every 5m': unknown macro; use one of @yearly"),
        ("@DAILY", "unknown macro"),
        ("@reboot", "unknown macro"),
        ("61 * * * *", "minute field '61': 61 is outside 0-59"),
        ("* 24 * * *", "hour field '24': 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month field '0': 0 is outside 1-31"),
        ("* * 32 * *", "day-of-month field '32': 32 is outside 1-31"),
        ("* * * 13 *", "month field '13': 13 is outside 1-12"),
        ("* * * 0 *", "month field '0': 0 is outside 1-12"),
        ("* * * * 8", "day-of-week field '8': 8 is outside 0-7"),
        ("1-60 * * * *", "minute field '1-60': 60 is outside 0-59"),
        ("70/5 * * * *", "minute field '70/5': 70 is outside 0-59"),
        ("-1 * * * *", "minute field '-1': a range start is missing"),
        ("1- * * * *", "minute field '1-': a range end is missing"),
        ("/5 * * * *", "minute field '/5': a value is missing"),
        ("*/ * * * *", "minute field '*/': a step is missing"),
        ("*/0 * * * *", "minute field '*/0': a step must be at least 1"),
        ("*/x * * * *", "minute field '*/x': 'x' is not a number"),
        ("*/2/3 * * * *", "too many '/' in '*/2/3'"),
        ("1-2-3 * * * *", "too many '-' in '1-2-3'"),
        ("30-10 * * * *", "minute field '30-10': range 30-10 starts after it ends"),
        ("* * * * SAT-SUN", "day-of-week field 'SAT-SUN': range SAT-SUN starts after it ends"),
        ("1,,2 * * * *", "minute field '1,,2': empty item in the list"),
        ("1, * * * *", "empty item in the list"),
        ("a * * * *", "minute field 'a': 'a' is not a number"),
        ("+5 * * * *", "'+5' is not a number"),
        ("\u0663 * * * *", "is not a number"),
        ("*-5 * * * *", "'*' is not a number"),
        ("* MON * * *", "hour field 'MON': 'MON' is not a number"),
        ("* * * FOO *", "month field 'FOO': 'FOO' is neither a number nor a month name (JAN-DEC)"),
        ("* * * * MONDAY", "'MONDAY' is neither a number nor a day name (SUN-SAT)"),
        ("0 0 30 2 *", "day-of-month field '30' never occurs in month field '2'"),
        ("0 0 31 4,6,9,11 *", "never occurs"),
        ("0 0 30,31 FEB ?", "never occurs"),
        # Accepted by croniter, refused by Kubernetes (robfig/cron v3).
        ("0 0 L * *", "day-of-month field 'L': 'L' is not a number"),
        ("0 0 LW * *", "day-of-month field 'LW': 'LW' is not a number"),
        ("0 0 15W * *", "day-of-month field '15W': '15W' is not a number"),
        ("0 0 * * 5L", "day-of-week field '5L': '5L' is neither a number nor a day name"),
        ("0 0 * * MON#2", "day-of-week field 'MON#2': 'MON#2' is neither a number nor a day"),
        ("H * * * *", "minute field 'H': 'H' is not a number"),
        ("H/15 * * * *", "minute field 'H/15': 'H' is not a number"),
        ("H(0-29) * * * *", "minute field 'H(0-29)': 'H(0' is not a number"),
        ("R * * * *", "minute field 'R': 'R' is not a number"),
        ("0 0 * * 5-1", "day-of-week field '5-1': range 5-1 starts after it ends"),
        ("0 0 * NOV-FEB *", "month field 'NOV-FEB': range NOV-FEB starts after it ends"),
        ("0 0 0 1 * * 2030", "got 7"),
        ("CRON_TZ=UTC 0 0 * * *", "got 6"),
    ],
)
def test_invalid_schedules(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        CronSchedule.parse(text)
    assert message in str(caught.value)


def test_an_impossible_day_of_month_is_fine_when_the_day_of_week_may_match() -> None:
    # Either day matches, so Mondays in February run although the 30th never comes.
    assert runs("0 0 30 2 MON", at(2025, 1, 1), 1) == [at(2025, 2, 3)]


# ------------------------------------------------------------------------------ properties


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]
    unrestricted: bool


@dataclass(frozen=True)
class Spec:
    minute: Field
    hour: Field
    day_of_month: Field
    month: Field
    day_of_week: Field

    @property
    def text(self) -> str:
        parts = (self.minute, self.hour, self.day_of_month, self.month, self.day_of_week)
        return " ".join(part.text for part in parts)

    def matches(self, when: datetime) -> bool:
        """An oracle written from the rules, independent of the parser."""
        return (
            when.minute in self.minute.values
            and when.hour in self.hour.values
            and self.matches_day(when)
        )

    def matches_day(self, when: datetime) -> bool:
        in_month = when.day in self.day_of_month.values
        in_week = (when.isoweekday() % 7) in self.day_of_week.values
        if self.day_of_month.unrestricted or self.day_of_week.unrestricted:
            day = in_month and in_week
        else:
            day = in_month or in_week
        return when.month in self.month.values and day

    def possible(self) -> bool:
        if not (self.day_of_month.unrestricted or self.day_of_week.unrestricted):
            return True
        longest = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30}
        return any(
            d <= longest.get(m, 31) for m in self.month.values for d in self.day_of_month.values
        )


def _fold(values: range | list[int], top: int) -> frozenset[int]:
    """Day-of-week 7 is Sunday (0); other fields have no values above their top."""
    return frozenset(value % 7 if top == 7 else value for value in values)


@st.composite
def items(draw: st.DrawFn, low: int, high: int, top: int, names: tuple[str, ...]) -> Field:
    kind = draw(st.sampled_from(["star", "star-step", "value", "range", "range-step", "from-step"]))
    if kind == "star":
        mark = draw(st.sampled_from(["*", "?"]))
        return Field(mark, frozenset(range(low, high + 1)), True)
    if kind == "star-step":
        step = draw(st.integers(1, high - low + 2))
        return Field(f"*/{step}", frozenset(range(low, high + 1, step)), step == 1)
    a = draw(st.integers(low, top))
    if kind == "value":
        text = str(a)
        if names and a - low < len(names) and draw(st.booleans()):
            text = draw(st.sampled_from([str.upper, str.lower, str.title]))(names[a - low])
        return Field(text, _fold([a], top), False)
    if kind == "from-step":
        a = min(a, high)
        step = draw(st.integers(1, high - low + 2))
        return Field(f"{a}/{step}", frozenset(range(a, high + 1, step)), False)
    b = draw(st.integers(a, top))
    if kind == "range":
        return Field(f"{a}-{b}", _fold(range(a, b + 1), top), False)
    step = draw(st.integers(1, top - low + 2))
    return Field(f"{a}-{b}/{step}", _fold(range(a, b + 1, step), top), False)


def fields(
    low: int, high: int, top: int = -1, names: tuple[str, ...] = ()
) -> st.SearchStrategy[Field]:
    top = high if top < 0 else top

    def join(parts: list[Field]) -> Field:
        return Field(
            ",".join(part.text for part in parts),
            frozenset().union(*(part.values for part in parts)),
            any(part.unrestricted for part in parts),
        )

    return st.lists(items(low, high, top, names), min_size=1, max_size=3).map(join)


MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

specs = st.builds(
    Spec,
    fields(0, 59),
    fields(0, 23),
    fields(1, 31),
    fields(1, 12, names=MONTHS),
    fields(0, 6, 7, names=DAYS),
)
# Every month and any day of the month: most of these run within days, so a brute-force search
# over a few days covers the whole gap; both day fields are restricted in some of them.
frequent_specs = st.builds(
    Spec,
    fields(0, 59),
    fields(0, 23),
    fields(1, 31),
    st.just(Field("*", frozenset(range(1, 13)), True)),
    fields(0, 6, 7, names=DAYS),
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@settings(deadline=None)  # a search's time depends on the schedule, not a bug
@given(specs, times)
def test_the_next_run_is_later_and_matches_every_field(spec: Spec, when: datetime) -> None:
    try:
        schedule = CronSchedule.parse(spec.text)
    except InvalidArgumentError:
        assert not spec.possible()
        return
    assert spec.possible()
    result = schedule.next_after(when)
    assert result > when
    assert result.tzinfo is UTC
    assert (result.second, result.microsecond) == (0, 0)
    assert spec.matches(result)
    assert schedule.matches(result)


@settings(deadline=None)
@given(frequent_specs, times)
def test_no_run_is_skipped(spec: Spec, when: datetime) -> None:
    """No minute between ``when`` and the next run (or the next three days) matches."""
    schedule = CronSchedule.parse(spec.text)
    result = schedule.next_after(when)
    end = min(result, when + timedelta(days=3))
    minute = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while minute < end:
        assert not spec.matches(minute), f"{spec.text!r} runs at {minute}, before {result}"
        minute += timedelta(minutes=1)


@settings(deadline=None)  # a search's time depends on the schedule, not a bug
@given(specs, times)
def test_the_next_run_is_the_first_in_a_day_by_day_search(spec: Spec, when: datetime) -> None:
    """Any schedule: days are scanned one by one, and the minutes of days that match."""
    if not spec.possible():
        return
    result = CronSchedule.parse(spec.text).next_after(when)
    first = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = first.replace(hour=0, minute=0)
    while day <= result:
        if spec.matches_day(day):
            minute = max(day, first)
            while minute.day == day.day and minute <= result:
                if spec.matches(minute):
                    assert minute == result
                    return
                minute += timedelta(minutes=1)
        day += timedelta(days=1)
    raise AssertionError(f"{spec.text!r}: no run found up to {result}")


@settings(deadline=None)  # a search's time depends on the schedule, not a bug
@given(
    st.sets(st.integers(1, 12), min_size=1, max_size=4),
    st.sets(st.integers(1, 31) | st.integers(28, 31), min_size=1, max_size=3),
)
def test_only_days_that_never_come_are_refused(months: set[int], days: set[int]) -> None:
    text = f"0 0 {','.join(map(str, sorted(days)))} {','.join(map(str, sorted(months)))} *"
    longest = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}
    if any(day <= longest.get(month, 31) for month in months for day in days):
        schedule = CronSchedule.parse(text)
        result = schedule.next_after(at(2097, 3, 1))
        assert result.month in months
        assert result.day in days
    else:
        with pytest.raises(InvalidArgumentError, match="never occurs"):
            CronSchedule.parse(text)


@settings(deadline=None)  # a search's time depends on the schedule, not a bug
@given(specs, times)
def test_the_run_before_is_not_after_the_start(spec: Spec, when: datetime) -> None:
    """Asking from one minute before a run finds that run again."""
    if not spec.possible():
        return
    schedule = CronSchedule.parse(spec.text)
    result = schedule.next_after(when)
    assert schedule.next_after(result - timedelta(minutes=1)) == result
    assert schedule.next_after(result - timedelta(microseconds=1)) == result
