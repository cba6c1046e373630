"""IntOrString resolution (spec §a.6) and the numeric value of validation rule 9."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import intorstr


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        ("50%", 3, 2),
        ("10%", 15, 2),
        ("1%", 1, 1),
        ("0%", 7, 0),
        ("100%", 2, 2),
        (3, 100, 3),
        (0, 5, 0),
    ],
)
def test_scaled_value_rounds_percentages_up(value: Any, total: int, expected: int) -> None:
    assert intorstr.scaled_value(value, total) == expected


def test_scaled_value_rounds_down_when_asked() -> None:
    assert intorstr.scaled_value("50%", 3, round_up=False) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "nil value for IntOrString"),
        ("5", "string is not a percentage"),
        ("x%", 'invalid value "x%"'),
        (True, "neither int nor percentage"),
        (1.5, "neither int nor percentage"),
    ],
)
def test_scaled_value_rejects_invalid_values(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        intorstr.scaled_value(value, 10)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("10%", 10), ("0%", 0), (3, 3), ("5", 5), ("abc", 0), ("5%%", 0), (None, 0), (1.5, 0)],
)
def test_numeric_value(value: Any, expected: int) -> None:
    assert intorstr.numeric_value(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # %#v of intstr.IntOrString{Type, IntVal, StrVal} (apimachinery util/intstr: Int = 0,
        # String = 1; FromInt/FromString leave the other field zero)
        (1, 'intstr.IntOrString{Type:0, IntVal:1, StrVal:""}'),
        (-3, 'intstr.IntOrString{Type:0, IntVal:-3, StrVal:""}'),
        ("101%", 'intstr.IntOrString{Type:1, IntVal:0, StrVal:"101%"}'),
        ('a"b', 'intstr.IntOrString{Type:1, IntVal:0, StrVal:"a\\"b"}'),
        (None, 'intstr.IntOrString{Type:0, IntVal:0, StrVal:""}'),
    ],
)
def test_go_literal_prints_the_struct_as_go_does(value: Any, expected: str) -> None:
    assert intorstr.go_literal(value) == expected
