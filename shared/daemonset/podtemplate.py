"""The pods a DaemonSet creates (spec §c.6 steps 3-4). Pure: builds objects, no effects.

:func:`create_pod_template` is ``CreatePodTemplate``; :func:`new_pod` is one pod of a
``syncNodes`` batch (``GetPodFromTemplate`` plus the node-name affinity). The result is a
function of its inputs only: no uid, creationTimestamp or resourceVersion (the store assigns
them), and the name is derived, not random.

Names: upstream's pod control creates with ``generateName: <ds-name>-`` and the API server
appends 5 random characters (apimachinery ``names.SimpleNameGenerator``), so each creation
gets a new name, also when a deleted pod is replaced on the same node with the same revision.
:func:`pod_name` gives the same shape and the same property without randomness: it hashes
(DaemonSet uid, node, revision hash, the deciding sync's identity, salt). The identity is the
log position the sync read through (recorded in its decision), so a retried or replayed
decision gives the same names (creation is create-if-absent: no second pod), while a later
decision — which reads through the replaced pod's deletion, a newer position — gives new
ones. On a name collision with a different pod the executor retries with the next salt.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from shared.daemonset import dsutil, placement
from shared.model import defaults, meta, podutil
from shared.model.nodeaffinity import node_name_selector

Obj = dict[str, Any]

# byte → its letter of the alphabet (its value modulo the alphabet's length)
_SUFFIX_OF_BYTE = bytes(ord(meta.NAME_ALPHABET[b % len(meta.NAME_ALPHABET)])
                        for b in range(256))

_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class NoLabelsError(ValueError):
    """The pod template has no labels (pod control refuses to create such pods)."""

    def __init__(self) -> None:
        super().__init__("unable to create pods, no labels")


def clone(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars); faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def create_pod_template(ds: Obj, hash: str) -> Obj:
    """``CreatePodTemplate``: a copy of the DaemonSet's pod template with the default daemon
    tolerations, the defaults the API server gives a pod and not a template
    (``defaults.default_pod_only``), and the ``pod-template-generation`` (from the parseable
    generation annotation) and ``controller-revision-hash`` (when ``hash`` is non-empty)
    labels; and the status the API server gives each pod made from it (Pending, its QoS
    class), worked out once for all of them."""
    tmpl: Obj = clone(dsutil.template(ds))
    md = tmpl.get("metadata")
    if not isinstance(md, dict):
        md = tmpl["metadata"] = {}
    spec = tmpl.get("spec")
    if not isinstance(spec, dict):
        spec = tmpl["spec"] = {}
    spec["tolerations"] = placement.daemon_tolerations(spec)
    defaults.default_pod_only(spec)
    labels = md.get("labels")
    if not isinstance(labels, dict):
        labels = md["labels"] = {}
    generation = dsutil.template_generation(ds)
    if generation is not None:
        labels[dsutil.GENERATION_LABEL] = str(generation)
    if hash:
        labels[dsutil.HASH_LABEL] = hash
    tmpl["status"] = {"phase": podutil.PENDING, "qosClass": podutil.qos_class(spec)}
    return tmpl


def name_prefix(ds: Obj) -> str:
    """``getPodsPrefix``: ``<name>-`` when that is a valid name prefix, else the name."""
    name = meta.name(ds)
    prefix = f"{name}-"
    masked = prefix[:-1] + "a"  # a generateName prefix may end with a dash
    if len(masked) <= 253 and _DNS1123_SUBDOMAIN_RE.match(masked):
        return prefix
    return name


def pod_name(ds: Obj, node: str, hash: str, salt: int = 0, decision: str = "") -> str:
    """The name of the pod that the sync ``decision`` (the log position it read through)
    creates for ``node`` and revision ``hash``: the name prefix truncated to 58 characters
    plus 5 characters of ``bcdfghjklmnpqrstvwxz2456789`` (``maxGeneratedNameLength`` and the
    alphabet of apimachinery's ``utilrand.String``)."""
    seed = f"{meta.uid(ds)}\x00{node}\x00{hash}\x00{decision}\x00{salt}".encode()
    digest = hashlib.sha256(seed).digest()
    suffix = digest[:meta.NAME_RANDOM_LENGTH].translate(_SUFFIX_OF_BYTE).decode()
    return meta.generated_name(name_prefix(ds), suffix)


def replace_node_affinity(affinity: Any, node: str) -> Obj:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity`` on a copy: the required node affinity becomes
    exactly one term ``metadata.name In [node]``; preferred terms and pod (anti-)affinity stay."""
    result: Obj = clone(affinity) if isinstance(affinity, dict) else {}
    node_affinity = result.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        node_affinity = result["nodeAffinity"] = {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        required["nodeSelectorTerms"] = node_name_selector(node)["nodeSelectorTerms"]
    else:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = node_name_selector(node)
    return result


def new_pod(
    ds: Obj, template: Obj, node: str, hash: str, salt: int = 0, decision: str = ""
) -> Obj:
    """The pod to create for ``node`` from ``template`` (a :func:`create_pod_template` result):
    the template's labels, annotations and finalizers, its spec with the node-name affinity,
    its status, the DaemonSet's namespace and a controller ownerReference.

    The pod's spec is a map of its own (with an affinity of its own) whose other values
    (containers, volumes, tolerations, …) are the template's: the pods of one template share
    them, so no one may change them in place (pods are written as they are built; the
    executor copies the metadata it stamps). A deep copy of the spec for each pod was half
    the cost of planning a rollout's creates.

    Raises :class:`NoLabelsError` when the template has no labels.
    """
    tmeta = template.get("metadata")
    tmeta = tmeta if isinstance(tmeta, dict) else {}
    labels = tmeta.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise NoLabelsError()
    spec = template.get("spec")
    pod_spec: Obj = dict(spec) if isinstance(spec, dict) else {}
    pod_spec["affinity"] = replace_node_affinity(pod_spec.get("affinity"), node)
    md: Obj = {
        "name": pod_name(ds, node, hash, salt, decision),
        "generateName": name_prefix(ds),
        "namespace": meta.namespace(ds),
        "labels": dict(labels),
    }
    annotations = tmeta.get("annotations")
    if isinstance(annotations, dict) and annotations:
        md["annotations"] = dict(annotations)
    finalizers = tmeta.get("finalizers")
    if isinstance(finalizers, list) and finalizers:
        md["finalizers"] = list(finalizers)
    md["ownerReferences"] = [meta.controller_owner_ref(ds)]
    status = template.get("status")
    # (its node's name last in its spec, what readers decode its siblings beside,
    # shared.eventlog.entry.Siblings; its status last, what they decode its status updates
    # over, shared.eventlog.entry.Prior)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": pod_spec,
            "status": dict(status) if isinstance(status, dict) else {"phase": podutil.PENDING}}
