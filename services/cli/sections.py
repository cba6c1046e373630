"""The building blocks of ``describe`` output, each as kubectl's describe helpers write it:
the prefix writer, multi-line label/annotation/taint/toleration fields, containers, volumes,
the pod template and the Events table. Pure: objects in, lines into a ``Writer``.
Alignment is Go's tabwriter with describe's settings (min width 0, padding 2).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.cli import printers
from shared.api import tables
from shared.model import meta

Obj = dict[str, Any]
SKIP_ANNOTATIONS = {"kubectl.kubernetes.io/last-applied-configuration"}


class Writer:
    """kubectl's PrefixWriter: each write is indented two spaces per level."""

    def __init__(self) -> None:
        self.buf: list[str] = []

    def write(self, level: int, text: str) -> None:
        self.buf.append("  " * level + text)

    def text(self) -> str:
        lines = "".join(self.buf).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return printers.tabwrite(lines, 0, 2)


def rfc1123(timestamp: Any) -> str:
    t = meta.parse_time(str(timestamp)) if timestamp else None
    if t is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    return datetime.fromtimestamp(t, tz=UTC).strftime("%a, %d %b %Y %H:%M:%S %z")


def multiline(w: Writer, title: str, lines: list[str]) -> None:
    """``Title:\\tfirst`` then ``\\tnext`` per line; ``<none>`` when empty."""
    w.write(0, f"{title}:\t")
    if not lines:
        w.write(0, "<none>\n")
        return
    w.write(0, lines[0] + "\n")
    for line in lines[1:]:
        w.write(0, "\t" + line + "\n")


def labels_lines(values: Any) -> list[str]:
    return [f"{k}={v}" for k, v in sorted((values or {}).items())]


def annotation_lines(annotations: Any) -> list[str]:
    return [f"{k}: {v}" for k, v in sorted((annotations or {}).items())
            if k not in SKIP_ANNOTATIONS]


def toleration_lines(tolerations: Any) -> list[str]:
    out = []
    for t in sorted((t for t in tolerations or [] if isinstance(t, dict)),
                    key=lambda t: str(t.get("key") or "")):
        s = str(t.get("key") or "")
        s += f"={t['value']}" if t.get("value") else ""
        s += f":{t['effect']}" if t.get("effect") else ""
        if t.get("operator") == "Exists" and not t.get("value"):
            s += " op=Exists" if (t.get("key") or t.get("effect")) else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            s += f" for {t['tolerationSeconds']}s"
        out.append(s)
    return out


def taint_lines(taints: Any) -> list[str]:
    items = sorted((t for t in taints or [] if isinstance(t, dict)),
                   key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}")
    out = []
    for t in items:
        kv = f"{t.get('key', '')}={t['value']}" if t.get("value") else str(t.get("key", ""))
        out.append(f"{kv}:{t['effect']}" if t.get("effect") else kv)
    return out


# ---- containers and volumes (describeContainers, describeVolumes) ----------------------------


def _ports(ports: list[Obj], field: str) -> str:
    return ", ".join(f"{p.get(field, 0)}/{p.get('protocol') or 'TCP'}" for p in ports)


def _probe(p: Obj) -> str:
    if "httpGet" in p:
        g = p["httpGet"] or {}
        how = (f"http-get {str(g.get('scheme') or 'HTTP').lower()}://{g.get('host', '')}:"
               f"{g.get('port', '')}{g.get('path', '')}")
    elif "tcpSocket" in p:
        how = f"tcp-socket {(p['tcpSocket'] or {}).get('host', '')}:{p['tcpSocket'].get('port')}"
    elif "exec" in p:
        how = f"exec [{' '.join(str(c) for c in (p['exec'] or {}).get('command') or [])}]"
    else:
        how = "unknown"
    return (f"{how} delay={p.get('initialDelaySeconds', 0)}s timeout={p.get('timeoutSeconds', 1)}s "
            f"period={p.get('periodSeconds', 10)}s #success={p.get('successThreshold', 1)} "
            f"#failure={p.get('failureThreshold', 3)}")


def _state(w: Writer, title: str, state: Obj) -> None:
    if "running" in state:
        w.write(2, f"{title}:\tRunning\n")
        w.write(3, f"Started:\t{rfc1123((state['running'] or {}).get('startedAt'))}\n")
    elif "terminated" in state:
        t = state["terminated"] or {}
        w.write(2, f"{title}:\tTerminated\n")
        for label, f in (("Reason", "reason"), ("Message", "message")):
            if t.get(f):
                w.write(3, f"{label}:\t{t[f]}\n")
        w.write(3, f"Exit Code:\t{t.get('exitCode', 0)}\n")
        w.write(3, f"Started:\t{rfc1123(t.get('startedAt'))}\n")
        w.write(3, f"Finished:\t{rfc1123(t.get('finishedAt'))}\n")
    else:
        w.write(2, f"{title}:\tWaiting\n")
        reason = (state.get("waiting") or {}).get("reason")
        if reason:
            w.write(3, f"Reason:\t{reason}\n")


def _env(w: Writer, c: Obj) -> None:
    env = [e for e in c.get("env") or [] if isinstance(e, dict)]
    w.write(2, "Environment:" + ("\t<none>" if not env else "") + "\n")
    for e in env:
        vf = e.get("valueFrom")
        if not isinstance(vf, dict):
            w.write(3, f"{e.get('name')}:\t{e.get('value', '')}\n")
        elif "fieldRef" in vf:
            ref = vf["fieldRef"] or {}
            w.write(3, f"{e.get('name')}:\t ({ref.get('apiVersion') or 'v1'}:"
                       f"{ref.get('fieldPath')})\n")
        elif "configMapKeyRef" in vf or "secretKeyRef" in vf:
            cm = "configMapKeyRef" in vf
            ref = vf["configMapKeyRef" if cm else "secretKeyRef"] or {}
            where = f"of config map '{ref.get('name')}'" if cm else f"in secret '{ref.get('name')}'"
            w.write(3, f"{e.get('name')}:\t<set to the key '{ref.get('key')}' {where}>\t"
                       f"Optional: {str(bool(ref.get('optional'))).lower()}\n")
        else:
            w.write(3, f"{e.get('name')}:\t<set from {', '.join(sorted(vf))}>\n")


def containers(w: Writer, title: str, items: list[Obj], statuses: list[Obj] | None,
               space: str) -> None:
    by_name = {s.get("name"): s for s in statuses or [] if isinstance(s, dict)}
    w.write(0, f"{space}{title}:\n")
    for c in items:
        st = by_name.get(c.get("name"))
        w.write(1, f"{' ' if space else ''}{c.get('name')}:\n")
        if st is not None:
            w.write(2, f"Container ID:\t{st.get('containerID', '')}\n")
        w.write(2, f"Image:\t{c.get('image', '')}\n")
        if st is not None:
            w.write(2, f"Image ID:\t{st.get('imageID', '')}\n")
        ports = [p for p in c.get("ports") or [] if isinstance(p, dict)]
        port, host = _ports(ports, "containerPort"), _ports(ports, "hostPort")
        w.write(2, ("Ports:\t" if "," in port else "Port:\t") + (port or "<none>") + "\n")
        w.write(2, ("Host Ports:\t" if "," in host else "Host Port:\t") + (host or "<none>") + "\n")
        for label, f in (("Command", "command"), ("Args", "args")):
            if c.get(f):
                w.write(2, f"{label}:\n")
                for arg in c[f]:
                    for line in str(arg).split("\n"):
                        w.write(3, line + "\n")
        if st is not None:
            _state(w, "State", st.get("state") or {})
            last = st.get("lastState") or {}
            if "terminated" in last:
                _state(w, "Last State", last)
            w.write(2, f"Ready:\t{'True' if st.get('ready') else 'False'}\n")
            w.write(2, f"Restart Count:\t{st.get('restartCount', 0)}\n")
        res = c.get("resources") or {}
        for label, f in (("Limits", "limits"), ("Requests", "requests")):
            if res.get(f):
                w.write(2, f"{label}:\n")
                for k, v in sorted(res[f].items()):
                    w.write(3, f"{k}:\t{v}\n")
        for label, f in (("Liveness", "livenessProbe"), ("Readiness", "readinessProbe"),
                         ("Startup", "startupProbe")):
            if isinstance(c.get(f), dict):
                w.write(2, f"{label}:\t{_probe(c[f])}\n")
        if c.get("envFrom"):
            w.write(2, "Environment Variables from:\n")
            for src in c["envFrom"]:
                cm = "configMapRef" in src
                ref = src.get("configMapRef" if cm else "secretRef") or {}
                w.write(3, f"{ref.get('name')}\t{'ConfigMap' if cm else 'Secret'}\t"
                           f"Optional: {str(bool(ref.get('optional'))).lower()}\n")
        _env(w, c)
        mounts = sorted((m for m in c.get("volumeMounts") or [] if isinstance(m, dict)),
                        key=lambda m: str(m.get("mountPath")))
        w.write(2, "Mounts:" + ("\t<none>" if not mounts else "") + "\n")
        for m in mounts:
            flags = ["ro" if m.get("readOnly") else "rw"]
            if m.get("subPath"):
                flags.append(f'path="{m["subPath"]}"')
            w.write(3, f"{m.get('mountPath')} from {m.get('name')} ({','.join(flags)})\n")


_VOLUME_TYPES = {
    "hostPath": ("HostPath (bare host directory volume)", (("Path", "path"),
                                                          ("HostPathType", "type"))),
    "configMap": ("ConfigMap (a volume populated by a ConfigMap)", (("Name", "name"),
                                                                    ("Optional", "optional"))),
    "secret": ("Secret (a volume populated by a Secret)", (("SecretName", "secretName"),
                                                           ("Optional", "optional"))),
    "emptyDir": ("EmptyDir (a temporary directory that shares a pod's lifetime)",
                 (("Medium", "medium"), ("SizeLimit", "sizeLimit"))),
}


def volumes(w: Writer, items: list[Obj], space: str) -> None:
    if not items:
        w.write(0, f"{space}Volumes:\t<none>\n")
        return
    w.write(0, f"{space}Volumes:\n")
    for v in items:
        w.write(1, f"{' ' if space else ''}{v.get('name')}:\n")
        source = next((k for k in _VOLUME_TYPES if k in v), None)
        if source is None:
            w.write(1, "<unknown>\n")
            continue
        title, fields = _VOLUME_TYPES[source]
        w.write(2, f"Type:\t{title}\n")
        for label, f in fields:
            value = (v[source] or {}).get(f)
            if f == "optional":
                value = str(bool(value)).lower()
            w.write(2, f"{label}:\t{'<unset>' if value is None and f == 'sizeLimit' else value or ''}\n")


def pod_template(w: Writer, template: Obj) -> None:
    spec = template.get("spec") or {}
    md = template.get("metadata") or {}
    w.write(0, "Pod Template:\n")
    multiline(w, "  Labels", labels_lines(md.get("labels")))
    if md.get("annotations"):
        multiline(w, "  Annotations", annotation_lines(md.get("annotations")))
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    if spec.get("initContainers"):
        containers(w, "Init Containers", spec["initContainers"], None, "  ")
    containers(w, "Containers", spec.get("containers") or [], None, "  ")
    volumes(w, spec.get("volumes") or [], "  ")
    if spec.get("priorityClassName"):
        w.write(1, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    multiline(w, "  Node-Selectors", labels_lines(spec.get("nodeSelector")))
    multiline(w, "  Tolerations", toleration_lines(spec.get("tolerations")))


def events(w: Writer, evs: list[Obj], now: float) -> None:
    """The ``Events:`` table (DescribeEvents), oldest first."""
    if not evs:
        w.write(0, "Events:\t<none>\n")
        return
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(evs, key=tables.event_time):
        count = int(e.get("count") or 1)
        first = e.get("firstTimestamp") or e.get("eventTime")
        if count > 1:
            interval = (f"{tables.age(e.get('lastTimestamp') or first, now)} "
                        f"(x{count} over {tables.age(first, now)})")
        else:
            interval = tables.age(first, now)
        w.write(1, f"{e.get('type', '')}\t{e.get('reason', '')}\t{interval}\t"
                   f"{tables.event_source(e)}\t{str(e.get('message') or '').strip()}\n")


def events_for(obj: Obj, all_events: list[Obj]) -> list[Obj]:
    """The Events whose involvedObject is ``obj`` (same kind, namespace, name; same uid when
    the Event records one)."""
    out = []
    for e in all_events:
        inv = e.get("involvedObject") or {}
        if (inv.get("kind") == obj.get("kind") and inv.get("name") == meta.name(obj)
                and (inv.get("namespace") or "") == meta.namespace(obj)
                and (not inv.get("uid") or inv.get("uid") == meta.uid(obj))):
            out.append(e)
    return out
