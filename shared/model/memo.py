"""Validators remembered by value. Pure (but for a bounded cache).

A validator ``fn(value, path, errs)`` is a pure function of the JSON value and its path, and
many values repeat: every pod of a DaemonSet carries the same tolerations, labels and owner
references, and every reader of the log (each process tails it) checks each entry's shape with
the validators (``shape_errors``), so the same value is validated thousands of times. The
cache key is the value packed by msgpack with exact types, so only values of identical types
and contents share an entry (``1``, ``1.0`` and ``True`` differ, as do NaN and ``null``, a str
and bytes, a list and a tuple: what the packer cannot tell apart it refuses, and that value
is validated directly).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgpack

Validator = Callable[[Any, str, list[str]], None]

MAX_ENTRIES = 4096  # per validator; the cache starts over when full


def by_value(fn: Validator) -> Validator:
    """``fn`` with its errors remembered per (value, path)."""
    memo: dict[tuple[bytes, str], tuple[str, ...]] = {}

    @functools.wraps(fn)
    def validate(value: Any, path: str, errs: list[str]) -> None:
        try:
            key = (msgpack.packb(value, strict_types=True), path)
        except (TypeError, ValueError, OverflowError):
            fn(value, path, errs)
            return
        found = memo.get(key)
        if found is None:
            out: list[str] = []
            fn(value, path, out)
            found = tuple(out)
            if len(memo) >= MAX_ENTRIES:
                memo.clear()
            memo[key] = found
        errs.extend(found)

    return validate
