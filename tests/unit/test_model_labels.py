"""Label selectors: LabelSelector matching, kubectl ``-l`` parsing, kubectl column rendering."""

from __future__ import annotations

import pytest

from shared.model import labels

# ---- LabelSelector dicts ------------------------------------------------------------------


def test_nil_selector_matches_nothing_and_empty_selector_everything() -> None:
    assert not labels.selector_matches(None, {"a": "b"})
    assert labels.selector_matches({}, {"a": "b"})
    assert labels.is_empty_selector({})
    assert not labels.is_empty_selector(None)


def test_selector_matches_labels_and_expressions() -> None:
    sel = {
        "matchLabels": {"app": "x"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "zone", "operator": "Exists"},
            {"key": "gone", "operator": "DoesNotExist"},
        ],
    }
    assert labels.selector_matches(sel, {"app": "x", "tier": "a", "zone": "z"})
    assert not labels.selector_matches(sel, {"app": "x", "tier": "c", "zone": "z"})
    assert not labels.selector_matches(sel, {"app": "x", "tier": "a", "zone": "z", "gone": ""})


def test_selector_matches_tolerates_malformed_selectors() -> None:
    assert not labels.selector_matches({"matchLabels": "app=x"}, {"app": "x"})
    assert not labels.selector_matches({"matchExpressions": [{"key": "a", "operator": "Foo"}]}, {})


def test_selector_from_label_selector_converts_like_upstream() -> None:
    sel = labels.selector_from_label_selector(
        {"matchLabels": {"b": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]}
    )
    assert str(sel) == "a,b=1"
    assert labels.selector_from_label_selector(None).nothing
    assert labels.selector_from_label_selector({}).empty()


def test_selector_from_label_selector_rejects_an_invalid_operator() -> None:
    with pytest.raises(ValueError, match='"Foo" is not a valid label selector operator'):
        labels.selector_from_label_selector({"matchExpressions": [{"key": "a", "operator": "Foo"}]})


# ---- kubectl -l strings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("a=b", "a=b"),
        ("a==b", "a==b"),
        ("a!=b", "a!=b"),
        ("a in (y,x)", "a in (x,y)"),
        ("a notin (x)", "a notin (x)"),
        ("a", "a"),
        ("!a", "!a"),
        ("a>1", "a>1"),
        ("b=1, a in (x), !c", "a in (x),b=1,!c"),
        (" a = b ", "a=b"),
        ("a in (in)", "a in (in)"),
        ("", ""),
    ],
)
def test_parse_selector_accepts_kubectl_syntax(text: str, rendered: str) -> None:
    assert str(labels.parse_selector(text)) == rendered


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a,", "found '', expected: identifier after ','"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        (
            "a>x",
            'unable to parse requirement: values[0]: Invalid value: "x": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_parse_selector_rejects_bad_syntax_with_upstreams_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        labels.parse_selector(text)
    assert str(err.value) == message


def test_parse_selector_rejects_an_invalid_key() -> None:
    with pytest.raises(
        ValueError, match=r'^unable to parse requirement: <nil>: Invalid value: "-a"'
    ):
        labels.parse_selector("-a=b")


def test_parse_selector_rejects_an_invalid_value() -> None:
    with pytest.raises(ValueError, match=r'values\[0\]\[a\]: Invalid value: "b\.": a valid label'):
        labels.parse_selector("a=b.")


@pytest.mark.parametrize(
    ("text", "lbls", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a in (x,y)", {"a": "y"}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a>3", {"a": "4"}, True),
        ("a<3", {"a": "x"}, False),
        ("a=b,c", {"a": "b"}, False),
        ("", {}, True),
    ],
)
def test_selector_matches(text: str, lbls: dict[str, str], expected: bool) -> None:
    assert labels.parse_selector(text).matches(lbls) is expected


# ---- kubectl columns ---------------------------------------------------------------------


def test_format_selector_renders_like_kubectls_selector_column() -> None:
    assert labels.format_selector({"matchLabels": {"k8s-app": "fluentd-logging"}}) == (
        "k8s-app=fluentd-logging"
    )
    sel = {
        "matchLabels": {"b": "c"},
        "matchExpressions": [{"key": "a", "operator": "In", "values": ["y", "x"]}],
    }
    assert labels.format_selector(sel) == "a in (x,y),b=c"


def test_format_selector_none_and_error() -> None:
    assert labels.format_selector({}) == "<none>"
    assert labels.format_selector(None) == "<none>"
    assert (
        labels.format_selector({"matchExpressions": [{"key": "a", "operator": "X"}]}) == "<error>"
    )


def test_format_labels() -> None:
    assert labels.format_labels({"kubernetes.io/os": "linux"}) == "kubernetes.io/os=linux"
    assert labels.format_labels({"b": "2", "a": "1"}) == "a=1,b=2"
    assert labels.format_labels({}) == "<none>"
    assert labels.format_labels(None) == "<none>"
