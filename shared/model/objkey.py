"""An object's key, ``"<namespace>/<name>"`` (an empty namespace for cluster-scoped kinds:
``"/node-1"``): the field ``n`` of a log entry, the field of a view hash, a cache's key.
Pure."""

from __future__ import annotations

from typing import NamedTuple


class ObjectKey(NamedTuple):
    namespace: str
    name: str

    @classmethod
    def parse(cls, key: str) -> ObjectKey:
        """``"ns/name"`` or ``"/name"``; a bare ``"name"`` is cluster-scoped (as client-go's
        ``SplitMetaNamespaceKey``). The namespace ends at the first ``/``: what follows is
        the name, whatever it holds (a key from user input is not checked here)."""
        ns, sep, name = key.partition("/")
        return cls(ns, name) if sep else cls("", key)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
