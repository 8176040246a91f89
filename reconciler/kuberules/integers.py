"""Whole numbers from text a user writes (a Pod's annotations and affinity values, a hook's
query), counted before `int()` reads them. Pure.

CPython's int() refuses text of more than 4,300 digits with ValueError (its guard against a
quadratic conversion, sys.get_int_max_str_digits). Read with a bare int() where the scheduler
reads every Pod, one annotation of 4,301 digits raised in every job poll and every hook call.
Here a number's significant digits are counted against its bounds first: int() only ever sees
as many digits as the bounds have, and a refusal gives a long value's length, not the value.

Digits are ASCII 0-9, as Go's strconv reads them: superscript and Arabic-Indic digits are
str.isdigit(), and int() takes Arabic-Indic digits, "1_000" and " 5"; strconv takes none.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from reconciler.kuberules.problem import Problem

SHOWN_CHARS: Final = 32  # a value up to this long is quoted in a refusal; a longer one, counted
_DECIMAL = re.compile(r"([+-]?)([0-9]+)")


class Misread(enum.Enum):
    """Why text is no number within the bounds."""

    NOT_AN_INTEGER = "not an integer"
    BELOW = "below the minimum"
    ABOVE = "above the maximum"


def parse_int(text: str, minimum: int, maximum: int, *, plus: bool = False) -> int | Misread:
    """`text` as a decimal integer in [minimum, maximum], as strconv.ParseInt reads it (no
    spaces, ASCII digits; a leading "+" only with `plus`); linear in the text's length."""
    match = _DECIMAL.fullmatch(text)
    if match is None or (match[1] == "+" and not plus):
        return Misread.NOT_AN_INTEGER
    sign, digits = match[1], match[2].lstrip("0")
    if len(digits) > len(str(max(abs(minimum), abs(maximum)))):  # beyond both bounds' size
        return Misread.BELOW if sign == "-" else Misread.ABOVE
    number = int(sign + (digits or "0"))
    if number < minimum:
        return Misread.BELOW
    if number > maximum:
        return Misread.ABOVE
    return number


@dataclass(frozen=True)
class Bounds:
    """The integers an annotation takes, and why, for the refusal of any other value."""

    minimum: int
    maximum: int
    below: str = ""  # why the minimum, said after it: " (priority 0 holds a job in Slurm)"
    above: str = ""  # why the maximum, likewise

    def read(self, field: str, raw: object) -> int | Problem:
        """The value (surrounding whitespace stripped), or the Problem that names `field`,
        the bound and the value (its length, past SHOWN_CHARS)."""
        text = str(raw).strip()
        found = parse_int(text, self.minimum, self.maximum)
        if isinstance(found, int):
            return found
        if found is Misread.NOT_AN_INTEGER:
            return Problem(field, f"must be an integer, got {shown(text)}")
        if found is Misread.BELOW:
            return Problem(field, f"must be {self.minimum} or more{self.below}, got {shown(text)}")
        return Problem(field, f"must be {self.maximum} or less{self.above}, got {shown(text)}")


def shown(text: str) -> str:
    """`text` quoted, or its length when it is longer than SHOWN_CHARS: an Event, a log line
    or an error never carries a value of kilobytes."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"a value of {len(text):,} characters ({text[:12]!r}...)"
