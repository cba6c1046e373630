"""Resource quantities read and written back as the API server does (apimachinery's
``resource.Quantity``): the canonical text, the rounding of resource lists to milli units,
upstream's refusal of what does not parse, and the validation of a container's resources."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import writes
from shared.model import defaults, errors, quantity
from shared.model import validation as model_validation


@pytest.mark.parametrize(("given", "text"), [
    ("1000m", "1"), ("0.5", "500m"), (0.5, "500m"), (2.5, "2500m"), (1, "1"), (1.0, "1"),
    ("1000", "1k"), ("1500", "1500"), ("0.1", "100m"), ("0.1234567891", "123456790n"),
    ("100M", "100M"), ("1e3", "1e3"), ("1.5e3", "1500"), ("10e-4", "1e-3"),
    ("100Mi", "100Mi"), ("104857600Ki", "100Gi"), ("1.5Gi", "1536Mi"), ("0.5Gi", "512Mi"),
    ("2048Ki", "2Mi"), ("16331260Ki", "16331260Ki"), ("0Mi", "0"), ("-1", "-1"),
    ("10E", "9223372036854775807"),  # bounded by the largest int64, as upstream bounds it
    ("+1", "+1"), ("10e0", "10e0"),  # already canonical by ParseQuantity's rule: kept as given
])
def test_canonical_text_is_upstreams(given: Any, text: str) -> None:
    assert quantity.canonical(given) == text


@pytest.mark.parametrize(("given", "text"), [
    ("0.0001", "1m"), ("1n", "1m"), ("0.1234567891", "124m"), ("250m", "250m"),
    ("100Mi", "100Mi"),
])
def test_resource_lists_round_up_to_milli_units(given: str, text: str) -> None:
    assert quantity.canonical_milli(given) == text


@pytest.mark.parametrize("bad", ["lots", "1.2.3", "", "m", "1x", "1Kii", "--1", " 1", "1e",
                                 "e3", True, None, [1]])
def test_what_does_not_parse_is_refused_with_upstreams_words(bad: Any) -> None:
    with pytest.raises(ValueError, match="quantities must match the regular expression"):
        quantity.parse(bad)


def _ds(resources: dict[str, Any], volumes: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x:1",
                                            "resources": resources}]}
    if volumes is not None:
        spec["volumes"] = volumes
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}}}


def test_a_write_stores_quantities_canonical() -> None:
    obj = writes.create(_ds({"limits": {"cpu": 2.5, "memory": "1024Mi"},
                             "requests": {"cpu": "0.0001"}},
                            [{"name": "v", "emptyDir": {"sizeLimit": "0.0001"}}]), 0.0).obj
    spec = obj["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"] == {"limits": {"cpu": "2500m", "memory": "1Gi"},
                                                  "requests": {"cpu": "1m"}}
    assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "100u"  # a field, not a list


def test_a_quantity_that_does_not_parse_fails_the_decode() -> None:
    with pytest.raises(errors.BadRequestError) as err:
        writes.create(_ds({"limits": {"cpu": "lots"}}), 0.0)
    assert str(err.value).startswith('DaemonSet in version "v1" cannot be handled as a '
                                     "DaemonSet: quantities must match the regular expression")


@pytest.mark.parametrize(("resources", "message"), [
    ({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}},
     'resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ({"requests": {"cpu": "-1"}},
     'resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ({"requests": {"cpuu": "1"}},
     'resources.requests[cpuu]: Invalid value: "cpuu": must be a standard resource for '
     "containers"),
    ({"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}},
     'resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2'),
    ({"limits": {"example.com/gpu": "0.5"}},
     'resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer'),
    ({"requests": {"example.com/gpu": "1"}},
     "resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ({"limits": {"hugepages-2Mi": "2Mi"}},
     "resources: Forbidden: HugePages require cpu or memory"),
])
def test_container_resources_are_validated(resources: dict[str, Any], message: str) -> None:
    errs = model_validation.validate(defaults.default(_ds(resources)))
    assert any(e.endswith(message) and e.startswith("spec.template.spec.containers[0].")
               for e in errs), errs


def test_requests_within_limits_are_valid() -> None:
    obj = writes.create(_ds({"limits": {"cpu": "2", "memory": "1Gi", "example.com/gpu": 1},
                             "requests": {"cpu": "500m", "memory": "1Gi",
                                          "example.com/gpu": 1}}), 0.0).obj
    assert obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == \
        {"cpu": "2", "memory": "1Gi", "example.com/gpu": "1"}


def test_milli_rounding_keeps_the_text_written_at_milli_scale_or_coarser() -> None:
    assert quantity.canonical_milli("+100m") == "+100m"  # upstream keeps the text it kept
    assert quantity.canonical_milli("1e-4") == "1e-3" and quantity.canonical("1e-4") == "100e-6"
