"""Cron schedules of a DeadLetterJob's ``spec.schedule``, read as a Kubernetes CronJob reads them.

A schedule is five fields, ``minute hour day-of-month month day-of-week``, or a macro::

    CronSchedule.parse("0 3 * * MON-FRI").next_after(datetime(2025, 1, 3, 4, 0, tzinfo=UTC))
    # -> 2025-01-06 03:00 UTC (the Monday)

Each field is a comma-separated list of ``*``, ``n``, ``a-b``, ``*/s``, ``a-b/s`` or ``a/s``
(``a`` up to the field's maximum, every ``s``). Months take JAN-DEC and days of the week
SUN-SAT (any case); day-of-week 7 is Sunday as is 0; ``?`` is ``*``. Macros: @yearly
(@annually), @monthly, @weekly, @daily (@midnight), @hourly. Times are UTC.

The semantics are those of robfig/cron v3, the library behind Kubernetes CronJobs:

* A day field is *unrestricted* when an item of its list is ``*`` or ``?`` without a step
  above 1 (``*/2`` restricts). When both day fields are restricted a day matches if
  EITHER matches: ``0 0 1,15 * MON`` runs on the 1st, the 15th and every Monday. Otherwise
  both must match: ``0 0 */2 * *`` and ``0 0 * * 1`` are what they look like.
* ``a/s`` means ``a-max/s``, and ``*/s`` starts at the field's minimum (minute 0, day 1).

Reading and searching are split. :meth:`CronSchedule.parse` reads the text itself, because
what Kubernetes refuses must be refused here too: ``L``, ``W``, ``#``, ``H`` and ``R``, ranges
that end before they start (``5-1``), six or seven fields and values out of range are errors,
with messages that name the field. The date arithmetic of :meth:`CronSchedule.next_after` is
croniter's, a maintained library, given the values ``parse`` found as plain lists of numbers;
when either day matches, it searches by each day field and takes the earlier run. croniter
never sees the text as written, since it reads some of it otherwise: ``5-5`` as every minute,
``SAT-SUN`` as a range that wraps around, and ``*/1`` or ``*,5`` in a day field as a
restriction.

Schedules that can never run, such as ``0 0 30 2 *`` or ``0 0 31 4,6,9,11 *``, are rejected
by :meth:`CronSchedule.parse` rather than searched for at every tick. Whatever ``parse``
accepts therefore runs within a bounded time: a day of the month that exists in one of
the months recurs within eight years (29 February, across the skipped leap year 2100),
and a restricted day of the week within a week of an allowed month. So
:meth:`CronSchedule.next_after` always returns a time, unless it would fall after the year 9999.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime
from typing import Final

from croniter import croniter

from reconsume.errors import InvalidArgumentError

__all__ = ["CronSchedule", "MACROS"]

MACROS: Final[Mapping[str, str]] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The macros a schedule may be, and the five fields each stands for."""

# Spelled out rather than taken from calendar.month_abbr, which follows the locale.
_MONTH_NAMES: Final = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
_DAY_NAMES: Final = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}

# The longest each month gets, in any year: 29 February is a day that exists.
_LONGEST_MONTH_DAYS: Final = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

# How many years a croniter search covers. Whatever parse accepts runs well within it (see the
# module's docstring), though one of the two searches for either day may find nothing, as the
# search by the day of the month does for ``0 0 30 2 MON``.
_SEARCH_YEARS: Final = 9


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    """As in error messages."""
    low: int
    high: int
    """The highest value ``*`` and ``a/s`` reach."""
    top: int
    """The highest value accepted: 7 (Sunday again) for day-of-week, else ``high``."""
    names: Mapping[str, int]
    names_hint: str = ""


_MINUTE: Final = _Field("minute", 0, 59, 59, {})
_HOUR: Final = _Field("hour", 0, 23, 23, {})
_DAY_OF_MONTH: Final = _Field("day-of-month", 1, 31, 31, {})
_MONTH: Final = _Field("month", 1, 12, 12, _MONTH_NAMES, " nor a month name (JAN-DEC)")
_DAY_OF_WEEK: Final = _Field("day-of-week", 0, 6, 7, _DAY_NAMES, " nor a day name (SUN-SAT)")


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron schedule; build it with :meth:`parse`."""

    text: str
    """The schedule as written (a macro stays a macro)."""
    minutes: tuple[int, ...]
    """Minutes of the hour it runs at, ascending."""
    hours: tuple[int, ...]
    """Hours of the day (UTC), ascending."""
    days_of_month: tuple[int, ...]
    """Days of the month, ascending."""
    months: tuple[int, ...]
    """Months, 1 = January, ascending."""
    days_of_week: tuple[int, ...]
    """Days of the week, 0 = Sunday, ascending."""
    either_day: bool
    """Both day fields are restricted: a day matches when either of them matches."""

    @classmethod
    def parse(cls, text: str) -> CronSchedule:
        """Parse five cron fields or a macro; InvalidArgumentError names what is wrong."""
        stripped = text.strip()
        if stripped.startswith("@"):
            fields_text = MACROS.get(stripped)
            if fields_text is None:
                known = ", ".join(MACROS)
                raise InvalidArgumentError(
                    f"cron schedule {text!r}: unknown macro; use one of {known}, "
                    "or five fields (minute hour day-of-month month day-of-week)"
                )
        else:
            fields_text = stripped
        fields = fields_text.split()
        if len(fields) != 5:
            raise InvalidArgumentError(
                f"cron schedule {text!r}: expected five fields "
                f"(minute hour day-of-month month day-of-week), got {len(fields)}"
            )
        minutes, _ = _parse_field(fields[0], _MINUTE)
        hours, _ = _parse_field(fields[1], _HOUR)
        days_of_month, any_day_of_month = _parse_field(fields[2], _DAY_OF_MONTH)
        months, _ = _parse_field(fields[3], _MONTH)
        days_of_week, any_day_of_week = _parse_field(fields[4], _DAY_OF_WEEK)
        either_day = not any_day_of_month and not any_day_of_week
        if not either_day and not any(
            day <= _LONGEST_MONTH_DAYS[month] for month in months for day in days_of_month
        ):
            raise InvalidArgumentError(
                f"cron schedule {text!r}: day-of-month field {fields[2]!r} never occurs in "
                f"month field {fields[3]!r}, so the schedule would never run"
            )
        return cls(
            text=text,
            minutes=minutes,
            hours=hours,
            days_of_month=days_of_month,
            months=months,
            days_of_week=days_of_week,
            either_day=either_day,
        )

    def matches(self, when: datetime) -> bool:
        """Whether the schedule runs in the minute (UTC) that ``when`` falls in."""
        at = _utc(when)
        in_month = at.day in self.days_of_month
        in_week = at.isoweekday() % 7 in self.days_of_week
        return (
            at.minute in self.minutes
            and at.hour in self.hours
            and at.month in self.months
            and ((in_month or in_week) if self.either_day else (in_month and in_week))
        )

    def next_after(self, when: datetime) -> datetime:
        """The first minute the schedule runs at strictly after ``when``, as an aware UTC time.

        ``when`` must be aware (any time zone). Raises InvalidArgumentError only when the
        next run would fall after the year 9999.
        """
        # croniter gets a whole minute, naive and in UTC: its timestamps are floats, exact for
        # whole seconds only, and a naive time keeps its time-zone handling out of the way.
        start = _utc(when).replace(tzinfo=None, second=0, microsecond=0)
        minutes, hours, months = _listed(self.minutes), _listed(self.hours), _listed(self.months)
        days_of_month, days_of_week = _listed(self.days_of_month), _listed(self.days_of_week)
        # Either day: the earlier of one search by the day of the month and one by the day of
        # the week. croniter's day_or does the same, but by its own rule of when both fields
        # are restricted, and it gives up on both when one of them runs past the year 9999.
        if self.either_day:
            days = [(days_of_month, "*"), ("*", days_of_week)]
        else:
            days = [(days_of_month, days_of_week)]
        runs: list[datetime] = []
        for day_of_month, day_of_week in days:
            search = croniter(
                f"{minutes} {hours} {day_of_month} {months} {day_of_week}",
                start,
                ret_type=datetime,
                day_or=False,
                max_years_between_matches=_SEARCH_YEARS,
            )
            try:
                runs.append(search.get_next())
            except (OverflowError, ValueError):  # past the year 9999, or no run found
                continue
        if not runs:
            raise InvalidArgumentError(
                f"cron schedule {self.text!r}: no run after {when.isoformat()} "
                f"up to the end of the year {min(start.year + _SEARCH_YEARS, MAXYEAR)}"
            )
        return min(runs).replace(tzinfo=UTC)


def _utc(when: datetime) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidArgumentError(
            f"cron times must be aware (UTC), got the naive datetime {when.isoformat()}"
        )
    return when.astimezone(UTC)


def _listed(values: tuple[int, ...]) -> str:
    """A field for croniter: its values as a plain list, which croniter reads as robfig does."""
    return ",".join(map(str, values))


def _parse_field(text: str, field: _Field) -> tuple[tuple[int, ...], bool]:
    """The values ``text`` stands for, and whether it is unrestricted (``*`` or ``?``).

    Only robfig's grammar gets through: ``L``, ``W``, ``#``, ``H`` and ``R`` are not numbers,
    and a range must not end before it starts.
    """
    values: set[int] = set()
    unrestricted = False
    for item in text.split(","):
        if not item:
            raise _field_error(field, text, "empty item in the list")
        range_text, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if "/" in step_text:
                raise _field_error(field, text, f"too many '/' in {item!r}")
            step = _number(step_text, field, text, what="step")
            if step == 0:
                raise _field_error(field, text, "a step must be at least 1")
        if range_text in ("*", "?"):
            low, high = field.low, field.high
            # As robfig/cron v3: "*/1" leaves the field unrestricted, "*/2" restricts it.
            unrestricted = unrestricted or step == 1
        else:
            low_text, dash, high_text = range_text.partition("-")
            if "-" in high_text:
                raise _field_error(field, text, f"too many '-' in {item!r}")
            low = _value(low_text, field, text, what="range start" if dash else "value")
            if dash:
                high = _value(high_text, field, text, what="range end")
            elif slash:
                high = max(field.high, low)
            else:
                high = low
            if low > high:
                raise _field_error(
                    field, text, f"range {low_text}-{high_text} starts after it ends"
                )
        values.update(range(low, high + 1, step))
    if field.top > field.high:  # day-of-week 7 is Sunday again
        values = {value % (field.high + 1) for value in values}
    return tuple(sorted(values)), unrestricted


def _value(text: str, field: _Field, field_text: str, *, what: str) -> int:
    named = field.names.get(text.upper())
    if named is not None:
        return named
    value = _number(text, field, field_text, what=what, hint=field.names_hint)
    if not field.low <= value <= field.top:
        raise _field_error(field, field_text, f"{value} is outside {field.low}-{field.top}")
    return value


def _number(text: str, field: _Field, field_text: str, *, what: str, hint: str = "") -> int:
    # Only ASCII digits: int() would also take "+5", " 5", "5_0" and other scripts' digits.
    if not text:
        raise _field_error(field, field_text, f"a {what} is missing")
    if not (text.isascii() and text.isdigit()):
        reason = f"is neither a number{hint}" if hint else "is not a number"
        raise _field_error(field, field_text, f"{text!r} {reason}")
    return int(text)


def _field_error(field: _Field, text: str, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{field.name} field {text!r}: {reason}")
