"""The errors every store user sees (re-exported by ``shared.store.errors``). Each says
whether a retry can help (``retryable``). Pure."""

from __future__ import annotations

from shared.model import fielderr, kinds
from shared.model.objkey import ObjectKey


class StoreError(Exception):
    """Base of all store errors."""

    retryable = False
    reason = "InternalError"


class NotFoundError(StoreError):
    reason = "NotFound"

    def __init__(self, kind: str, key: str) -> None:
        self.kind, self.key = kind, key
        name = ObjectKey.parse(key).name
        super().__init__(f'{kind.lower()}s "{name}" not found')


class AlreadyExistsError(StoreError):
    reason = "AlreadyExists"

    def __init__(self, kind: str, key: str) -> None:
        self.kind, self.key = kind, key
        name = ObjectKey.parse(key).name
        super().__init__(f'{kind.lower()}s "{name}" already exists')


class ConflictError(StoreError):
    """A write carried a stale resourceVersion or failed a uid precondition."""

    retryable = True
    reason = "Conflict"

    def __init__(self, kind: str, key: str, detail: str = "") -> None:
        self.kind, self.key = kind, key
        name = ObjectKey.parse(key).name
        super().__init__(
            f'Operation cannot be fulfilled on {kind.lower()}s "{name}": '
            + (detail or "the object has been modified; please apply your changes to the latest version and try again")
        )


class TakenError(ConflictError):
    """A Service's cluster IP or node port, free when its write was prepared, was taken by
    another Service's write committed meanwhile (``detail``: which, and by whom); the write
    is prepared again, its free ones picked anew."""


class InvalidError(StoreError):
    """Validation failed; ``causes`` are field errors rendered as Kubernetes does."""

    reason = "Invalid"

    def __init__(self, kind: str, name: str, causes: list[str]) -> None:
        self.kind, self.name, self.causes = kind, name, causes
        info = kinds.by_kind(kind)
        qualified = f"{kind}.{info.group}" if info is not None and info.group else kind
        super().__init__(f'{qualified} "{name}" is invalid: ' + ", ".join(causes))


class BadRequestError(StoreError):
    """The request body cannot be turned into an object at all (the API server's decode or
    conversion step failed, before validation): HTTP 400 BadRequest."""

    reason = "BadRequest"


class ForbiddenError(StoreError):
    """The commit script refused a write the caller's role may not make (nothing written)."""

    reason = "Forbidden"

    def __init__(self, kind: str, key: str, role: str, why: str) -> None:
        self.kind, self.key, self.role, self.why = kind, key, role, why
        name = ObjectKey.parse(key).name
        super().__init__(f'{kind.lower()}s "{name}" is forbidden: role "{role}" may not '
                         f"make this write: {why}")


def _resource(kind: str) -> str:
    """How the API names a kind's objects in a message: ``daemonsets.apps``, ``pods``."""
    info = kinds.by_kind(kind)
    return info.qualified_plural if info is not None else kind.lower() + "s"


class AdmissionError(ForbiddenError):
    """A write the API server refuses whoever asks (one of upstream's admission plugins);
    ``name``: the object's name as the message shows it, when not its key's (a pod to be
    named by its ``generateName``: the prefix, as upstream's admission shows it)."""

    def __init__(self, kind: str, key: str, why: str, name: str | None = None) -> None:
        self.kind, self.key, self.role, self.why = kind, key, "", why
        shown = ObjectKey.parse(key).name if name is None else name
        StoreError.__init__(self, f'{_resource(kind)} "{shown}" is forbidden: {why}')


class UndeletableError(AdmissionError):
    """A delete the API server refuses whoever asks: a namespace or a priority class every
    cluster has."""


class NamespaceTerminatingError(ForbiddenError):
    """A create in a namespace being deleted (upstream's NamespaceLifecycle admission):
    nothing new goes into it."""

    def __init__(self, kind: str, key: str, namespace: str) -> None:
        self.kind, self.key, self.role, self.namespace = kind, key, "", namespace
        self.why = (f"unable to create new content in namespace {namespace} because it is "
                    "being terminated")
        StoreError.__init__(self, f'{_resource(kind)} "{ObjectKey.parse(key).name}" is '
                            f"forbidden: {self.why}")


class UnavailableError(StoreError):
    """Redis could not be reached or answered with an error; a retry may help."""

    retryable = True
    reason = "ServiceUnavailable"


class CorruptEntryError(StoreError):
    """A log entry or stored object could not be decoded or failed validation."""

    reason = "CorruptEntry"


class MalformedObjectError(CorruptEntryError):
    """A stored object of the wrong shape (a field of the wrong JSON type): readers skip it.
    ``problems`` name each field and why (``status.conditions: Invalid value: "x": must be
    of type array``). Retrying cannot help: only a new write of the object can."""

    reason = "MalformedObject"

    def __init__(self, kind: str, key: str, problems: list[str]) -> None:
        self.kind, self.key, self.problems = kind, key, problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        shown = fielderr.cut(fielderr.go_quote(key), 256)
        super().__init__(f"{kind} {shown} has the wrong shape: {problems[0]}{more}")


class TooLargeError(StoreError):
    """An object larger than the store keeps (etcd's request limit, 1.5 MiB, as the API
    server meets it: an error of unknown reason). Retrying cannot help."""

    reason = ""

    def __init__(self, kind: str, key: str, size: int, limit: int) -> None:
        self.kind, self.key, self.size, self.limit = kind, key, size, limit
        super().__init__("etcdserver: request is too large")
