// The fleet grid: nodes (rows, grouped by a label) × DaemonSets (columns). Only the rows in
// view are in the DOM (a virtual list of fixed-height rows); a group folds to one row of
// counts. Keyboard: arrows move between cells, Home/End, PageUp/PageDown, Enter opens.

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { STATES } from "./fleet.js";

export const ROW_HEIGHT = 28;
const OVERSCAN = 6;

export function rowsOf(fleet, groupBy, expanded) {
  const rows = [];
  for (const [name, nodes] of fleet.groups(groupBy)) {
    const open = expanded(name, nodes.length);
    rows.push({ kind: "group", name, nodes, open });
    if (open) for (const node of nodes) rows.push({ kind: "node", node, group: name });
  }
  return rows;
}

function GroupCell({ counts, ds }) {
  const pct = (n) => (counts.total ? (100 * n) / counts.total : 0);
  const label =
    `${ds.metadata.name}: ${counts.new} of ${counts.total} updated, ` +
    `${counts.available} available, ${counts.bad} failed or crash-looping, ` +
    `${counts.missing} missing`;
  return (
    <span class="agg" title={label} aria-label={label}>
      <span class="bar" aria-hidden="true">
        <span class="bar-new" style={{ width: `${pct(counts.new)}%` }} />
        <span class="bar-bad" style={{ width: `${pct(counts.bad + counts.missing)}%` }} />
      </span>
      <span class="agg-text" aria-hidden="true">
        {counts.new}/{counts.total}
        {counts.bad + counts.missing ? ` !${counts.bad + counts.missing}` : ""}
      </span>
    </span>
  );
}

export function Grid({ fleet, version, daemonsets, rows, onOpen, onToggle, now }) {
  const scroller = useRef(null);
  const [top, setTop] = useState(0);
  const [height, setHeight] = useState(600);
  const [focus, setFocus] = useState({ r: 0, c: 0 });
  const wantFocus = useRef(false);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return undefined;
    const measure = () => setHeight(el.clientHeight || 600);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
  const cols = daemonsets.length + 1;
  const r = Math.min(focus.r, Math.max(0, rows.length - 1));
  const c = Math.min(focus.c, cols - 1);

  useLayoutEffect(() => {
    if (!wantFocus.current) return;
    wantFocus.current = false;
    const el = scroller.current && scroller.current.querySelector(`[data-r="${r}"][data-c="${c}"]`);
    if (el) el.focus();
  });

  const move = (nr, nc) => {
    nr = Math.max(0, Math.min(rows.length - 1, nr));
    nc = Math.max(0, Math.min(cols - 1, nc));
    const el = scroller.current;
    const y = nr * ROW_HEIGHT;
    if (y < el.scrollTop + ROW_HEIGHT) el.scrollTop = Math.max(0, y - ROW_HEIGHT);
    else if (y + ROW_HEIGHT > el.scrollTop + el.clientHeight) {
      el.scrollTop = y + 2 * ROW_HEIGHT - el.clientHeight;
    }
    setTop(el.scrollTop);
    wantFocus.current = true;
    setFocus({ r: nr, c: nc });
  };

  const activate = (row, col) => {
    if (row.kind === "group") {
      if (col === 0) onToggle(row.name);
      else onOpen({ kind: "daemonset", ds: daemonsets[col - 1] });
    } else if (col === 0) onOpen({ kind: "node", node: row.node.metadata.name });
    else onOpen({ kind: "cell", node: row.node.metadata.name, ds: daemonsets[col - 1] });
  };

  const onKey = (e) => {
    const page = Math.max(1, Math.floor(height / ROW_HEIGHT) - 1);
    const keys = {
      ArrowDown: [r + 1, c], ArrowUp: [r - 1, c], ArrowRight: [r, c + 1], ArrowLeft: [r, c - 1],
      PageDown: [r + page, c], PageUp: [r - page, c],
      Home: e.ctrlKey ? [0, 0] : [r, 0], End: e.ctrlKey ? [rows.length - 1, cols - 1] : [r, cols - 1],
    };
    if (keys[e.key]) {
      e.preventDefault();
      move(...keys[e.key]);
    } else if ((e.key === "Enter" || e.key === " ") && rows[r]) {
      e.preventDefault();
      activate(rows[r], c);
    }
  };

  const cellProps = (ri, ci) => ({
    role: "gridcell",
    "data-r": ri,
    "data-c": ci,
    "aria-colindex": ci + 1,
    tabIndex: ri === r && ci === c ? 0 : -1,
    onClick: () => {
      setFocus({ r: ri, c: ci });
      activate(rows[ri], ci);
    },
  });

  const visible = [];
  for (let i = first; i < last; i++) {
    const row = rows[i];
    if (row.kind === "group") {
      visible.push(
        <div role="row" class="row group-row" aria-rowindex={i + 2} key={`g:${row.name}`}
          aria-expanded={row.open ? "true" : "false"} style={{ top: `${i * ROW_HEIGHT}px` }}>
          <div {...cellProps(i, 0)} class="cell name">
            <span aria-hidden="true">{row.open ? "▾" : "▸"}&nbsp;</span>
            {row.name} <span class="muted">({row.nodes.length} nodes)</span>
          </div>
          {daemonsets.map((ds, j) => (
            <div {...cellProps(i, j + 1)} class="cell" key={ds.metadata.uid}>
              <GroupCell ds={ds} counts={fleet.counts(ds, row.nodes, now)} />
            </div>
          ))}
        </div>,
      );
    } else {
      const name = row.node.metadata.name;
      const cordoned = row.node.spec && row.node.spec.unschedulable;
      visible.push(
        <div role="row" class="row" aria-rowindex={i + 2} key={`n:${name}`}
          style={{ top: `${i * ROW_HEIGHT}px` }}>
          <div {...cellProps(i, 0)} class="cell name node-name" role="rowheader">
            {name}
            {cordoned ? <span class="tag">cordoned</span> : null}
          </div>
          {daemonsets.map((ds, j) => {
            const cell = fleet.cell(ds, name, now);
            const info = STATES[cell.state];
            const label = `${name}, ${ds.metadata.name}: ${info.text}` +
              (cell.reason ? ` (${cell.reason})` : "");
            return (
              <div {...cellProps(i, j + 1)} class={`cell state s-${cell.state}`}
                key={ds.metadata.uid} data-state={cell.state} data-node={name}
                data-ds={ds.metadata.name} aria-label={label} title={label}>
                <span aria-hidden="true">{info.short}</span>
              </div>
            );
          })}
        </div>,
      );
    }
  }

  const style = { "--cols": daemonsets.length };
  return (
    <div class="grid-wrap" style={style}>
      <div role="grid" aria-label="Fleet: nodes by DaemonSet" aria-rowcount={rows.length + 1}
        aria-colcount={cols} class="grid" data-version={version} onKeyDown={onKey}>
        <div role="row" class="row head" aria-rowindex={1}>
          <div role="columnheader" class="cell name">Node</div>
          {daemonsets.map((ds) => (
            <div role="columnheader" class="cell colhead" key={ds.metadata.uid}>
              <button type="button" class="link" onClick={() => onOpen({ kind: "daemonset", ds })}
                title={`${ds.metadata.namespace}/${ds.metadata.name}`}>
                {ds.metadata.name}
              </button>
            </div>
          ))}
        </div>
        <div class="scroller" role="rowgroup" ref={scroller} onScroll={(e) => setTop(e.currentTarget.scrollTop)}>
          <div class="spacer" role="presentation" style={{ height: `${rows.length * ROW_HEIGHT}px` }}>{visible}</div>
        </div>
      </div>
    </div>
  );
}
