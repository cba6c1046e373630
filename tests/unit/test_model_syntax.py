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


@pytest.mark.parametrize("text", ["2020-01-01T00:00:00Z", "2024-02-29T23:59:59.123456Z",
                                  "2020-01-01T00:00:00+01:00", "2020-01-01T1:02:03-05:30"])
def test_parse_rfc3339_accepts_what_go_time_parse_accepts(text: str) -> None:
    syntax.parse_rfc3339(text)


@pytest.mark.parametrize(("text", "message"), [
    # time.ParseError.Error(), layout time.RFC3339 (metav1.Time.UnmarshalJSON)
    ("garbage", 'parsing time "garbage" as "2006-01-02T15:04:05Z07:00": cannot parse '
                '"garbage" as "2006"'),
    ("2020-01-01", 'parsing time "2020-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse '
                   '"" as "T"'),
    ("2020-1-01T00:00:00Z", 'parsing time "2020-1-01T00:00:00Z" as "2006-01-02T15:04:05Z07:00"'
                            ': cannot parse "1-01T00:00:00Z" as "01"'),
    ("2020-01-01T00:00:00+0100", 'parsing time "2020-01-01T00:00:00+0100" as '
                                 '"2006-01-02T15:04:05Z07:00": cannot parse "+0100" as '
                                 '"Z07:00"'),
    ("2020-13-01T00:00:00Z", 'parsing time "2020-13-01T00:00:00Z": month out of range'),
    ("2023-02-29T00:00:00Z", 'parsing time "2023-02-29T00:00:00Z": day out of range'),
    ("2020-01-01T24:00:00Z", 'parsing time "2020-01-01T24:00:00Z": hour out of range'),
    ("2020-01-01T00:00:00Zx", 'parsing time "2020-01-01T00:00:00Zx": extra text: "x"'),
])
def test_parse_rfc3339_errors_read_as_go_prints_them(text: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        syntax.parse_rfc3339(text)
    assert str(exc.value) == message
