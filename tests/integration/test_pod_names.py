"""A pod recreated on a node gets a new name, as upstream's ``generateName`` gives one
(pod control creates with ``generateName: <ds-name>-``, the API server appends 5 random
characters: apimachinery pkg/storage/names/generate.go), through the CLI on a running stack;
the decision that named it is recorded, so ``why`` finds it and ``replay --verify``
recomputes the same name."""

from __future__ import annotations

from pathlib import Path

from shared.model import meta
from shared.model.podutil import target_node
from tests.integration import gcstack
from tests.integration.stack import Stack, wait_for


def test_a_pod_deleted_and_recreated_on_its_node_comes_back_under_a_new_name(
        stack: Stack, tmp_path: Path) -> None:
    stack.start_all(workers=1, nodes=2)
    wait_for(lambda: len(stack.store.list("Node")) == 2, what="2 nodes")
    ds = gcstack.apply(stack, "names")
    first = next(p for p in gcstack.ready_pods(stack, meta.uid(ds), 2)
                 if target_node(p) == "node-00001")

    res = gcstack.run(stack, "delete", "pod", meta.name(first))
    assert res.exit_code == 0, res.output

    def replacement() -> dict | None:
        return next((p for p in gcstack.owned(stack, "Pod", meta.uid(ds))
                     if target_node(p) == "node-00001" and meta.uid(p) != meta.uid(first)
                     and not meta.is_being_deleted(p)), None)

    second = wait_for(replacement, what="the pod recreated on node-00001")
    name = meta.name(second)
    assert name != meta.name(first)
    assert name.startswith("names-") and len(name) == len("names-") + 5
    assert set(name[len("names-"):]) <= set(meta.NAME_ALPHABET)

    why = gcstack.run(stack, "why", f"pod/{name}")
    assert why.exit_code == 0, why.output
    assert f"uid {meta.uid(second)}" in why.output and "by decision " in why.output

    path = tmp_path / "names.dblog"
    assert gcstack.run(stack, "log", "export", str(path)).exit_code == 0
    verified = gcstack.run(stack, "replay", str(path), "--verify")
    assert verified.exit_code == 0, verified.output
    assert "no divergence" in verified.output
