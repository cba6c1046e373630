"""Go's ``strconv.ParseInt(s, 10, 64)``, as the API server parses the DaemonSet's
``deprecated.daemonset.template.generation`` annotation (pkg/apis/apps/v1/conversion.go)."""

from __future__ import annotations

import pytest

from shared.model import syntax


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("7", 7), ("007", 7), ("+4", 4), ("-3", -3), ("-0", 0),
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
])
def test_parse_int64_accepts_a_sign_and_decimal_digits(text: str, value: int) -> None:
    assert syntax.parse_int64(text) == value


@pytest.mark.parametrize(("text", "message"), [
    # strconv.NumError{Func: "ParseInt", Num: s, Err: ErrSyntax | ErrRange}.Error()
    ("", 'strconv.ParseInt: parsing "": invalid syntax'),
    ("+", 'strconv.ParseInt: parsing "+": invalid syntax'),
    ("abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ("1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),  # underscores: base 0 only
    (" 1", 'strconv.ParseInt: parsing " 1": invalid syntax'),
    ("1\n", 'strconv.ParseInt: parsing "1\\n": invalid syntax'),
    ("0x10", 'strconv.ParseInt: parsing "0x10": invalid syntax'),
    ("٣", 'strconv.ParseInt: parsing "٣": invalid syntax'),  # ASCII digits only
    ("9223372036854775808", 'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ("-9223372036854775809",
     'strconv.ParseInt: parsing "-9223372036854775809": value out of range'),
    # ParseUint reads the digits as a uint64 first: its overflow wins over a later bad byte,
    # an int64 overflow alone does not
    ("99999999999999999999x",
     'strconv.ParseInt: parsing "99999999999999999999x": value out of range'),
    ("9999999999999999999x", 'strconv.ParseInt: parsing "9999999999999999999x": invalid syntax'),
])
def test_parse_int64_errors_read_as_go_prints_them(text: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        syntax.parse_int64(text)
    assert str(exc.value) == message
