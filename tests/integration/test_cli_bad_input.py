"""Hostile manifests at ``daemonbus apply`` against a real Redis: each gets one line (or
kubectl's multi-error block) naming what is wrong, quickly, with long values cut and control
characters escaped, and nothing of it is written; the valid documents beside it are applied
(as kubectl does). Then thousands of generated manifests, from a fixed seed."""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from services.cli import context
from services.cli.main import cli
from shared.api import decode
from shared.store import client as store_client
from shared.store.keys import Keys
from tests.integration.test_store_fuzz import _paths

Obj = dict[str, Any]

GOOD = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: c, image: "img:1"}]
"""
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def good(name: str, extra: str = "") -> str:
    return GOOD.replace("NAME", name).replace("  selector:", extra + "  selector:")


def bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def store(redis_url: str, prefix: str) -> store_client.Store:
    return store_client.Store(store_client.connect(redis_url), Keys(prefix))


@pytest.fixture
def apply(store: store_client.Store) -> Any:
    """``daemonbus apply -f -`` of a text, in-process, on the test's store (connected once:
    a connection per run would be most of the fuzz test's time); its result, and the
    seconds it took: elapsed, and of this process's CPU (the bound checked, as other work
    on a loaded machine stretches the elapsed time)."""
    def invoke(text: str) -> tuple[Result, float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        result = CliRunner().invoke(
            cli, ["apply", "-f", "-"], obj=context.CliEnv(_store=store),
            input=text.encode("utf-8", "surrogatepass"), catch_exceptions=False)
        return result, time.perf_counter() - started, time.process_time() - cpu
    return invoke


def log_length(store: store_client.Store) -> int:
    return int(store.r.xlen(store.keys.log))


CASES = [
    ("deep-yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n", "exceeded maximum nesting depth"),
    ("deep-yaml-indented",
     "".join("  " * i + f"k{i}:\n" for i in range(150)) + "  " * 150 + "v\n",
     "line 101: exceeded max depth of 100"),
    ("deep-json", "[" * 100_000 + "]" * 100_000, "json: exceeded max depth of 100"),
    ("alias-bomb", bomb(), "yaml: document contains excessive aliasing"),
    ("duplicate-key", good("dup", "  minReadySeconds: 1\n  minReadySeconds: 2\n"),
     'yaml: unmarshal errors:\n  line 6: key "minReadySeconds" already set in map'),
    ("duplicate-json-key", '{"kind": "DaemonSet", "kind": "Pod"}', 'json: duplicate field "kind"'),
    ("too-big-to-send", good("big").replace("{app: x}}", "{app: x}, annotations: {a: '"
                                            + "x" * (3 << 20) + "'}}", 1),
     "a document of 3.0 MiB is larger than the 3.0 MiB an API request may carry"),
    ("too-big-to-store", good("big").replace(
        'containers: [{name: c, image: "img:1"}]', "containers: [" + ", ".join(
            f'{{name: c{i}, image: "img:1", args: ["{"y" * 1000}"]}}' for i in range(1600))
        + "]"),
     'Error from server: error when creating "STDIN": etcdserver: request is too large'),
    ("unknown-field", good("unk", "  foo: 1\n"),
     'Error from server (BadRequest): error when creating "STDIN": DaemonSet in version '
     '"v1" cannot be handled as a DaemonSet: strict decoding error: unknown field "spec.foo"'),
    ("control-characters", good("x\x1b[2J"), "control characters are not allowed"),
    ("escape-in-a-value", good("esc").replace("namespace: default}",
                                              'namespace: default, labels: {a: "x\\e[2Jy"}}'),
     'metadata.labels: Invalid value: "x\\x1b[2Jy"'),
    ("long-value", good("long").replace("namespace: default}", "namespace: default, labels: "
                                        "{a: " + "v" * 100_000 + "}}"),
     'metadata.labels: Invalid value: "' + "v" * 511 + '...(99490 more characters): must be '
     "no more than 63 characters"),
    ("bad-separator", good("s1") + "--- {a: 1}\n" + good("s2"),
     "invalid Yaml document separator: {a: 1}"),
    ("unknown-tag", "a: !foo bar\n", "could not determine a constructor for the tag '!foo'"),
    ("impossible-date", "a: 2020-13-45\n", "month must be in 1..12"),
    ("garbage-timestamp", good("ts").replace("namespace: default}",
                                             "namespace: default, deletionTimestamp: garbage}"),
     'Error from server (BadRequest): error when creating "STDIN": DaemonSet in version "v1" '
     'cannot be handled as a DaemonSet: parsing time "garbage" as '
     '"2006-01-02T15:04:05Z07:00": cannot parse "garbage" as "2006"'),
    ("not-a-mapping", "- a\n- b\n", "a manifest document must be a mapping, got list"),
]


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in CASES],
                         ids=[n for n, _, _ in CASES])
def test_bad_input_gets_one_clear_message_quickly_and_writes_nothing(
        apply: Any, store: store_client.Store, text: str, expected: str) -> None:
    before = log_length(store)
    result, seconds, cpu = apply(text)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert expected in result.stderr, result.stderr[:2000]
    assert "Traceback" not in result.stderr
    assert not RAW_CONTROL.search(result.stderr)
    assert len(result.stderr) < 4096, result.stderr[:2000]
    assert cpu < 1.0 and seconds < 10.0
    assert log_length(store) == before


def test_a_multi_document_apply_applies_the_valid_ones_and_reports_each_bad_one(
        apply: Any, store: store_client.Store) -> None:
    text = "---\n".join([good("m1"), good("m2", "  bar: 1\n"), good("m3"),
                         good("m4", "  minReadySeconds: -1\n")])
    result, _seconds, _cpu = apply(text)
    assert result.exit_code == 1
    assert result.stdout == "daemonset.apps/m1 created\ndaemonset.apps/m3 created\n"
    assert result.stderr.splitlines() == [
        'Error from server (BadRequest): error when creating "STDIN": DaemonSet in version '
        '"v1" cannot be handled as a DaemonSet: strict decoding error: unknown field '
        '"spec.bar"',
        'The DaemonSet "m4" is invalid: spec.minReadySeconds: Invalid value: -1: must be '
        "greater than or equal to 0"]
    assert {k.decode() for k in store.r.hkeys(store.keys.objects("DaemonSet"))} == {
        "default/m1", "default/m3"}
    assert log_length(store) == 2


def test_a_parse_error_keeps_the_documents_before_it_as_kubectls_reader_does(
        apply: Any, store: store_client.Store) -> None:
    result, _seconds, _cpu = apply(good("p1") + "---\n" + "a: [1\n" + "---\n" + good("p2"))
    assert result.exit_code == 1
    assert result.stdout == "daemonset.apps/p1 created\n"
    assert result.stderr.startswith("error: error parsing STDIN: error converting YAML to "
                                     "JSON: yaml: line 2: ")
    assert log_length(store) == 1


# ---- the fuzz test ----------------------------------------------------------------------

SEED = 20261201
FUZZ_CASES = 2000

_VALUES: list[Any] = [None, True, 0, -1, 2**31, 2**70, 1.5, float("nan"), "", "x", "x" * 300,
                      "\x1b[31mred\x07", "日本", [], [1], ["a"], {}, {"a": 1}, {"k": [{}]},
                      "2020-01-01", "100%", "-5%"]


def _mutate(rng: random.Random, obj: Obj) -> None:
    paths = [p for p in _paths(obj) if p]
    path = rng.choice(paths)
    parent: Any = obj
    for step in path[:-1]:
        parent = parent[step]
    roll = rng.random()
    if roll < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    elif roll < 0.35 and isinstance(parent, dict):
        parent[rng.choice(["foo", "imagePullPolicyy", "x\x01y", "status"])] = rng.choice(_VALUES)
    else:
        parent[path[-1]] = rng.choice(_VALUES)


def _text(rng: random.Random, obj: Obj) -> str:
    text = json.dumps(obj) if rng.random() < 0.2 else yaml.safe_dump(obj, allow_unicode=True)
    roll = rng.random()
    lines = text.splitlines(keepends=True)
    if roll < 0.06 and len(lines) > 2:  # a key twice
        i = rng.randrange(1, len(lines))
        text = "".join([*lines[:i], lines[i], *lines[i:]])
    elif roll < 0.10:
        text = "a: " + "[" * rng.randrange(50, 3000) + "\n"
    elif roll < 0.13:
        text = bomb(rng.randrange(3, 10))
    elif roll < 0.17:
        text = text + "--- " + rng.choice(["{a: 1}", "x", "# fine"]) + "\n" + text
    elif roll < 0.22:
        text = text[:rng.randrange(len(text))]
    elif roll < 0.26:
        tag = rng.choice(["!!binary", "!!set", "!foo", "!!python/object:os.system", "!!omap",
                          "!!timestamp", "!!float"])
        text = text.replace("app: x", f"app: {tag} x", 1)
    elif roll < 0.30:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["\x1b", "\x00", "\t", "\ufeff", "\udc80", "&a", "*b",
                                      "{", "'", '"', "%", "@"]) + text[i:]
    elif roll < 0.40:
        text = text + "---\n" + good(f"fuzz-valid-{rng.randrange(1000)}")
    return text


def _case(rng: random.Random, n: int) -> str:
    obj = yaml.safe_load(good(f"fuzz-{n}"))
    for _ in range(rng.randrange(0, 4)):
        _mutate(rng, obj)
    return _text(rng, obj)


def test_thousands_of_generated_manifests_are_applied_or_refused_cleanly(
        apply: Any, store: store_client.Store) -> None:
    """From a fixed seed: every manifest ends with exit code 0 (all applied) or 1 (each bad
    document reported, on stderr), never a traceback; messages are bounded and carry no raw
    control characters; every document applied wrote one log entry and a refused one none;
    each case takes well under a second of this process's time."""
    rng = random.Random(SEED)
    worst = 0.0
    outcomes = {0: 0, 1: 0}
    for n in range(FUZZ_CASES):
        text = _case(rng, n)
        before = log_length(store)
        result, _seconds, cpu = apply(text)
        worst = max(worst, cpu)
        assert result.exit_code in (0, 1), (text[:500], result.output[:500])
        outcomes[result.exit_code] += 1
        assert "Traceback" not in result.output
        assert not RAW_CONTROL.search(result.output), (text[:500], result.output[:500])
        assert len(result.stderr) <= 2 * 64 * 1024
        if result.exit_code == 1:
            assert result.stderr.strip(), text[:500]
        else:
            assert result.stderr == ""
        written = sum(1 for line in result.stdout.splitlines()
                      if line.endswith((" created", " configured")))
        assert log_length(store) - before == written, (text[:500], result.output[:500])
        assert cpu < 1.0, (text[:300], cpu)
    print(f"{FUZZ_CASES} generated manifests: {outcomes[0]} applied, {outcomes[1]} refused; "
          f"the slowest took {worst * 1000:.0f} ms of CPU")
    assert outcomes[0] > FUZZ_CASES // 20 and outcomes[1] > FUZZ_CASES // 4


def test_the_bounds_are_the_documented_ones() -> None:
    assert decode.MAX_DOCUMENT_BYTES == 3 * 1024 * 1024  # the API server's request limit
    assert store_client.MAX_OBJECT_BYTES == 1536 * 1024  # etcd's request limit
