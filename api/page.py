"""The web page of the query API: one self-contained HTML document (inline CSS, JS and SVG).

It loads nothing from elsewhere: no CDN, fonts or images. Its script calls the
JSON endpoints of the same service (relative URLs, so the service can sit
under a path prefix) and draws the failure breakdown as an SVG bar chart, the
failure clusters as a table, and an episode list with a drill-down into one
episode's steps, rewards and failures. When the service has a token, the page
asks for it once and sends it as ``Authorization: Bearer`` on every call
(kept in the tab's ``sessionStorage`` only).
"""

from __future__ import annotations

INDEX_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trajlake - failure analysis</title>
<style>
  :root { --fg:#1d2433; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --accent:#3056d3; --bad:#c0392b; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--fg);
         background:var(--bg); }
  header { padding:12px 20px; background:#fff; border-bottom:1px solid var(--line); display:flex;
           gap:16px; align-items:baseline; flex-wrap:wrap; }
  header h1 { font-size:17px; margin:0; }
  #tables { color:var(--muted); font-size:12px; }
  main { display:grid; grid-template-columns:minmax(420px,1fr) minmax(420px,1fr); gap:16px;
         padding:16px 20px; }
  section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:12px 14px;
            min-width:0; }
  section.wide { grid-column:1 / -1; }
  h2 { font-size:14px; margin:0 0 8px; }
  label { font-size:12px; color:var(--muted); margin-right:8px; }
  select, input, button { font:inherit; font-size:13px; padding:3px 6px; border:1px solid #cfd4dc;
                          border-radius:5px; background:#fff; }
  button { cursor:pointer; }
  table { border-collapse:collapse; width:100%; font-size:13px; }
  th, td { text-align:left; padding:4px 6px; border-bottom:1px solid var(--line); vertical-align:top; }
  th { color:var(--muted); font-weight:600; }
  tr.click:hover { background:#f0f4ff; cursor:pointer; }
  a { color:var(--accent); cursor:pointer; text-decoration:none; }
  code, pre { font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace; }
  pre { white-space:pre-wrap; word-break:break-word; margin:2px 0; background:#f6f7f9; padding:4px 6px;
        border-radius:4px; max-height:260px; overflow:auto; }
  .muted { color:var(--muted); }
  .bad { color:var(--bad); }
  .controls { display:flex; flex-wrap:wrap; gap:6px 10px; align-items:center; margin-bottom:8px; }
  .bar { fill:var(--accent); } .bar:hover { fill:#1f3fa8; cursor:pointer; }
  #error { display:none; margin:12px 20px 0; padding:8px 12px; border-radius:6px; background:#fdecea;
           color:var(--bad); }
  #login { display:none; margin:12px 20px 0; }
  .pill { display:inline-block; padding:0 6px; border-radius:9px; background:#eef1f6; font-size:12px; }
</style>
</head>
<body>
<header>
  <h1>trajlake &middot; failure analysis</h1>
  <span id="tables"></span>
</header>
<div id="error"></div>
<div id="login"><label for="token">This API needs a token:</label>
  <input id="token" type="password" size="32"> <button id="token-save">use token</button></div>
<main>
  <section>
    <h2>Failures by <span id="by-label">category</span></h2>
    <div class="controls">
      <label>judge <select id="judge"></select></label>
      <label>version <select id="judge-version"></select></label>
      <label>by <select id="by">
        <option value="category">category</option><option value="task">task</option>
        <option value="family">family</option><option value="policy_version">policy version</option>
      </select></label>
    </div>
    <div id="breakdown-total" class="muted"></div>
    <svg id="chart" width="100%" height="40" role="img" aria-label="failure breakdown"></svg>
  </section>
  <section>
    <h2>Failure clusters (by error signature)</h2>
    <div class="controls"><label>min size <input id="min-size" type="number" min="1" value="1"
      style="width:60px"></label></div>
    <div style="max-height:420px; overflow:auto"><table id="clusters"></table></div>
  </section>
  <section class="wide">
    <h2>Episodes</h2>
    <div class="controls">
      <label>task <input id="f-task" size="14"></label>
      <label>family <input id="f-family" size="12"></label>
      <label>policy version <input id="f-policy" size="10"></label>
      <label>status <select id="f-status"><option value="">any</option><option>success</option>
        <option>failure</option><option>truncated</option><option>infra_error</option><option>aborted</option>
      </select></label>
      <label>verdict <select id="f-verdict"><option value="">any</option><option>pass</option>
        <option>fail</option><option>error</option></select></label>
      <button id="f-apply">filter</button> <button id="f-clear">clear</button>
      <span id="page-info" class="muted"></span>
      <button id="prev">&larr;</button> <button id="next">&rarr;</button>
    </div>
    <table id="episodes"></table>
  </section>
  <section class="wide" id="detail-section" style="display:none">
    <h2>Episode <code id="detail-id"></code></h2>
    <div id="detail"></div>
  </section>
</main>
<script>
"use strict";
const PAGE = 25;
const state = { judge: null, version: null, by: "category", offset: 0, filters: {} };
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v); else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}
function showError(msg) {
  const e = $("error");
  e.textContent = msg || "";
  e.style.display = msg ? "block" : "none";
}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") q.set(k, v);
  }
  const url = path + (q.toString() ? "?" + q : "");
  const headers = {};
  const token = sessionStorage.getItem("trajlake.token");
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(url, { headers });
  if (res.status === 401) { $("login").style.display = "block"; throw new Error("a token is needed"); }
  const body = await res.json();
  if (!res.ok) throw new Error(body.detail || res.statusText);
  return body;
}

function table(node, head, rows) {
  node.replaceChildren(el("tr", {}, head.map((h) => el("th", {}, h))), ...rows);
  if (!rows.length) node.append(el("tr", {}, el("td", { colspan: head.length, class: "muted" }, "nothing")));
}
function pct(x) { return (100 * x).toFixed(1) + "%"; }
function short(s, n) { return s && s.length > n ? s.slice(0, n) + "\\u2026" : s; }

async function loadTables() {
  const t = await api("tables");
  $("tables").textContent = t.tables.filter((x) => x.exists)
    .map((x) => `${x.name} v${x.version} (${x.rows} rows)`).join(" \\u00b7 ") || "the lake has no tables yet";
}

async function loadJudges() {
  const j = await api("judges");
  const sel = $("judge");
  sel.replaceChildren(...j.judges.map((x) => el("option", { value: x.name }, x.name)));
  if (!j.judges.length) sel.append(el("option", { value: "" }, "(none yet)"));
  state.judges = j.judges;
  if (!state.judge && j.judges.length) state.judge = j.judges[0].name;
  sel.value = state.judge || "";
  fillVersions();
}
function fillVersions() {
  const judge = (state.judges || []).find((x) => x.name === state.judge);
  const versions = judge ? judge.versions.slice().reverse() : [];
  $("judge-version").replaceChildren(...versions.map((v) =>
    el("option", { value: v.version }, `${v.version} (${v.episodes} episodes)`)));
  state.version = versions.length ? versions[0].version : null;
}

async function loadBreakdown() {
  const b = await api("failures/breakdown",
    { judge: state.judge, judge_version: state.version, by: state.by });
  $("by-label").textContent = state.by.replace("_", " ");
  $("breakdown-total").textContent = b.judge
    ? `${b.total} failures under ${b.judge} ${b.judge_version} (failures v${b.versions.failures})`
    : "no failures yet";
  const chart = $("chart");
  const rowH = 24, labelW = 190, width = Math.max(chart.clientWidth || 600, 360), barW = width - labelW - 90;
  chart.setAttribute("height", Math.max(40, b.groups.length * rowH + 8));
  chart.replaceChildren();
  const max = Math.max(1, ...b.groups.map((g) => g.count));
  b.groups.forEach((g, i) => {
    const y = 4 + i * rowH, w = Math.max(2, (barW * g.count) / max), key = g.key === null ? "(none)" : g.key;
    const bar = svg("rect", { class: "bar", x: labelW, y, width: w, height: rowH - 6, rx: 3,
      onclick: () => drill(g.key) }, svg("title", {}, `${key}: ${g.count} (${pct(g.share)})`));
    chart.append(
      svg("text", { x: labelW - 6, y: y + rowH / 2, "text-anchor": "end", "font-size": 12 }, short(key, 28)),
      bar,
      svg("text", { x: labelW + w + 6, y: y + rowH / 2, "font-size": 12, fill: "#667085" },
        `${g.count} \\u00b7 ${pct(g.share)}`));
  });
}
function drill(key) {
  const field = { task: "f-task", family: "f-family", policy_version: "f-policy" }[state.by];
  if (!field || key === null) return;
  for (const id of ["f-task", "f-family", "f-policy"]) $(id).value = "";
  $(field).value = key; $("f-verdict").value = "fail";
  applyFilters();
}

async function loadClusters() {
  const c = await api("failures/clusters", { judge: state.judge, judge_version: state.version,
    min_size: $("min-size").value || 1 });
  table($("clusters"), ["count", "share", "category", "signature", "tasks", "examples"], c.clusters.map((x) =>
    el("tr", {},
      el("td", {}, x.count), el("td", {}, pct(x.share)),
      el("td", {}, el("span", { class: "pill" }, x.category)),
      el("td", {}, el("code", { title: x.example_message || "" }, x.signature)),
      el("td", {}, x.tasks.map((t) => `${t.task_id} (${t.count})`).join(", ")),
      el("td", {}, x.example_episode_ids.map((id) => [el("a", { onclick: () => openEpisode(id) },
        id.slice(-8)), " "])))));
}

function applyFilters() {
  state.filters = { task_id: $("f-task").value, family: $("f-family").value,
    policy_version: $("f-policy").value, status: $("f-status").value, verdict: $("f-verdict").value };
  state.offset = 0;
  loadEpisodes().catch((e) => showError(e.message));
}
async function loadEpisodes() {
  const f = state.filters;
  const params = { ...f, limit: PAGE, offset: state.offset };
  if (f.verdict) { params.judge = state.judge; params.judge_version = state.version; }
  const e = await api("episodes", params);
  $("page-info").textContent = e.total ? `${e.offset + 1}-${e.offset + e.items.length} of ${e.total}` : "0";
  $("prev").disabled = e.offset === 0;
  $("next").disabled = e.offset + e.items.length >= e.total;
  table($("episodes"), ["started", "episode", "task", "family", "policy", "status", "completeness", "steps"],
    e.items.map((x) => el("tr", { class: "click", onclick: () => openEpisode(x.episode_id) },
      el("td", {}, x.started_at ? x.started_at.replace("T", " ").slice(0, 19) : ""),
      el("td", {}, el("code", {}, x.episode_id)), el("td", {}, x.task_id), el("td", {}, x.task_family),
      el("td", {}, x.policy_version),
      el("td", { class: x.status === "success" ? "" : "bad" }, x.status || "open"),
      el("td", {}, x.completeness), el("td", {}, x.num_events))));
}

async function openEpisode(id) {
  const d = await api("episodes/" + encodeURIComponent(id), { max_text: 4000 });
  $("detail-section").style.display = "block";
  $("detail-id").textContent = id;
  const ep = d.episode;
  const rewards = el("table");
  table(rewards, ["judge", "version", "verdict", "score", "source", "flags"], d.rewards.map((r) =>
    el("tr", {}, el("td", {}, r.judge_name), el("td", {}, r.judge_version),
      el("td", { class: r.verdict === "pass" ? "" : "bad" }, r.verdict), el("td", {}, r.score),
      el("td", {}, r.source), el("td", {}, (r.flags || []).join(", ")))));
  const failures = el("table");
  table(failures, ["judge", "version", "category", "step", "signature"], d.failures.map((f) =>
    el("tr", {}, el("td", {}, f.judge_name), el("td", {}, f.judge_version),
      el("td", {}, el("span", { class: "pill" }, f.category)), el("td", {}, f.failing_seq),
      el("td", {}, el("code", {}, f.signature)))));
  const steps = el("table");
  table(steps, ["seq", "type", "tool", "exit", "text"], d.steps.map((s) =>
    el("tr", {}, el("td", {}, s.seq), el("td", {}, s.type), el("td", {}, s.tool),
      el("td", { class: s.exit_code ? "bad" : "" }, s.timed_out ? "timeout" : s.exit_code),
      el("td", {}, s.text
        ? el("pre", {}, s.text + (s.text_truncated ? `\\n[\\u2026 ${s.text_length} chars]` : ""))
        : ""))));
  $("detail").replaceChildren(
    el("p", {}, `task ${ep.task_id} (${ep.task_family}) \\u00b7 policy ${ep.policy_id} ${ep.policy_version}`
      + ` \\u00b7 status ${ep.status || "open"} \\u00b7 ${ep.completeness} \\u00b7 ${d.steps_total} steps`),
    el("h2", {}, "Rewards"), rewards, el("h2", {}, "Failures"), failures,
    el("h2", {}, `Steps${d.steps.length < d.steps_total ? ` (first ${d.steps.length})` : ""}`), steps);
  $("detail-section").scrollIntoView({ behavior: "smooth" });
}

async function refresh() {
  showError("");
  try {
    await loadTables();
    await loadJudges();
    await Promise.all([loadBreakdown(), loadClusters(), loadEpisodes()]);
  } catch (e) { showError(e.message); }
}
function guarded(fn) { return () => fn().catch((e) => showError(e.message)); }

$("judge").addEventListener("change", () => { state.judge = $("judge").value; fillVersions();
  guarded(async () => { await loadBreakdown(); await loadClusters(); })(); });
$("judge-version").addEventListener("change", () => { state.version = $("judge-version").value;
  guarded(async () => { await loadBreakdown(); await loadClusters(); })(); });
$("by").addEventListener("change", () => { state.by = $("by").value; guarded(loadBreakdown)(); });
$("min-size").addEventListener("change", guarded(loadClusters));
$("f-apply").addEventListener("click", applyFilters);
$("f-clear").addEventListener("click", () => {
  for (const id of ["f-task", "f-family", "f-policy", "f-status", "f-verdict"]) $(id).value = "";
  applyFilters(); });
$("prev").addEventListener("click", () => {
  if ($("prev").disabled) return;
  state.offset = Math.max(0, state.offset - PAGE);
  guarded(loadEpisodes)();
});
$("next").addEventListener("click", () => {
  if ($("next").disabled) return;
  state.offset += PAGE;
  guarded(loadEpisodes)();
});
$("token-save").addEventListener("click", () => {
  sessionStorage.setItem("trajlake.token", $("token").value);
  $("login").style.display = "none";
  refresh();
});
refresh();
</script>
</body>
</html>
"""
"""The page served at ``/``."""
