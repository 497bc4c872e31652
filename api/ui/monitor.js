// The tracebus web monitor. Polls the JSON API every POLL_MS and follows running jobs'
// progress over server-sent events.
//
// Identity: the page calls the API as the browser does, so a trusted reverse proxy (which
// adds X-User-Id from its own session) or anonymous access work as they are. With bearer
// tokens configured, the token typed in the header is kept in sessionStorage (this tab only,
// gone when it closes) and sent as "Authorization: Bearer ..." by fetch. No cookie is set,
// so another site cannot make the browser act here. Server-sent events are read with fetch
// too (EventSource cannot send a header), resuming with Last-Event-ID.
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "tracebus.token";
const MAX_STREAMS = 3;            // HTTP/1.1 allows ~6 connections per origin: keep some for polls
const STREAM_BACKOFF_MS = 10000;  // after a stream fails, wait before opening it again
const RESULT_ROWS = 20;

// The job states' words come from GET /api/v1/states (tracebus/trace/states.py), read once
// after sign-in: the page keeps no table of states of its own.
const state = {me: null, states: null, queues: null, streams: new Map(), streamFailed: new Map(),
               jobs: new Map()};
const inStates = (name, job) => Boolean(state.states) && state.states[name].includes(job.state);

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

// -- calling the API ------------------------------------------------------------------------
function headers(extra) {
  const h = Object.assign({Accept: "application/json"}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

async function api(path, {method = "GET", body} = {}) {
  const init = {method, cache: "no-store",
                headers: headers(body === undefined ? {} : {"Content-Type": "application/json"})};
  if (body !== undefined) init.body = JSON.stringify(body);
  const resp = await fetch(path, init);
  let doc = null;
  try { doc = await resp.json(); } catch (e) { doc = null; }
  // The original's envelope {success, data | error, meta}: the dashboard's routes (/api/trace/*)
  // answer in it by default, every route with TRACEBUS_API_ENVELOPE=1.
  if (doc && typeof doc === "object" && "success" in doc && "meta" in doc) {
    doc = doc.success ? doc.data : {error: doc.error};
  }
  if (!resp.ok) {
    const err = (doc && doc.error) || {};
    throw new ApiError(resp.status, err.code || "HTTP_" + resp.status, err.message || resp.statusText);
  }
  return doc;
}

// -- DOM helpers (text only: reasons and tracebacks are never parsed as HTML) -------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function showError(section, error) {
  const p = document.querySelector(`[data-error-for="${section}"]`);
  if (!p) return;
  p.hidden = !error;
  p.textContent = error ? `${error.code || "ERROR"}: ${error.message}` : "";
}

function notice(text) {
  const p = document.getElementById("notice");
  p.hidden = !text;
  p.textContent = text || "";
}

const fmt = {
  int: (n) => (n === null || n === undefined) ? "–" : Number(n).toLocaleString("en-US"),
  rate: (n) => (n === null || n === undefined) ? "–" : n.toFixed(n < 10 ? 1 : 0),
  bytes(n) {
    if (!n) return "0 B";
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  },
  secs(s) {
    if (s === null || s === undefined) return "–";
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  },
  time: (epoch) => epoch ? new Date(epoch * 1000).toLocaleString() : "never",
};

// -- who am I -------------------------------------------------------------------------------
async function refreshMe() {
  try {
    state.me = await api("/api/v1/me");
    if (!state.states) state.states = await api("/api/v1/states");
    const who = document.getElementById("whoami");
    who.textContent = `signed in as ${state.me.user}`;
    if (state.me.admin) who.append(" ", el("span", {class: "badge", text: "operator"}));
    document.getElementById("dead").hidden = !state.me.admin;
    notice("");
    return true;
  } catch (e) {
    state.me = null;
    document.getElementById("whoami").textContent = "not signed in";
    if (e.status !== 401) notice(`${e.code}: ${e.message}`);
    else if (sessionStorage.getItem(TOKEN_KEY)) notice(`The API refused this token (${e.message}): type another.`);
    else notice("The API wants a bearer token: type it in the field above (it stays in this tab only).");
    return false;
  }
}

// -- queues -----------------------------------------------------------------------------------
async function refreshQueues() {
  const doc = await api("/api/v1/queues");
  const before = state.queues;
  const seconds = before ? (doc.time_ms - before.time_ms) / 1000 : 0;
  const prev = new Map((before ? before.queues : []).map((q) => [q.queue, q]));
  const rate = (q, field) => {
    const p = prev.get(q.queue);
    return p && seconds > 0 ? Math.max(0, q[field] - p[field]) / seconds : null;
  };
  const body = document.getElementById("queues-body");
  body.replaceChildren(...doc.queues.map((q) => el("tr", {"data-queue": q.queue},
    el("td", {class: "mono", text: q.queue}),
    el("td", {class: "num", text: fmt.int(q.length)}), el("td", {class: "num", text: fmt.int(q.pending)}),
    el("td", {class: "num", text: fmt.int(q.delayed)}),
    el("td", {class: "num" + (q.dead ? " state-bad" : ""), text: fmt.int(q.dead)}),
    el("td", {class: "num", text: fmt.secs(q.lag_ms / 1000)}),
    el("td", {class: "num", text: fmt.rate(rate(q, "processed"))}),
    el("td", {class: "num", text: fmt.rate(rate(q, "failed"))}),
    el("td", {class: "num", text: fmt.int(q.processed)}), el("td", {class: "num", text: fmt.int(q.failed)}))));
  const sessions = doc.source_sessions;
  document.getElementById("sessions-in-use").textContent = fmt.int(sessions.in_use);
  document.getElementById("sessions-max").textContent = fmt.int(sessions.max);
  document.getElementById("sessions-waiting").textContent = fmt.int(sessions.waiting);
  state.queues = doc;
}

// -- workers ----------------------------------------------------------------------------------
async function refreshWorkers() {
  const doc = await api("/api/v1/workers");
  const box = document.getElementById("workers-body");
  if (!doc.hosts.length) {
    box.replaceChildren(el("p", {class: "muted", text: "No live worker: is the worker service running?"}));
    return;
  }
  box.replaceChildren(...doc.hosts.map((h) => {
    const rss = h.workers.reduce((sum, w) => sum + w.rss_bytes, 0);
    return el("div", {class: "host", "data-host": h.host},
      el("h3", {text: `${h.host} — ${h.workers.length} worker(s), ${fmt.bytes(rss)} RSS`}),
      el("table", {},
        el("thead", {}, el("tr", {}, ["pid", "queues", "current message", "RSS", "done", "age", "seen"]
          .map((t, i) => el("th", {class: [1, 2].includes(i) ? "" : "num", text: t})))),
        el("tbody", {}, h.workers.map((w) => el("tr", {"data-consumer": w.consumer},
          el("td", {class: "num", text: w.pid}), el("td", {class: "mono", text: w.queues.join(", ")}),
          el("td", {class: "mono", text: w.current || "idle"}),
          el("td", {class: "num", text: fmt.bytes(w.rss_bytes)}), el("td", {class: "num", text: fmt.int(w.done)}),
          el("td", {class: "num", text: fmt.secs(w.age_s)}),
          el("td", {class: "num", text: w.seen_s_ago === null ? "–" : `${fmt.secs(w.seen_s_ago)} ago`}))))));
  }));
}

// -- Redis ------------------------------------------------------------------------------------
async function refreshRedis() {
  const r = await api("/api/v1/redis");
  const m = r.memory, p = r.persistence;
  const memory = m.max_bytes
    ? [el("meter", {id: "redis-memory", min: 0, max: m.max_bytes, value: m.used_bytes,
                    high: Math.round(m.max_bytes * 0.8), optimum: 0}),
       ` ${fmt.bytes(m.used_bytes)} of ${fmt.bytes(m.max_bytes)} (${(m.used_ratio * 100).toFixed(1)}%)`]
    : [`${fmt.bytes(m.used_bytes)} (no maxmemory: Redis may take all the host's memory)`];
  const policy = m.policy === "noeviction" ? m.policy
    : `${m.policy} — keys may be evicted when memory is full; tracebus expects noeviction`;
  const rdb = p.rdb_save_points === null ? "save points unknown (CONFIG refused)"
    : p.rdb_save_points ? `snapshots (save ${p.rdb_save_points})` : "no snapshots";
  const rows = [
    ["version", `${r.version} (${r.mode}), up ${fmt.secs(r.uptime_s)}, ${r.connected_clients} clients`],
    ["memory", memory], ["peak", fmt.bytes(m.peak_bytes)],
    ["policy", el("span", {class: m.policy === "noeviction" ? "" : "state-bad", text: policy})],
    ["evicted keys", fmt.int(m.evicted_keys)],
    ["RDB", `${rdb}; last save ${fmt.time(p.rdb_last_save_time)} (${p.rdb_last_bgsave_status}), `
            + `${fmt.int(p.rdb_changes_since_save)} changes since`],
    ["AOF", p.aof_enabled ? `on (last write ${p.aof_last_write_status})` : "off"],
    ...(r.nodes || []).map(n => [`master ${n.node}`,
      `${fmt.bytes(n.memory.used_bytes)}` + (n.memory.max_bytes
        ? ` of ${fmt.bytes(n.memory.max_bytes)} (${(n.memory.used_ratio * 100).toFixed(1)}%)` : " (no maxmemory)")
      + `, ${n.connected_clients} clients, AOF ${n.persistence.aof_enabled ? "on" : "off"}`]),
  ];
  document.getElementById("redis-body").replaceChildren(
    ...rows.flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {}, v)]));
}

// -- jobs -------------------------------------------------------------------------------------
function settled(progress) { return (progress.units_done || 0) + (progress.units_failed || 0); }

function stateLabel(job) {
  const code = state.states && state.states.codes[job.state];
  return code ? `${job.state} (${code})` : job.state;
}

function jobRow(job) {
  const id = job.job_id;
  const bar = el("progress", {id: `progress-${id}`, class: "job-progress", max: 1, value: 0});
  const row = el("tr", {id: `job-${id}`, class: "job", "data-job-id": id},
    el("td", {class: "mono", text: id}), el("td", {text: job.profile || ""}),
    el("td", {class: "job-state"}), el("td", {}, bar, " ", el("span", {class: "job-units"})),
    el("td", {class: "num job-rows"}), el("td", {class: "num job-elapsed"}),
    el("td", {class: "job-actions"},
      el("button", {type: "button", class: "cancel danger", "data-action": "cancel", text: "Cancel",
                    onclick: () => act(id, "cancel")}),
      el("button", {type: "button", class: "retry", "data-action": "retry", text: "Retry",
                    onclick: () => act(id, "retry")}),
      el("button", {type: "button", class: "show-result", "data-action": "result", text: "Result",
                    onclick: () => toggleResult(id)})));
  return row;
}

function paintJob(id) {
  const job = state.jobs.get(id);
  const row = document.getElementById(`job-${id}`);
  if (!job || !row) return;
  const progress = job.progress || {};
  const bar = row.querySelector("progress");
  bar.max = Math.max(1, progress.units_total || 0);
  bar.value = settled(progress);
  row.querySelector(".job-units").textContent = `${settled(progress)}/${progress.units_total || 0} units`;
  const cell = row.querySelector(".job-state");
  cell.textContent = stateLabel(job);
  cell.className = `job-state state-${job.state}`;
  row.dataset.state = job.state;
  row.querySelector(".job-rows").textContent = fmt.int(progress.rows);
  row.querySelector(".job-elapsed").textContent = fmt.secs(job.elapsed_seconds);
  row.querySelector("button.cancel").hidden = !inStates("active", job);
  row.querySelector("button.retry").hidden = !inStates("retryable", job);
  row.querySelector("button.show-result").hidden = !inStates("with_result", job);
}

async function refreshJobs() {
  const doc = await api("/api/v1/jobs?limit=50");
  const body = document.getElementById("jobs-body");
  const seen = new Set();
  for (const job of doc.jobs) {
    const id = job.job_id;
    seen.add(id);
    const known = state.jobs.get(id);
    // A stream's progress is newer than a poll's: keep it while the stream runs.
    if (known && state.streams.has(id) && inStates("active", job)) job.progress = known.progress;
    state.jobs.set(id, job);
    if (!document.getElementById(`job-${id}`)) body.append(jobRow(job));
    paintJob(id);
    if (inStates("active", job)) follow(id);
  }
  for (const row of [...body.querySelectorAll("tr.job")]) {
    if (!seen.has(row.dataset.jobId)) {
      const extra = document.getElementById(`result-${row.dataset.jobId}`);
      if (extra) extra.remove();
      row.remove();
      state.jobs.delete(row.dataset.jobId);
    }
  }
  // Newest first, as listed.
  for (const job of doc.jobs) {
    const row = document.getElementById(`job-${job.job_id}`);
    body.append(row);
    const extra = document.getElementById(`result-${job.job_id}`);
    if (extra) body.append(extra);
  }
  document.getElementById("jobs-empty").hidden = doc.jobs.length > 0;
}

async function act(id, action) {
  try {
    const job = await api(`/api/v1/jobs/${encodeURIComponent(id)}/${action}`, {method: "POST"});
    state.jobs.set(id, job);
    paintJob(id);
    showError("jobs", null);
    if (action === "retry") follow(id);
  } catch (e) {
    showError("jobs", e);
  }
}

// -- live progress over server-sent events ----------------------------------------------------
function parseEvent(block) {
  const msg = {};
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const name = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    msg[name] = name === "data" ? JSON.parse(value) : value;
  }
  return msg;
}

function applyEvent(id, msg) {
  const job = state.jobs.get(id);
  if (!job || !msg.data) return;
  if (msg.event === "progress") {
    const d = msg.data;
    // Every progress event carries the job's rows so far: the column moves with the bar.
    job.progress = Object.assign({}, job.progress, {units_done: d.units_done, units_failed: d.units_failed,
                                                    units_total: d.units_total,
                                                    rows: d.rows !== undefined ? d.rows : job.progress.rows});
    if (d.state) job.state = d.state;
  } else if (msg.event === "end") {
    job.state = msg.data.state;
    job.progress = msg.data.progress_detail || job.progress;
    job.elapsed_seconds = msg.data.elapsed_seconds;
  }
  paintJob(id);
}

async function follow(id) {
  if (state.streams.has(id) || state.streams.size >= MAX_STREAMS) return;
  if (Date.now() - (state.streamFailed.get(id) || 0) < STREAM_BACKOFF_MS) return;
  const abort = new AbortController();
  state.streams.set(id, abort);
  let lastId = null, ended = false;
  try {
    while (!ended) {
      const h = headers({Accept: "text/event-stream"});
      if (lastId) h["Last-Event-ID"] = lastId;
      const resp = await fetch(`/api/trace/job/${encodeURIComponent(id)}/events`,
                               {headers: h, cache: "no-store", signal: abort.signal});
      if (!resp.ok) throw new ApiError(resp.status, "HTTP_" + resp.status, resp.statusText);
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true}).replace(/\r\n/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const msg = parseEvent(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (msg.id) lastId = msg.id;
          applyEvent(id, msg);
          if (msg.event === "end" || msg.event === "error") ended = true;
        }
        if (ended) { reader.cancel().catch(() => {}); break; }
      }
      // The server closes a stream after TRACEBUS_API_SSE_MAX_SECONDS: reconnect and resume.
    }
  } catch (e) {
    state.streamFailed.set(id, Date.now());  // the poll keeps the row current meanwhile
  } finally {
    state.streams.delete(id);
  }
}

// -- a result's first page ----------------------------------------------------------------------
async function toggleResult(id) {
  const open = document.getElementById(`result-${id}`);
  if (open) { open.remove(); return; }
  const job = state.jobs.get(id);
  const cell = el("td", {colspan: 7});
  const row = el("tr", {id: `result-${id}`, class: "result"}, cell);
  document.getElementById(`job-${id}`).after(row);
  const domains = (job && job.domains) || [];
  const select = el("select", {class: "result-domain", onchange: () => loadPage(id, select.value, target)},
    domains.map((d) => el("option", {value: d, text: d})));
  const target = el("div", {class: "result-page"});
  cell.append(el("label", {}, "domain ", select), target);
  if (domains.length) await loadPage(id, domains[0], target);
}

async function loadPage(id, domain, target) {
  try {
    const q = new URLSearchParams({domain, offset: 0, limit: RESULT_ROWS, partial: 1});
    const page = await api(`/api/trace/job/${encodeURIComponent(id)}/result?${q}`);
    const rows = page.results[domain].data;
    const cols = page.columns && page.columns.length ? page.columns : Object.keys(rows[0] || {});
    target.replaceChildren(
      el("p", {class: "muted", text: `rows 1–${rows.length} of ${fmt.int(page.total)}`}),
      el("div", {class: "scroll"}, el("table", {class: "result-table"},
        el("thead", {}, el("tr", {}, cols.map((c) => el("th", {text: c})))),
        el("tbody", {}, rows.map((r) => el("tr", {}, cols.map((c) => el("td", {text: r[c] ?? ""}))))))));
  } catch (e) {
    target.replaceChildren(el("p", {class: "error", text: `${e.code}: ${e.message}`}));
  }
}

// -- dead letters (operators) --------------------------------------------------------------------
async function deadAction(action, queue, ids) {
  const what = ids ? `${ids.length} record(s)` : "every record";
  if (action === "purge" && !window.confirm(`Delete ${what} of ${queue} for good?`)) return;
  try {
    const body = ids ? {queue, ids} : {queue, all: true};
    await api(`/api/v1/dead-letters/${action}`, {method: "POST", body});
    showError("dead", null);
    await refreshDead();
  } catch (e) {
    showError("dead", e);
  }
}

async function refreshDead() {
  if (!state.me || !state.me.admin) return;
  const doc = await api("/api/v1/dead-letters?limit=50");
  const byQueue = new Map();
  for (const r of doc.records) {
    if (!byQueue.has(r.queue)) byQueue.set(r.queue, []);
    byQueue.get(r.queue).push(r);
  }
  const box = document.getElementById("dead-body");
  // Keep open tracebacks open across refreshes.
  const opened = new Set([...box.querySelectorAll("details[open]")].map((d) => d.dataset.id));
  if (!byQueue.size) {
    box.replaceChildren(el("p", {class: "muted", text: "No dead-lettered message."}));
    return;
  }
  box.replaceChildren(...[...byQueue].map(([queue, records]) => deadQueue(queue, records, opened)));
}

function deadQueue(queue, records, opened) {
  const heads = ["id", "dead since", "actor", "args", "deliveries", "reason", ""];
  return el("div", {class: "dead-queue", "data-queue": queue},
    el("h3", {}, `${queue} (${records.length}) `,
      el("button", {type: "button", "data-action": "requeue-all", text: "Requeue all",
                    onclick: () => deadAction("requeue", queue, null)}), " ",
      el("button", {type: "button", class: "danger", "data-action": "purge-all", text: "Purge all",
                    onclick: () => deadAction("purge", queue, null)})),
    el("table", {},
      el("thead", {}, el("tr", {}, heads.map((t) => el("th", {text: t})))),
      el("tbody", {}, records.map((r) => deadRow(queue, r, opened)))));
}

function deadRow(queue, r, opened) {
  const traceback = r.traceback
    ? el("details", {"data-id": r.id, open: opened.has(r.id)}, el("summary", {text: "traceback"}),
         el("pre", {class: "traceback", text: r.traceback}))
    : null;
  return el("tr", {class: "dead", "data-id": r.id},
    el("td", {class: "mono", text: r.id}), el("td", {text: fmt.time(r.time)}),
    el("td", {class: "mono", text: r.actor || "–"}),
    el("td", {class: "mono", text: r.args === null ? "–" : JSON.stringify(r.args).slice(0, 80)}),
    el("td", {class: "num", text: r.deliveries}),
    el("td", {}, el("span", {text: r.reason}), traceback),
    el("td", {},
      el("button", {type: "button", "data-action": "requeue", text: "Requeue",
                    onclick: () => deadAction("requeue", queue, [r.id])}), " ",
      el("button", {type: "button", class: "danger", "data-action": "purge", text: "Purge",
                    onclick: () => deadAction("purge", queue, [r.id])})));
}

// -- the loop ------------------------------------------------------------------------------------
const SECTIONS = {jobs: refreshJobs, queues: refreshQueues, workers: refreshWorkers, redis: refreshRedis,
                  dead: refreshDead};

async function refreshAll() {
  if (!state.me && !(await refreshMe())) return;
  await Promise.all(Object.entries(SECTIONS).map(async ([name, refresh]) => {
    try {
      await refresh();
      showError(name, null);
    } catch (e) {
      if (e.status === 401) state.me = null;
      showError(name, e);
    }
  }));
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

async function loop() {
  await refreshAll();
  setTimeout(loop, POLL_MS);
}

function setUpTokenForm() {
  const input = document.getElementById("token");
  input.value = sessionStorage.getItem(TOKEN_KEY) || "";
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = input.value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
    state.me = null;
    refreshAll();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    input.value = "";
    state.me = null;
    refreshAll();
  });
}

setUpTokenForm();
loop();
