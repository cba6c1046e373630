"""Name and value syntax checks of apimachinery's ``util/validation`` package. Pure.

Each ``is_*`` function returns the list of problems with a value, worded exactly as upstream
(an empty list means valid). Lengths are in UTF-8 bytes, like Go's ``len``.
"""

from __future__ import annotations

import ipaddress
import re

from shared.model import fielderr

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
PORT_NAME_MAX_LENGTH = 15
MAX_INT32 = 2**31 - 1

_QNAME_CHAR_FMT = "[A-Za-z0-9]"
_QNAME_EXT_CHAR_FMT = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = "(" + _QNAME_CHAR_FMT + _QNAME_EXT_CHAR_FMT + "*)?" + _QNAME_CHAR_FMT
_QUALIFIED_NAME_ERR_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_ERR_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
PERCENT_FMT = "[0-9]+%"
_PERCENT_ERR_MSG = "a valid percent string must be a numeric string followed by an ending '%'"

_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)
_DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)
_PERCENT_RE = re.compile(PERCENT_FMT)
_PORT_NAME_CHARSET_RE = re.compile("[-a-z0-9]+")
_PORT_NAME_ONE_LETTER_RE = re.compile("[a-z]")


def parse_int64(text: str) -> int:
    """Go's ``strconv.ParseInt(text, 10, 64)``: an optional sign and ASCII digits, within
    int64. Raises ValueError with Go's message (``strconv.ParseInt: parsing "x": invalid
    syntax`` / ``...: value out of range``). As in Go, the digits are read as a uint64 first
    (an overflow of that is reported even when a bad character follows it), then the int64
    range is checked."""
    body = text[1:] if text[:1] in ("+", "-") else text
    negative = text[:1] == "-"
    quoted = fielderr.go_quote(text)
    if not body:
        raise ValueError(f"strconv.ParseInt: parsing {quoted}: invalid syntax")
    number = 0
    for ch in body:
        if not ("0" <= ch <= "9"):
            raise ValueError(f"strconv.ParseInt: parsing {quoted}: invalid syntax")
        number = number * 10 + ord(ch) - ord("0")
        if number >= 2**64:
            raise ValueError(f"strconv.ParseInt: parsing {quoted}: value out of range")
    if number > (2**63 if negative else 2**63 - 1):
        raise ValueError(f"strconv.ParseInt: parsing {quoted}: value out of range")
    return -number if negative else number


RFC3339 = "2006-01-02T15:04:05Z07:00"
_DAYS_IN = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _num(value: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: one or two digits (exactly two when ``fixed``)."""
    if not value[:1].isdigit() or not value[:1].isascii():
        return None
    if not (value[1:2].isdigit() and value[1:2].isascii()):
        return None if fixed else (int(value[0]), value[1:])
    return int(value[:2]), value[2:]


def parse_rfc3339(text: str) -> None:
    """Go's ``time.Parse(time.RFC3339, text)`` (how ``metav1.Time`` decodes): raises
    ValueError with Go's message (``parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot
    parse "x" as "2006"``, ``parsing time "…": month out of range``). Decides."""
    quoted = fielderr.go_quote(text)

    def bad(rest: str, element: str) -> ValueError:
        return ValueError(f"parsing time {quoted} as {fielderr.go_quote(RFC3339)}: cannot "
                          f"parse {fielderr.go_quote(rest)} as {fielderr.go_quote(element)}")

    def out_of_range(what: str) -> ValueError:
        return ValueError(f"parsing time {quoted}: {what} out of range")

    value = text
    if len(value) < 4 or not value[:4].isdigit() or not value[:4].isascii():
        raise bad(value, "2006")
    year, value = int(value[:4]), value[4:]
    fields: list[int] = []
    for sep, element, fixed, hi, what in (("-", "01", True, 12, "month"),
                                          ("-", "02", True, 31, ""),
                                          ("T", "15", False, 23, "hour"),
                                          (":", "04", True, 59, "minute"),
                                          (":", "05", True, 59, "second")):
        if not value.startswith(sep):
            raise bad(value, sep)
        value = value[1:]
        got = _num(value, fixed)
        if got is None:
            raise bad(value, element)
        n, value = got
        low = 1 if what == "month" else 0
        if what and not low <= n <= hi:
            raise out_of_range(what)
        fields.append(n)
    if len(value) >= 2 and value[0] in ".," and value[1].isdigit():
        n = 1
        while n < len(value) and value[n].isdigit() and value[n].isascii():
            n += 1
        value = value[n:]
    if value.startswith("Z"):
        value = value[1:]
    else:
        hh, mm = _num(value[1:3], True), _num(value[4:6], True)
        if len(value) < 6 or value[3] != ":" or value[0] not in "+-" or hh is None \
                or mm is None:
            raise bad(value, "Z07:00")
        if hh[0] > 24:
            raise out_of_range("time zone offset hour")
        if mm[0] > 60:
            raise out_of_range("time zone offset minute")
        value = value[6:]
    if value:
        raise ValueError(f"parsing time {quoted}: extra text: {fielderr.go_quote(value)}")
    month, day = fields[0], fields[1]
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day < 1 or day > _DAYS_IN[month - 1] + (1 if month == 2 and leap else 0):
        raise out_of_range("day")


def byte_len(s: str) -> int:
    """Go's ``len(s)``: the UTF-8 length (lone surrogates count as 3 bytes)."""
    return len(s.encode("utf-8", "surrogatepass"))


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError``, including its double space before "or" with 2+ examples."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += f"'{ex}', "
    return msg + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def empty_error() -> str:
    return "must be non-empty"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def is_qualified_name(value: str) -> list[str]:
    """A label key / annotation key: ``[prefix/]name``, prefix a DNS-1123 subdomain."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(
                _QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif byte_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part "
            + regex_error(
                _QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"
            )
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if byte_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(
            regex_error(_LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            # a valid subdomain but not a valid label: length is checked, so it must be dots
            errs.append("must not contain dots")
        else:
            errs.append(
                regex_error(_DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc")
            )
    return errs


DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_RE = re.compile(DNS1035_LABEL_FMT)
_DNS1035_LABEL_ERR_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character")


def is_dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``: a Service's name."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(regex_error(_DNS1035_LABEL_ERR_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_valid_ip(value: str) -> list[str]:
    """``IsValidIP``: an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    return []


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


CONFIG_MAP_KEY_FMT = r"[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_RE = re.compile(CONFIG_MAP_KEY_FMT)
_CONFIG_MAP_KEY_ERR_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'")


def is_config_map_key(value: str) -> list[str]:
    """``IsConfigMapKey``: a key of a ConfigMap's ``data``/``binaryData`` (a file name in a
    volume: no ``.`` or ``..``, nothing starting with ``..``, the atomic writer's names)."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _CONFIG_MAP_KEY_RE.fullmatch(value):
        errs.append(regex_error(_CONFIG_MAP_KEY_ERR_MSG, CONFIG_MAP_KEY_FMT,
                                "key.name", "KEY_NAME", "key-name"))
    if value in (".", ".."):
        errs.append(f"must not be '{value}'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': upstream swaps its last two bytes for 'a'."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    """``NameIsDNSSubdomain``: object names of most kinds (prefix: a generateName)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    """``NameIsDNS1035Label``: Service names."""
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    """``NameIsDNSLabel``: namespace names."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def is_valid_path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """``ValidatePathSegmentName``: the minimal rule every object name must satisfy."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def is_valid_percent(value: str) -> list[str]:
    if not _PERCENT_RE.fullmatch(value):
        return [regex_error(_PERCENT_ERR_MSG, PERCENT_FMT, "1%", "93%")]
    return []


def is_valid_port_num(port: int) -> list[str]:
    if 1 <= port <= 65535:
        return []
    return [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """An IANA_SVC_NAME (container port names)."""
    errs: list[str] = []
    if byte_len(port) > PORT_NAME_MAX_LENGTH:
        errs.append(max_len_error(PORT_NAME_MAX_LENGTH))
    if not _PORT_NAME_CHARSET_RE.fullmatch(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_ONE_LETTER_RE.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs
