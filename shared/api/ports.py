"""The object store as a port: what a reader of stored objects needs, whatever holds them.
Pure.

``shared.store.client.Store`` is the store in Redis (the materialised view the ``COMMIT``
script keeps beside the log); ``InMemoryObjectStore`` (``shared.api.memory``) is its twin
for unit tests of semantics. Both are held to one contract suite
(``tests/integration/test_object_store_contract.py``).

Keys are ``"<namespace>/<name>"`` (``"/<name>"`` for a cluster-scoped object); each object
read carries its ``metadata.resourceVersion``, the id of the log entry that wrote it. A
listing's position is the log's tip when it was read (``NO_POSITION`` for an empty log).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Protocol

Obj = dict[str, Any]


class ObjectStore(Protocol):
    def get(self, kind: str, key: str) -> Obj:
        """The object ``key`` of ``kind``; raises ``NotFoundError`` when there is none."""

    def try_get(self, kind: str, key: str) -> Obj | None:
        """The object, or None when there is none."""

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Every object of ``kind`` (of ``namespace`` when given), sorted by namespace and
        name."""

    def snapshot(self, kinds: Sequence[str]) -> tuple[str, dict[str, builtins.list[Obj]]]:
        """The log's tip and every object of ``kinds`` as of that tip, read in one atomic
        step (what a cache lists before it follows the log from the tip)."""

    def names(self, kind: str) -> set[str]:
        """The keys of every stored object of ``kind``."""
