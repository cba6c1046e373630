// The fleet view: a token, filters, the grid, and a side panel. Every object comes from the
// API's LIST+WATCH; the page re-renders at most once per animation frame however many
// events arrive.

import { render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { listWatch, query, request, setToken } from "./api.js";
import { Fleet } from "./fleet.js";
import { Grid, rowsOf } from "./grid.jsx";
import { CellPanel, DaemonSetPanel, NodePanel } from "./panels.jsx";

const TOKEN_KEY = "daemonbus.token";
const AUTO_OPEN = 200; // groups start open while the fleet has at most this many nodes
const LAG_SAMPLES = 100000;

// The page's own measure of how far behind it is: for each render, the time from the log
// write of the oldest event it shows for the first time (a resourceVersion is the log entry's
// id, milliseconds of the Redis clock) to after the DOM is updated. Read by the browser
// tests and ops/bench_fleet_ui.py; the last LAG_SAMPLES renders are kept.
// arrivalMs: the same from the log write to the batch's arrival in the page (the API server's
// and the connection's part of the lag).
const stats = { lagsMs: [], arrivalMs: [], oldest: 0 };
window.daemonbusFleet = stats;

function keep(list, value) {
  list.push(value);
  if (list.length > LAG_SAMPLES) list.splice(0, list.length - LAG_SAMPLES);
}

function noteOldest(batch) {
  let oldest = 0;
  for (const ev of batch) {
    const rv = ev.object && ev.object.metadata && ev.object.metadata.resourceVersion;
    const ms = rv ? Number(rv.split("-")[0]) : 0;
    if (ms && (!oldest || ms < oldest)) oldest = ms;
  }
  if (!oldest) return;
  keep(stats.arrivalMs, Date.now() - oldest);
  if (!stats.oldest || oldest < stats.oldest) stats.oldest = oldest;
}

function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function Login({ onToken, error }) {
  const [value, setValue] = useState("");
  return (
    <main class="login">
      <h1>daemonbus fleet</h1>
      <form onSubmit={(e) => { e.preventDefault(); onToken(value.trim()); }}>
        <label for="token">Bearer token (from the API server's token file)</label>
        <input id="token" type="password" autocomplete="off" value={value}
          onInput={(e) => setValue(e.currentTarget.value)} required />
        <button type="submit">Sign in</button>
        {error ? <p class="error" role="alert">{error}</p> : null}
      </form>
    </main>
  );
}

function Filters({ filters, onApply }) {
  const [f, setF] = useState(filters);
  const field = (id, label, hint) => (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} value={f[id]} placeholder={hint} aria-describedby={`${id}-hint`}
        onInput={(e) => setF({ ...f, [id]: e.currentTarget.value })} />
      <span id={`${id}-hint`} class="sr-only">{hint}</span>
    </div>
  );
  return (
    <form class="filters" aria-label="filters" onSubmit={(e) => { e.preventDefault(); onApply(f); }}>
      {field("namespace", "Namespace", "all namespaces")}
      {field("selector", "Node label selector", "e.g. zone=a,tier!=edge")}
      {field("groupBy", "Group by label", "topology.kubernetes.io/zone")}
      <button type="submit">Apply</button>
    </form>
  );
}

const WATCHED = [
  ["Node", () => "/api/v1/nodes", (f) => ({ labelSelector: f.selector })],
  ["Pod", (f) => (f.namespace ? `/api/v1/namespaces/${f.namespace}/pods` : "/api/v1/pods"), () => ({})],
  ["DaemonSet", (f) => (f.namespace ? `/apis/apps/v1/namespaces/${f.namespace}/daemonsets`
    : "/apis/apps/v1/daemonsets"), () => ({})],
  ["ControllerRevision", (f) => (f.namespace
    ? `/apis/apps/v1/namespaces/${f.namespace}/controllerrevisions`
    : "/apis/apps/v1/controllerrevisions"), () => ({})],
];

function App({ token, onLogout }) {
  const [filters, setFilters] = useState(() => {
    const p = new URLSearchParams(location.search);
    return { namespace: p.get("namespace") || "", selector: p.get("selector") || "",
      groupBy: p.get("groupBy") ?? "topology.kubernetes.io/zone" };
  });
  const fleet = useMemo(() => new Fleet(), [filters.namespace, filters.selector]);
  // what the page shows, by DaemonSet name, for the tests and the benchmark
  stats.counts = () => Object.fromEntries(fleet.sortedDaemonSets().map((ds) =>
    [ds.metadata.name, fleet.counts(ds, [...fleet.nodes.values()], Date.now() / 1000)]));
  const [version, setVersion] = useState(0);
  const [open, setOpen] = useState(null);
  const [toggled, setToggled] = useState(() => new Map());
  const [message, setMessage] = useState(null);
  const [connected, setConnected] = useState({});
  const [error, setError] = useState("");
  const frame = useRef(0);

  const redraw = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      setVersion(fleet.version);
    });
  };

  // placement: refetched when a DaemonSet's generation or a node's labels/taints change
  const placementDue = useRef(new Set());
  const placementTimer = useRef(0);
  const refreshPlacement = (all) => {
    for (const ds of fleet.daemonsets.values()) {
      const pl = fleet.placement.get(ds.metadata.uid);
      if (all || !pl || pl.generation !== ds.metadata.generation) placementDue.current.add(ds.metadata.uid);
    }
    if (placementTimer.current) return;
    placementTimer.current = setTimeout(async () => {
      placementTimer.current = 0;
      const due = [...placementDue.current];
      placementDue.current.clear();
      for (const uid of due) {
        const ds = fleet.daemonsets.get(uid);
        if (!ds) continue;
        try {
          fleet.placement.set(uid, await request(`/ui/api/placement${query({
            namespace: ds.metadata.namespace, name: ds.metadata.name })}`));
          fleet.version++;
          redraw();
        } catch (err) {
          setError(`placement of ${ds.metadata.name}: ${err.message}`);
        }
      }
    }, 300);
  };

  useEffect(() => {
    const stops = WATCHED.map(([kind, path, params]) => listWatch(path(filters), params(filters), {
      reset: (items) => {
        fleet.reset(kind, items);
        if (kind === "Node" || kind === "DaemonSet") refreshPlacement(kind === "Node");
        redraw();
      },
      events: (batch) => {
        noteOldest(batch);
        const changed = fleet.apply(kind, batch);
        if (changed.placement) refreshPlacement(kind === "Node");
        redraw();
      },
      connected: (up) => setConnected((c) => ({ ...c, [kind]: up })),
      error: (err) => {
        if (err.status === 401) onLogout("the token was refused (401)");
        else setError(`${kind}: ${err.message}`);
      },
    }));
    return () => stops.forEach((stop) => stop());
  }, [fleet]);

  useEffect(() => {  // after the render is in the DOM
    if (!stats.oldest) return;
    keep(stats.lagsMs, Date.now() - stats.oldest);
    stats.oldest = 0;
  }, [version]);

  const apply = (f) => {
    setFilters(f);
    const q = new URLSearchParams();
    for (const k of ["namespace", "selector", "groupBy"]) if (f[k]) q.set(k, f[k]);
    history.replaceState(null, "", `${location.pathname}${q.toString() ? `?${q}` : ""}`);
  };

  const now = Date.now() / 1000;
  const nodeCount = fleet.nodes.size;
  const expanded = (name) => toggled.has(name) ? toggled.get(name) : nodeCount <= AUTO_OPEN;
  const rows = rowsOf(fleet, filters.groupBy, expanded);
  const daemonsets = fleet.sortedDaemonSets();
  const live = WATCHED.every(([kind]) => connected[kind]);
  const notify = (text, bad) => setMessage({ text, bad });

  let panel = null;
  if (open) {
    const ds = open.ds && fleet.daemonsets.get(open.ds.metadata.uid);
    if (open.kind === "daemonset" && ds) panel = <DaemonSetPanel fleet={fleet} ds={ds} notify={notify} />;
    else if (open.kind === "node") panel = <NodePanel fleet={fleet} name={open.node} notify={notify} now={now} />;
    else if (open.kind === "cell" && ds) panel = <CellPanel fleet={fleet} name={open.node} ds={ds} now={now} />;
  }

  return (
    <div class="app">
      <header>
        <h1>daemonbus fleet</h1>
        <span class={`live ${live ? "on" : "off"}`} role="status" data-live={live ? "yes" : "no"}>
          {live ? "live" : "connecting…"} · {nodeCount} nodes · {daemonsets.length} DaemonSets
        </span>
        <button type="button" class="link" onClick={() => onLogout("")}>sign out</button>
      </header>
      <Filters filters={filters} onApply={apply} />
      <Legend />
      {error ? <p class="error" role="alert">{error}
        <button type="button" class="link" onClick={() => setError("")}>dismiss</button></p> : null}
      <div class="main">
        <Grid fleet={fleet} version={version} daemonsets={daemonsets} rows={rows} now={now}
          onOpen={setOpen}
          onToggle={(name) => setToggled(new Map(toggled).set(name, !expanded(name)))} />
        {panel ? (
          <aside class="panel" aria-label="details">
            <button type="button" class="close" onClick={() => setOpen(null)}
              aria-label="close details">×</button>
            {panel}
          </aside>
        ) : null}
      </div>
      <p class={`toast ${message && message.bad ? "bad" : ""}`} role="status" aria-live="polite">
        {message ? message.text : ""}
      </p>
    </div>
  );
}

function Legend() {
  const items = [["new-available", "N", "new, available"], ["old-available", "O", "old, available"],
    ["new-pending", "n…", "new, not ready"], ["failed", "F", "failed"], ["crashloop", "C", "crash-looping"],
    ["missing", "?", "missing"], ["terminating", "T", "terminating"], ["none", "", "not scheduled"]];
  return (
    <ul class="legend" aria-label="legend">
      {items.map(([s, short, text]) => (
        <li key={s}><span class={`swatch s-${s}`} aria-hidden="true">{short}</span>{text}</li>
      ))}
    </ul>
  );
}

function Root() {
  const [token, setTok] = useState(takeToken);
  const [error, setError] = useState("");
  setToken(token);
  if (!token) {
    return <Login error={error} onToken={(t) => { sessionStorage.setItem(TOKEN_KEY, t); setTok(t); }} />;
  }
  return <App token={token} onLogout={(why) => {
    sessionStorage.removeItem(TOKEN_KEY);
    setError(why);
    setTok("");
  }} />;
}

render(<Root />, document.getElementById("root"));
