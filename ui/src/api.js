// The API server, as the page uses it: requests with the bearer token, and LIST+WATCH.
//
// A watch is a LIST, then a WATCH from the list's resourceVersion (one chunked stream of JSON
// lines). A stream that ends is resumed from the last position it delivered (bookmarks keep
// that position fresh); a 410 Expired lists again. Nothing polls: an error retries after a
// growing delay.

let token = "";

export function setToken(value) {
  token = value;
}

export class ApiError extends Error {
  constructor(status, doc) {
    super((doc && doc.message) || `HTTP ${status}`);
    this.status = status;
    this.doc = doc;
  }
}

function headers(extra) {
  return { Authorization: `Bearer ${token}`, Accept: "application/json", ...extra };
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

// A read that fails on the network (no answer at all: the browser's few connections to one
// server are mostly held by the watches, and a queued request can be dropped) is tried again
// a few times; a write never is, and an HTTP error never is.
const READ_TRIES = 4;

export async function request(path, { method = "GET", body, contentType } = {}) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = contentType || "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  for (let i = 1; ; i++) {
    try {
      resp = await fetch(path, init);
      break;
    } catch (err) {
      if (method !== "GET" || i >= READ_TRIES) throw err;
      await sleep(250 * 2 ** i);
    }
  }
  const text = await resp.text();
  let doc = null;
  try {
    doc = text ? JSON.parse(text) : null;
  } catch {
    doc = { message: text };
  }
  if (!resp.ok) throw new ApiError(resp.status, doc);
  return doc;
}

// May the user `verb` `resource` (in `namespace`)? A SelfSubjectAccessReview, as
// `kubectl auth can-i` asks.
export async function canI(verb, group, resource, namespace) {
  const review = {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SelfSubjectAccessReview",
    spec: { resourceAttributes: { verb, group, resource, namespace } },
  };
  const out = await request("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
    method: "POST",
    body: review,
  });
  return Boolean(out && out.status && out.status.allowed);
}

class Expired extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// LIST+WATCH `path` with `params` (labelSelector, fieldSelector). `on.reset(items)` gets each
// full list, `on.events(batch)` each batch of watch events read together, `on.error(err)`
// each failure. Returns a function that stops it.
export function listWatch(path, params, on) {
  let stopped = false;
  let abort = null;
  (async () => {
    let rv = null;
    let delay = 500;
    while (!stopped) {
      try {
        if (rv === null) {
          const list = await request(path + query(params));
          rv = list.metadata.resourceVersion;
          on.reset(list.items || []);
        }
        abort = new AbortController();
        const q = { ...params, watch: "true", resourceVersion: rv, allowWatchBookmarks: "true" };
        const resp = await fetch(path + query(q), { headers: headers(), signal: abort.signal });
        if (resp.status === 410) throw new Expired();
        if (!resp.ok) throw new ApiError(resp.status, await resp.json().catch(() => null));
        on.connected && on.connected(true);
        delay = 500;
        const reader = resp.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += decoder.decode(value, { stream: true });
          const lines = buf.split("\n");
          buf = lines.pop();
          const batch = [];
          for (const line of lines) {
            if (!line.trim()) continue;
            const ev = JSON.parse(line);
            if (ev.type === "ERROR") {
              if (ev.object && ev.object.code === 410) throw new Expired();
              throw new ApiError(ev.object && ev.object.code, ev.object);
            }
            const pos = ev.object && ev.object.metadata && ev.object.metadata.resourceVersion;
            if (pos) rv = pos;
            if (ev.type !== "BOOKMARK") batch.push(ev);
          }
          if (batch.length) on.events(batch);
        }
      } catch (err) {
        if (stopped) return;
        if (err instanceof Expired) {
          rv = null;
          continue;
        }
        on.connected && on.connected(false);
        on.error && on.error(err);
        await sleep(delay);
        delay = Math.min(delay * 2, 10000);
      }
    }
  })();
  return () => {
    stopped = true;
    if (abort) abort.abort();
  };
}
