"""What the API server serves, as Kubernetes discovery documents (``/api``, ``/apis``,
``/api/v1``, ``/apis/<group>/<version>``, ``/version``). Pure: documents from constants.

What is served of each kind (its verbs, categories and subresources) is
``shared.api.served``'s, which the OpenAPI documents follow too. kubectl falls back from
aggregated discovery to these legacy documents, so only those are served.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shared.api import served

Obj = dict[str, Any]

_MAJOR, _MINOR = served.VERSION.removeprefix("v").split(".")[:2]
SERVER_VERSION = {"major": _MAJOR, "minor": _MINOR, "gitVersion": served.VERSION,
                  "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                  "goVersion": "python", "compiler": "daemonbus", "platform": "linux/amd64"}

AUTHZ_GROUP_VERSION = "authorization.k8s.io/v1"
ACCESS_REVIEWS = (("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                  ("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
                  ("subjectaccessreviews", "SubjectAccessReview"))
AUTHN_GROUP_VERSION = "authentication.k8s.io/v1"
AUTHN_REVIEWS = (("selfsubjectreviews", "SelfSubjectReview"), ("tokenreviews", "TokenReview"))
REVIEWS = {AUTHZ_GROUP_VERSION: ACCESS_REVIEWS, AUTHN_GROUP_VERSION: AUTHN_REVIEWS}
"""The reviews, by group version: (plural, kind)."""
SELF = frozenset({"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"})
"""The reviews every user may post, of itself (``kubectl auth can-i``, ``auth whoami``);
the others (of a token, of another user) only those granted their ``create`` may post
(upstream's ``system:auth-delegator``)."""
_GROUPS = dict(sorted({
    **{gv.partition("/")[0]: gv.partition("/")[2] for gv in REVIEWS},
    **{r.info.group: r.info.version for r in served.RESOURCES if r.info.group}}.items()))
"""The API groups served, each with its one version: the resources' and the reviews'."""

_BY_PATH = {(r.info.api_version, r.info.plural): r for r in served.RESOURCES}


def resource(group_version: str, plural: str) -> served.Resource | None:
    """The served resource at ``/api(s)/<group_version>/…/<plural>``."""
    return _BY_PATH.get((group_version, plural))


def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


def _group(name: str, version: str) -> Obj:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


def api_group_list() -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(name, version) for name, version in _GROUPS.items()]}


def root_paths(served: Iterable[str]) -> Obj:
    """``GET /``: the paths the server serves (upstream's RootPaths, what ``kubectl get --raw
    /`` prints): ``served`` (the fixed routes), the API's roots and each group and its
    versions, sorted."""
    paths = {*served, "/api", "/api/v1", "/apis", "/apis/"}
    for group in api_group_list()["groups"]:
        paths.add(f"/apis/{group['name']}")
        paths.update(f"/apis/{v['groupVersion']}" for v in group["versions"])
    return {"paths": sorted(paths)}


def api_group(name: str) -> Obj | None:
    if name not in _GROUPS:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, _GROUPS[name])}


def group_version(group: str) -> str:
    """The version served of ``group`` ("" the core group), as ``group/version``."""
    return f"{group}/{_GROUPS.get(group, 'v1')}" if group else "v1"


def _api_resource(r: served.Resource) -> list[Obj]:
    info = r.info
    out: Obj = {"name": info.plural, "singularName": info.singular,
                "namespaced": info.namespaced, "kind": info.kind, "verbs": list(r.verbs)}
    if info.short_names:
        out["shortNames"] = list(info.short_names)
    if r.categories:
        out["categories"] = list(r.categories)
    subs = []
    for sub, kind, verbs in r.subresources:
        s: Obj = {"name": f"{info.plural}/{sub}", "singularName": "",
                  "namespaced": info.namespaced, "kind": kind, "verbs": list(verbs)}
        if sub == "eviction":
            s.update(group="policy", version="v1")
        elif sub == "token":
            s.update(group="authentication.k8s.io", version="v1")
        subs.append(s)
    return [out, *subs]


def resource_list(group_version: str) -> Obj | None:
    """``APIResourceList`` of one group version, None when not served."""
    if group_version in REVIEWS:
        items: list[Obj] = [{"name": plural, "singularName": "", "namespaced": False,
                             "kind": kind, "verbs": ["create"]}
                            for plural, kind in REVIEWS[group_version]]
    else:
        items = [x for r in served.RESOURCES if r.info.api_version == group_version
                 for x in _api_resource(r)]
        if not items:
            return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": items}
