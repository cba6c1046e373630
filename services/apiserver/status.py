"""``meta/v1 Status`` documents: every error the API server returns, and the success of a
delete. Pure: documents from errors.

The messages are the store's own (the CLI prints the same), in the shape upstream's
``apierrors`` builds them: ``daemonsets.apps "x" not found``, ``DaemonSet.apps "x" is
invalid: spec.selector: Required value`` with one ``details.causes[]`` entry per field error.
"""

from __future__ import annotations

import re
from typing import Any

from shared.api import served
from shared.model import kinds
from shared.model.objkey import ObjectKey
from shared.store import errors

Obj = dict[str, Any]

# field.ErrorType → its StatusCause reason (apimachinery pkg/util/validation/field)
_CAUSE_REASONS = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Duplicate value": "FieldValueDuplicate",
    "Not found": "FieldValueNotFound",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
}
_CODES = {"NotFound": 404, "AlreadyExists": 409, "Conflict": 409, "Invalid": 422,
          "ServiceUnavailable": 503, "BadRequest": 400, "Unauthorized": 401, "Forbidden": 403,
          "MethodNotAllowed": 405, "NotAcceptable": 406, "UnsupportedMediaType": 415,
          "Expired": 410, "Gone": 410, "RequestEntityTooLarge": 413, "TooManyRequests": 429,
          "InternalError": 500, "Timeout": 504}


class ApiError(Exception):
    """An error to answer with a Status. ``status`` is the document, ``code`` the HTTP code."""

    def __init__(self, reason: str, message: str, details: Obj | None = None,
                 code: int | None = None) -> None:
        super().__init__(message)
        self.code = code or _CODES.get(reason, 500)
        self.status = status(reason, message, self.code, details)


def status(reason: str, message: str, code: int, details: Obj | None = None) -> Obj:
    """A failure's Status; ``details`` (even empty) when given."""
    out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}
    if details is not None:
        out["details"] = details
    return out


NO_SUCH_PATH = "the server could not find the requested resource"


def no_such_path() -> ApiError:
    """The 404 of a path the server does not serve (an unknown resource or subresource).
    Its details are there and empty, as a client sees upstream's: kubectl tells a missing
    subresource from a missing object by them (``kubectl debug``, finding no
    ``ephemeralcontainers``, read them unchecked and crashed when they were left out)."""
    return ApiError("NotFound", NO_SUCH_PATH, {})


def success(name: str, kind: str, uid: str = "") -> Obj:
    """The Status a delete answers with once the object is gone."""
    r = served.by_kind(kind)
    details: Obj = {"name": name, "group": r.info.group if r else "", "kind": r.info.plural
                    if r else kind.lower()}
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _resource_name(kind: str) -> tuple[str, str, str]:
    """(``daemonsets.apps``, group, plural) of a kind."""
    r = served.by_kind(kind)
    if r is None:
        return kind.lower() + "s", "", kind.lower() + "s"
    info = r.info
    return info.qualified_plural, info.group, info.plural


def cause(text: str) -> Obj:
    """A StatusCause of one rendered field error (``path: Type: value: detail``)."""
    m = re.match(r"^(?P<field>[^\s:][^:]*?): (?P<body>.*)$", text, re.S)
    if m is None:
        return {"reason": "FieldValueInvalid", "message": text}
    body = m.group("body")
    reason = next((r for t, r in _CAUSE_REASONS.items() if body.startswith(t)),
                  "FieldValueInvalid")
    return {"reason": reason, "message": body, "field": m.group("field")}


def options_invalid(options: str, problems: list[str]) -> ApiError:
    """The 422 of a request's options (``ListOptions``, ``PatchOptions``, ...) as upstream:
    ``ListOptions.meta.k8s.io "" is invalid: <problem>`` (several: ``[a, b]``)."""
    body = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return ApiError("Invalid", f'{options}.meta.k8s.io "" is invalid: {body}',
                    {"group": "meta.k8s.io", "kind": options,
                     "causes": [cause(p) for p in problems]})


def not_found(kind: str, name: str) -> ApiError:
    plural, group, res = _resource_name(kind)
    return ApiError("NotFound", f'{plural} "{name}" not found',
                    {"name": name, "group": group, "kind": res})


def forbidden(kind: str, name: str, why: str, causes: list[Obj] | None = None) -> ApiError:
    """A 403 an admission rule answers: ``<resource> "<name>" is forbidden: <why>``."""
    plural, group, res = _resource_name(kind)
    details: Obj = {"name": name, "group": group, "kind": res}
    if causes:
        details["causes"] = causes
    return ApiError("Forbidden", f'{plural} "{name}" is forbidden: {why}', details)


def denied(user: str, verb: str, info: kinds.KindInfo, namespace: str | None,
           name: str | None, sub: str | None = None) -> ApiError:
    """The 403 of a request the authorizer refuses, in upstream's words: ``<resource>
    "<name>" is forbidden: User "<user>" cannot <verb> resource "<plural>[/<sub>]" in API
    group "<group>" in the namespace "<ns>"`` (or ``at the cluster scope``)."""
    plural = info.qualified_plural
    what = f'{plural} "{name}"' if name else plural
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    res = f"{info.plural}/{sub}" if sub else info.plural  # (unqualified: its group follows)
    return ApiError("Forbidden", f'{what} is forbidden: User "{user}" cannot {verb} '
                    f'resource "{res}" in API group "{info.group}"{where}',
                    {"name": name or "", "group": info.group, "kind": info.plural})


def from_store(err: errors.StoreError) -> ApiError:
    """The Status of a store error, as upstream's registry would answer."""
    kind = str(getattr(err, "kind", ""))
    plural, group, res = _resource_name(kind)
    name = ObjectKey.parse(str(getattr(err, "key", ""))).name or str(getattr(err, "name", ""))
    if isinstance(err, errors.NotFoundError):
        return not_found(kind, name)
    if isinstance(err, errors.AlreadyExistsError):
        return ApiError("AlreadyExists", f'{plural} "{name}" already exists',
                        {"name": name, "group": group, "kind": res})
    if isinstance(err, errors.ConflictError):
        detail = str(err).split(": ", 1)[-1]
        return ApiError("Conflict", f'Operation cannot be fulfilled on {plural} "{name}": '
                        f"{detail}", {"name": name, "group": group, "kind": res})
    if isinstance(err, errors.InvalidError):
        info = kinds.by_kind(err.kind)
        qualified = f"{err.kind}.{info.group}" if info and info.group else err.kind
        causes = list(err.causes)
        body = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
        return ApiError("Invalid", f'{qualified} "{err.name}" is invalid: {body}',
                        {"name": err.name, "group": group, "kind": err.kind,
                         "causes": [cause(c) for c in causes]})
    if isinstance(err, errors.UnavailableError):
        return ApiError("ServiceUnavailable", str(err), {"retryAfterSeconds": 1})
    if isinstance(err, errors.TooLargeError):  # etcd's request limit, as a body's 413
        return ApiError("RequestEntityTooLarge", f"Request entity too large: {err}: the "
                        f"object is {err.size} bytes, the store keeps at most {err.limit}",
                        {"name": name, "group": group, "kind": res})
    if isinstance(err, errors.BadRequestError):
        return bad_request(str(err))
    if isinstance(err, errors.NamespaceTerminatingError):
        return forbidden(kind, name, err.why, [{
            "reason": "NamespaceTerminating", "field": "metadata.namespace",
            "message": f"namespace {err.namespace} is being terminated"}])
    if isinstance(err, errors.ForbiddenError):
        return ApiError("Forbidden", str(err), {"name": name, "group": group, "kind": res})
    # a stored object that does not decode or has the wrong shape (MalformedObjectError):
    # the server's data, not the request, is at fault, as upstream's corrupt objects
    return ApiError("InternalError", f"Internal error occurred: {err}",
                    {"name": name, "group": group, "kind": res,
                     "causes": [{"reason": "UnexpectedServerResponse", "message": str(err)}]})


def bad_request(message: str) -> ApiError:
    return ApiError("BadRequest", message)
