"""The object store in memory: the twin of ``shared.store.client.Store``'s reads, for unit
tests of semantics (both pass ``tests/integration/test_object_store_contract.py``). Acts on
itself only."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Sequence

from shared.api.ports import Obj
from shared.eventlog.ports import NO_POSITION
from shared.model import meta
from shared.model.errors import NotFoundError


class InMemoryObjectStore:
    """Objects by kind and key; each write is one log entry (ids ``"<n>-0"``, rising), whose
    id becomes the object's resourceVersion and the tip. Every read is a copy."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Obj]] = {}
        self.tip = NO_POSITION
        self._entries = 0

    def _next(self) -> str:
        self._entries += 1
        self.tip = f"{self._entries}-0"
        return self.tip

    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` (as given: no rules applied) under its kind and key; returns it as
        stored, its resourceVersion the new entry's id."""
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = self._next()
        self.objects.setdefault(str(obj["kind"]), {})[meta.key(stored)] = stored
        return copy.deepcopy(stored)

    def remove(self, kind: str, key: str) -> None:
        """Delete the object (one entry); raises ``NotFoundError`` when there is none."""
        if self.objects.get(kind, {}).pop(key, None) is None:
            raise NotFoundError(kind, key)
        self._next()

    def get(self, kind: str, key: str) -> Obj:
        found = self.objects.get(kind, {}).get(key)
        if found is None:
            raise NotFoundError(kind, key)
        return copy.deepcopy(found)

    def try_get(self, kind: str, key: str) -> Obj | None:
        found = self.objects.get(kind, {}).get(key)
        return copy.deepcopy(found) if found is not None else None

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        items = [o for o in self.objects.get(kind, {}).values()
                 if namespace is None or meta.namespace(o) == namespace]
        return copy.deepcopy(sorted(items, key=lambda o: (meta.namespace(o), meta.name(o))))

    def snapshot(self, kinds: Sequence[str]) -> tuple[str, dict[str, builtins.list[Obj]]]:
        return self.tip, {kind: copy.deepcopy(list(self.objects.get(kind, {}).values()))
                          for kind in kinds}

    def names(self, kind: str) -> set[str]:
        return set(self.objects.get(kind, {}))
