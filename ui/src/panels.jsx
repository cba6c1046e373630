// The side panel: a DaemonSet (progress, conditions, revisions with diffs, events, rollout
// actions), a node (its cells, cordon) or one cell (the pod, and `why`, linked to the log).

import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import { canI, listWatch, query, request } from "./api.js";
import { STATES } from "./fleet.js";

const ENTRY = /\b([0-9]{10,}-[0-9]+)\b/g;

function useAsync(fn, deps) {
  const [state, setState] = useState({ loading: true });
  useEffect(() => {
    let live = true;
    setState({ loading: true });
    fn().then(
      (value) => live && setState({ value }),
      (error) => live && setState({ error }),
    );
    return () => {
      live = false;
    };
  }, deps);
  return state;
}

function Failure({ error }) {
  return <p class="error" role="alert">{String(error.message || error)}</p>;
}

// ---- actions: a plan from the server, confirmed, sent as a normal PATCH -------------------

export function ActionButton({ label, params, notify }) {
  const dialog = useRef(null);
  const [plan, setPlan] = useState(null);
  const [busy, setBusy] = useState(false);
  const open = async () => {
    try {
      const p = await request(`/ui/api/action${query(params)}`);
      if (p.noop) {
        notify(p.summary);
        return;
      }
      setPlan(p);
      dialog.current.showModal();
    } catch (err) {
      notify(`${label}: ${err.message}`, true);
    }
  };
  const confirm = async () => {
    setBusy(true);
    try {
      await request(plan.path, { method: plan.method, body: plan.body, contentType: plan.contentType });
      notify(`done: ${plan.summary}`);
    } catch (err) {
      notify(`${plan.summary}: ${err.message}`, true);
    } finally {
      setBusy(false);
      dialog.current.close();
      setPlan(null);
    }
  };
  return (
    <>
      <button type="button" class="action" onClick={open}>{label}</button>
      <dialog ref={dialog} aria-labelledby={`dlg-${label}`} onClose={() => setPlan(null)}>
        {plan ? (
          <form method="dialog">
            <h3 id={`dlg-${label}`}>Confirm: {plan.summary}</h3>
            <p>This sends {plan.method} {plan.path} ({plan.contentType}):</p>
            <pre class="patch">{JSON.stringify(plan.body, null, 1)}</pre>
            <div class="buttons">
              <button type="button" class="danger" disabled={busy} onClick={confirm}>Confirm</button>
              <button value="cancel" autofocus>Cancel</button>
            </div>
          </form>
        ) : null}
      </dialog>
    </>
  );
}

function useCan(verb, group, resource, namespace) {
  const s = useAsync(() => canI(verb, group, resource, namespace), [verb, group, resource, namespace]);
  return s.value === true;
}

// ---- why, linked to the log ---------------------------------------------------------------

function LogEntry({ id, onClose }) {
  const s = useAsync(() => request(`/ui/api/log/${id}`), [id]);
  return (
    <section class="entry" aria-label={`log entry ${id}`}>
      <h4>
        log entry {id}{" "}
        <button type="button" class="link" onClick={onClose}>close</button>
      </h4>
      {s.loading ? <p>loading…</p> : s.error ? <Failure error={s.error} /> : (
        <>
          <p>{s.value.type} {s.value.kind} {s.value.key}{s.value.user ? ` by user ${s.value.user}` : ""}</p>
          <pre>{JSON.stringify(s.value.object, null, 1)}</pre>
        </>
      )}
    </section>
  );
}

export function Why({ params }) {
  const s = useAsync(() => request(`/ui/api/why${query(params)}`), [JSON.stringify(params)]);
  const [entry, setEntry] = useState(null);
  if (s.loading) return <p>asking why…</p>;
  if (s.error) return <Failure error={s.error} />;
  const line = (text) => {
    const parts = [];
    let at = 0;
    for (const m of text.matchAll(ENTRY)) {
      parts.push(text.slice(at, m.index));
      parts.push(
        <button type="button" class="link entry-link" onClick={() => setEntry(m[1])}
          aria-label={`open log entry ${m[1]}`}>{m[1]}</button>,
      );
      at = m.index + m[1].length;
    }
    parts.push(text.slice(at));
    return parts;
  };
  return (
    <div class="why">
      <pre class="why-lines" aria-label="why">
        {s.value.lines.map((l, i) => <div key={i}>{line(l)}</div>)}
      </pre>
      {entry ? <LogEntry id={entry} onClose={() => setEntry(null)} /> : null}
    </div>
  );
}

// A DaemonSet's why plans over every node: asked for, not on opening the panel.
function OnDemand({ label, children }) {
  const [shown, setShown] = useState(false);
  return shown ? children : <button type="button" onClick={() => setShown(true)}>{label}</button>;
}

// ---- DaemonSet ----------------------------------------------------------------------------

function Progress({ data }) {
  const el = useRef(null);
  const chart = useRef(null);
  useEffect(() => {
    const opts = {
      width: 420, height: 180,
      scales: { x: { time: true } },
      series: [{}, { label: "desired", stroke: "#1f2937", dash: [4, 4] },
        { label: "updated", stroke: "#1d4ed8", width: 2 },
        { label: "available", stroke: "#047857", width: 2 }],
      axes: [{}, { label: "pods" }],
    };
    chart.current = new uPlot(opts, data, el.current);
    return () => chart.current.destroy();
  }, []);
  useEffect(() => {
    if (chart.current) chart.current.setData(data);
  });
  return <div ref={el} class="chart" role="img" data-points={data[0].length}
    data-since={data[0].length ? data[0][0] : ""}
    aria-label="rollout progress: updated and available pods against desired, over time" />;
}

// The chart starts from the log (the DaemonSet's status entries, read by the server), then
// goes on with what the watch delivers; without the history, it is the live points alone.
function useProgressHistory(fleet, ds) {
  const [, setSeeded] = useState(0);
  const { uid, namespace, name } = ds.metadata;
  useEffect(() => {
    let live = true;
    request(`/ui/api/progress${query({ namespace, name })}`).then((answer) => {
      if (!live || answer.uid !== uid) return;
      fleet.seedProgress(uid, answer.points);
      setSeeded((n) => n + 1);
    }, () => {});
    return () => {
      live = false;
    };
  }, [uid]);
}

function Conditions({ ds }) {
  const conds = (ds.status && ds.status.conditions) || [];
  const ann = ds.metadata.annotations || {};
  const gates = Object.entries(ann).filter(([k]) => k.startsWith("rollout.daemonbus.io/"));
  return (
    <>
      <table class="kv">
        <caption>Conditions</caption>
        <thead><tr><th>type</th><th>status</th><th>reason</th><th>message</th></tr></thead>
        <tbody>
          {conds.length ? conds.map((c) => (
            <tr key={c.type}><td>{c.type}</td><td>{c.status}</td><td>{c.reason}</td><td>{c.message}</td></tr>
          )) : <tr><td colSpan={4}>none</td></tr>}
        </tbody>
      </table>
      {gates.length ? (
        <p>Rollout gates: {gates.map(([k, v]) => `${k.slice(21)}=${v}`).join(", ")}</p>
      ) : null}
    </>
  );
}

function History({ fleet, ds }) {
  // asked again when the generation or the DaemonSet's revisions (from the page's watch) move
  const revisions = [...fleet.revisions.values()]
    .filter((cr) => (cr.metadata.ownerReferences || []).some((r) => r.uid === ds.metadata.uid))
    .map((cr) => cr.metadata.resourceVersion).sort().join();
  const s = useAsync(() => request(`/ui/api/history${query({
    namespace: ds.metadata.namespace, name: ds.metadata.name })}`),
  [ds.metadata.uid, ds.metadata.generation, revisions]);
  if (s.loading) return <p>loading revisions…</p>;
  if (s.error) return <Failure error={s.error} />;
  return (
    <ol class="history" aria-label="revision history">
      {s.value.revisions.map((r) => (
        <li key={r.name}>
          <details>
            <summary>
              revision {r.revision} ({r.hash}){r.current ? " — current" : ""}
              {r.changeCause ? `: ${r.changeCause}` : ""}
            </summary>
            {r.diff.length ? (
              <pre class="diff">{r.diff.map((l, i) => (
                <div key={i} class={l[0] === "+" ? "add" : l[0] === "-" ? "del" : ""}>{l}</div>))}
              </pre>
            ) : <p>the first revision on record</p>}
          </details>
        </li>
      ))}
    </ol>
  );
}

function Events({ ds }) {
  const [events, setEvents] = useState([]);
  useEffect(() => {
    const byName = new Map();
    const show = () => setEvents([...byName.values()].sort((a, b) =>
      String(b.lastTimestamp || b.eventTime || "").localeCompare(String(a.lastTimestamp || a.eventTime || ""))));
    return listWatch(`/api/v1/namespaces/${ds.metadata.namespace}/events`,
      { fieldSelector: `involvedObject.name=${ds.metadata.name},involvedObject.kind=DaemonSet` }, {
        reset: (items) => { byName.clear(); items.forEach((e) => byName.set(e.metadata.name, e)); show(); },
        events: (batch) => {
          for (const { type, object } of batch) {
            if (type === "DELETED") byName.delete(object.metadata.name);
            else byName.set(object.metadata.name, object);
          }
          show();
        },
      });
  }, [ds.metadata.uid]);
  return (
    <table class="kv events">
      <caption>Events</caption>
      <thead><tr><th>last seen</th><th>type</th><th>reason</th><th>message</th></tr></thead>
      <tbody>
        {events.length ? events.slice(0, 50).map((e) => (
          <tr key={e.metadata.name}>
            <td>{e.lastTimestamp || e.eventTime}</td><td>{e.type}</td><td>{e.reason}</td>
            <td>{e.message}{e.count > 1 ? ` (×${e.count})` : ""}</td>
          </tr>
        )) : <tr><td colSpan={4}>none</td></tr>}
      </tbody>
    </table>
  );
}

export function DaemonSetPanel({ fleet, ds, notify }) {
  const st = ds.status || {};
  const ns = ds.metadata.namespace;
  const may = useCan("patch", "apps", "daemonsets", ns);
  const params = (action) => ({ action, namespace: ns, name: ds.metadata.name });
  useProgressHistory(fleet, ds);
  const data = fleet.progress.get(ds.metadata.uid) || [[], [], [], []];
  return (
    <div>
      <h2>daemonset {ns}/{ds.metadata.name}</h2>
      <p class="counters">
        desired {st.desiredNumberScheduled || 0} · current {st.currentNumberScheduled || 0} ·
        ready {st.numberReady || 0} · updated {st.updatedNumberScheduled || 0} ·
        available {st.numberAvailable || 0} · misscheduled {st.numberMisscheduled || 0}
      </p>
      {may ? (
        <div class="actions" role="group" aria-label="rollout actions">
          {["pause", "resume", "promote", "undo"].map((a) => (
            <ActionButton key={a} label={a} params={params(a)} notify={notify} />
          ))}
        </div>
      ) : null}
      <h3>Progress</h3>
      <Progress data={data} />
      <Conditions ds={ds} />
      <h3>Why</h3>
      <OnDemand label="Explain the unavailable pods (daemonbus why)">
        <Why params={{ kind: "daemonset", namespace: ns, name: ds.metadata.name, g: st.observedGeneration }} />
      </OnDemand>
      <h3>Revisions</h3>
      <History fleet={fleet} ds={ds} />
      <Events ds={ds} />
    </div>
  );
}

// ---- node and cell ------------------------------------------------------------------------

export function NodePanel({ fleet, name, notify, now }) {
  const node = fleet.nodes.get(name);
  const may = useCan("patch", "", "nodes", "");
  if (!node) return <p>node {name} is gone</p>;
  const cordoned = node.spec && node.spec.unschedulable;
  return (
    <div>
      <h2>node {name}{cordoned ? " (cordoned)" : ""}</h2>
      {may ? (
        <div class="actions" role="group" aria-label="node actions">
          <ActionButton label={cordoned ? "uncordon" : "cordon"}
            params={{ action: cordoned ? "uncordon" : "cordon", node: name }} notify={notify} />
        </div>
      ) : null}
      <table class="kv">
        <caption>Labels</caption>
        <tbody>
          {Object.entries(node.metadata.labels || {}).map(([k, v]) => (
            <tr key={k}><th scope="row">{k}</th><td>{v}</td></tr>))}
        </tbody>
      </table>
      <p>Taints: {((node.spec && node.spec.taints) || []).map((t) =>
        `${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`).join(", ") || "none"}</p>
      <h3>DaemonSets here</h3>
      <ul>
        {fleet.sortedDaemonSets().map((ds) => (
          <li key={ds.metadata.uid}>{ds.metadata.namespace}/{ds.metadata.name}:{" "}
            {STATES[fleet.cell(ds, name, now).state].text}</li>
        ))}
      </ul>
    </div>
  );
}

export function CellPanel({ fleet, name, ds, now }) {
  const cell = fleet.cell(ds, name, now);
  const pod = cell.pod;
  const ns = ds.metadata.namespace;
  const params = pod
    ? { kind: "pod", namespace: ns, name: pod.metadata.name, rv: pod.metadata.resourceVersion }
    : { kind: "node", namespace: ns, name: ds.metadata.name, node: name };
  return (
    <div>
      <h2>{ns}/{ds.metadata.name} on {name}</h2>
      <p class={`state-line s-${cell.state}`}>{STATES[cell.state].text}
        {cell.reason ? `: ${cell.reason}` : ""}</p>
      {pod ? <p>pod {pod.metadata.name}, revision {(pod.metadata.labels || {})["controller-revision-hash"]},
        phase {(pod.status && pod.status.phase) || "Pending"}</p> : null}
      <h3>Why</h3>
      <Why params={params} />
    </div>
  );
}
