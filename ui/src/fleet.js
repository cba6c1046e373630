// The fleet as the watches deliver it, and what the grid shows of it: each cell's state
// (a DaemonSet's pod on a node), groups of nodes by a label, and per-group counts.

export const STATES = {
  "new-available": { short: "N", text: "new revision, available" },
  "new-ready": { short: "n", text: "new revision, ready (not yet available)" },
  "new-pending": { short: "n…", text: "new revision, not ready" },
  "old-available": { short: "O", text: "old revision, available" },
  "old-ready": { short: "o", text: "old revision, ready (not yet available)" },
  "old-pending": { short: "o…", text: "old revision, not ready" },
  failed: { short: "F", text: "failed" },
  crashloop: { short: "C", text: "crash-looping" },
  terminating: { short: "T", text: "terminating" },
  missing: { short: "?", text: "missing: should run here, no pod" },
  none: { short: "", text: "not scheduled here" },
  unknown: { short: "·", text: "no pod; placement not known yet" },
};

const key = (o) => `${o.metadata.namespace || ""}/${o.metadata.name}`;

function targetNode(pod) {
  if (pod.spec && pod.spec.nodeName) return pod.spec.nodeName;
  const terms =
    pod.spec &&
    pod.spec.affinity &&
    pod.spec.affinity.nodeAffinity &&
    pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution &&
    pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
      .nodeSelectorTerms;
  for (const term of terms || []) {
    for (const f of term.matchFields || []) {
      if (f.key === "metadata.name" && f.operator === "In" && f.values.length === 1) {
        return f.values[0];
      }
    }
  }
  return "";
}

function controllerUid(obj) {
  const ref = (obj.metadata.ownerReferences || []).find((r) => r.controller);
  return ref ? ref.uid : "";
}

// `hashes`: the DaemonSet's newest revision's hash and every hash of its revisions known; a
// pod of a hash not known yet is of a revision newer than the page has seen (the revisions'
// watch is a stream of its own), so new.
function podState(pod, ds, hashes, now) {
  if (pod.metadata.deletionTimestamp) return "terminating";
  const status = pod.status || {};
  if (status.phase === "Failed") return "failed";
  const waiting = (status.containerStatuses || []).some(
    (c) => c.state && c.state.waiting && c.state.waiting.reason === "CrashLoopBackOff",
  );
  if (waiting) return "crashloop";
  const hash = (pod.metadata.labels || {})["controller-revision-hash"];
  const rev = !hashes || hash === hashes.newest || !hashes.known.has(hash) ? "new" : "old";
  const ready = (status.conditions || []).find((c) => c.type === "Ready");
  if (!ready || ready.status !== "True") return `${rev}-pending`;
  const minReady = (ds.spec && ds.spec.minReadySeconds) || 0;
  const since = Date.parse(ready.lastTransitionTime || "") / 1000;
  if (minReady && !(since + minReady <= now)) return `${rev}-ready`;
  return `${rev}-available`;
}

export class Fleet {
  constructor() {
    this.nodes = new Map(); // name -> Node
    this.daemonsets = new Map(); // uid -> DaemonSet
    this.pods = new Map(); // ns/name -> Pod
    this.revisions = new Map(); // ns/name -> ControllerRevision
    this.cells = new Map(); // dsUid|node -> Set of pod keys
    this.hashes = new Map(); // dsUid -> {newest, revision, known: Set of hashes}
    this.placement = new Map(); // dsUid -> {generation, notScheduled: {node: reason}}
    this.progress = new Map(); // dsUid -> [[t], [desired], [updated], [available]]
    this.version = 0;
    this.nodesVersion = 0; // moves with the nodes only: the groups are cached by it
    this._groups = null;
  }

  // ---- folding in the watches ----------------------------------------------------------

  _cellOf(pod) {
    return `${controllerUid(pod)}|${targetNode(pod)}`;
  }

  _addPod(pod) {
    const k = key(pod);
    this._removePod(k);
    this.pods.set(k, pod);
    const c = this._cellOf(pod);
    if (!this.cells.has(c)) this.cells.set(c, new Set());
    this.cells.get(c).add(k);
  }

  _removePod(k) {
    const old = this.pods.get(k);
    if (!old) return;
    this.pods.delete(k);
    const set = this.cells.get(this._cellOf(old));
    if (set) set.delete(k);
  }

  _recordProgress(ds) {
    const st = ds.status || {};
    let p = this.progress.get(ds.metadata.uid);
    if (!p) {
      p = [[], [], [], []];
      this.progress.set(ds.metadata.uid, p);
    }
    const row = [
      Date.now() / 1000,
      st.desiredNumberScheduled || 0,
      st.updatedNumberScheduled || 0,
      st.numberAvailable || 0,
    ];
    const n = p[0].length;
    if (n && p[1][n - 1] === row[1] && p[2][n - 1] === row[2] && p[3][n - 1] === row[3]) return;
    if (n && row[0] <= p[0][n - 1]) row[0] = p[0][n - 1] + 0.001;
    row.forEach((v, i) => p[i].push(v));
  }

  // The DaemonSet's counters read from the log (oldest first, [t, desired, updated,
  // available] each), put before the points seen live since the page opened.
  seedProgress(uid, points) {
    const p = this.progress.get(uid) || [[], [], [], []];
    const first = p[0].length ? p[0][0] : Infinity;
    const older = points.filter((pt) => pt.length === 4 && pt[0] < first);
    this.progress.set(uid, p.map((col, i) => [...older.map((pt) => pt[i]), ...col]));
    this.version++;
  }

  _recomputeHashes() {
    const out = new Map();
    for (const cr of this.revisions.values()) {
      const uid = controllerUid(cr);
      const hash = (cr.metadata.labels || {})["controller-revision-hash"];
      if (!out.has(uid)) out.set(uid, { newest: hash, revision: -1, known: new Set() });
      const h = out.get(uid);
      h.known.add(hash);
      if ((cr.revision || 0) > h.revision) Object.assign(h, { newest: hash, revision: cr.revision || 0 });
    }
    this.hashes = out;
  }

  reset(kind, items) {
    if (kind === "Pod") {
      this.pods.clear();
      this.cells.clear();
      items.forEach((p) => this._addPod(p));
    } else if (kind === "Node") {
      this.nodes = new Map(items.map((n) => [n.metadata.name, n]));
      this.nodesVersion++;
    } else if (kind === "DaemonSet") {
      this.daemonsets = new Map(items.map((d) => [d.metadata.uid, d]));
      items.forEach((d) => this._recordProgress(d));
    } else if (kind === "ControllerRevision") {
      this.revisions = new Map(items.map((r) => [key(r), r]));
      this._recomputeHashes();
    }
    this.version++;
  }

  // Folds in a batch of watch events; returns what changed (for refetching placement).
  apply(kind, events) {
    const changed = { placement: false };
    for (const { type, object } of events) {
      if (kind === "Pod") {
        if (type === "DELETED") this._removePod(key(object));
        else this._addPod(object);
      } else if (kind === "Node") {
        const name = object.metadata.name;
        const before = this.nodes.get(name);
        if (type === "DELETED") this.nodes.delete(name);
        else this.nodes.set(name, object);
        this.nodesVersion++;
        if (!before || type === "DELETED" || placementInputs(before) !== placementInputs(object)) {
          changed.placement = true;
        }
      } else if (kind === "DaemonSet") {
        const uid = object.metadata.uid;
        const before = this.daemonsets.get(uid);
        if (type === "DELETED") this.daemonsets.delete(uid);
        else {
          this.daemonsets.set(uid, object);
          this._recordProgress(object);
        }
        if (!before || before.metadata.generation !== object.metadata.generation) {
          changed.placement = true;
        }
      } else if (kind === "ControllerRevision") {
        if (type === "DELETED") this.revisions.delete(key(object));
        else this.revisions.set(key(object), object);
      }
    }
    if (kind === "ControllerRevision") this._recomputeHashes();
    this.version++;
    return changed;
  }

  // ---- what the grid shows --------------------------------------------------------------

  sortedDaemonSets() {
    return [...this.daemonsets.values()].sort((a, b) => key(a).localeCompare(key(b)));
  }

  cell(ds, nodeName, now) {
    const set = this.cells.get(`${ds.metadata.uid}|${nodeName}`);
    if (set && set.size) {
      // the live pod speaks for the cell; a terminating one only when it is alone
      let pod = null;
      for (const k of set) {
        const p = this.pods.get(k);
        if (!pod || !p.metadata.deletionTimestamp) pod = p;
        if (!p.metadata.deletionTimestamp) break;
      }
      return { state: podState(pod, ds, this.hashes.get(ds.metadata.uid), now), pod };
    }
    const pl = this.placement.get(ds.metadata.uid);
    if (pl && pl.notScheduled[nodeName]) {
      return { state: "none", reason: pl.notScheduled[nodeName] };
    }
    if (!pl) return { state: "unknown" };
    return { state: "missing" };
  }

  // Nodes by the value of label `by` ("" groups nothing), each group sorted by name.
  groups(by) {
    const c = this._groups;
    if (c && c.by === by && c.version === this.nodesVersion) return c.groups;
    const out = new Map();
    for (const node of this.nodes.values()) {
      const g = by ? (node.metadata.labels || {})[by] || "(no label)" : "all nodes";
      if (!out.has(g)) out.set(g, []);
      out.get(g).push(node);
    }
    const byName = (a, b) => (a.metadata.name < b.metadata.name ? -1 : 1);
    for (const list of out.values()) list.sort(byName);
    const groups = [...out].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    this._groups = { by, version: this.nodesVersion, groups };
    return groups;
  }

  // Counts of the cells of `nodes` for `ds`: by state, and those that should run there.
  counts(ds, nodes, now) {
    const c = { total: 0, new: 0, available: 0, bad: 0, missing: 0 };
    for (const n of nodes) {
      const { state } = this.cell(ds, n.metadata.name, now);
      if (state === "none" || state === "unknown") continue;
      c.total++;
      if (state.startsWith("new")) c.new++;
      if (state.endsWith("available")) c.available++;
      if (state === "failed" || state === "crashloop") c.bad++;
      if (state === "missing") c.missing++;
    }
    return c;
  }
}

function placementInputs(node) {
  return JSON.stringify([node.metadata.labels, node.spec && node.spec.taints,
    node.spec && node.spec.unschedulable]);
}
