"""Parsing the ``ID|TIME`` bounds and durations of the log commands. Pure: decides.

A log id is the stream id ``<ms>-<seq>``: its first part is the wall-clock time (ms) of the
commit, so a time converts to an id bound. Accepted points:

* ``1714557600000-3`` — an entry id;
* ``1714557600000``  — milliseconds (12 digits or more): every entry of that millisecond;
* ``1714557600`` or ``1714557600.25`` — seconds since the epoch;
* ``2024-05-01T10:00:00Z`` (any ISO 8601 date-time; without a zone it is UTC).
"""

from __future__ import annotations

import datetime as _dt
import re

MAX_SEQ = (1 << 64) - 1
_ID = re.compile(r"^(\d+)-(\d+)$")
_MS = re.compile(r"^\d{12,}$")
_SECONDS = re.compile(r"^\d{1,11}(\.\d+)?$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


class BoundError(ValueError):
    """An argument that is neither a log id nor a time (or not a duration)."""


def _ms_of(text: str) -> int | None:
    """Milliseconds of a time argument, or None if ``text`` is an entry id."""
    if _ID.match(text):
        return None
    if _MS.match(text):
        return int(text)
    if _SECONDS.match(text):
        return int(float(text) * 1000)
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BoundError(f"{text!r} is neither a log id (like 1714557600000-0) nor a time "
                         "(like 2024-05-01T10:00:00Z or seconds since the epoch)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp() * 1000)


def upper(text: str) -> str:
    """The last log id an inclusive ``--until`` bound admits."""
    ms = _ms_of(text.strip())
    return text.strip() if ms is None else f"{ms}-{MAX_SEQ}"


def lower(text: str) -> str:
    """The first log id an inclusive ``--since`` bound admits."""
    ms = _ms_of(text.strip())
    return text.strip() if ms is None else f"{ms}-0"


def duration(text: str) -> float:
    """Seconds of ``90s``, ``10m``, ``2h``, ``7d``, ``1h30m``, ``500ms`` or a bare number of
    seconds."""
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise BoundError(f"{text!r} is not a duration (like 90s, 10m, 2h, 7d or 1h30m)")
    return total


def id_seconds(entry_id: str) -> float:
    """The commit time of a log id, in seconds since the epoch."""
    ms, _, _ = entry_id.partition("-")
    try:
        return int(ms) / 1000.0
    except ValueError:
        return 0.0


def seconds_time(seconds: float) -> str:
    """A time in seconds since the epoch as RFC 3339 with milliseconds
    (``…T10:00:00.123Z``)."""
    when = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def id_time(entry_id: str) -> str:
    """The commit time of a log id, as ``seconds_time`` writes it."""
    return seconds_time(id_seconds(entry_id))
