// trajlake workbench: hash-routed views over the JSON endpoints of the service that served it.
//
// Every view has a deep link (#/episode/<id>?step=12, #/failures?by=family&judge_version=v2,
// #/judges/<name>/diff?from=v1&to=v2, ...). Calls use relative URLs, so the service may sit under
// a path prefix. The bearer token is asked for when the API answers 401 and kept in this tab's
// sessionStorage only. No build step, no dependency, nothing fetched from anywhere else.
"use strict";

const TOKEN_KEY = "trajlake.token";
const PAGE = 50;
const VERDICTS = ["ok", "hack", "judge_wrong", "task_broken"];
const VERDICT_ORDER = ["pass", "fail", "error"];
const NO_JUDGE = "-"; // judge of a failure row of an episode no judge scored

function judgeOf(f) {
  return f.judge_name === NO_JUDGE ? "no judge" : `${f.judge_name} ${f.judge_version}`;
}

// ------------------------------------------------------------------ DOM helpers

// `style` is set through the CSSOM (the page's Content-Security-Policy refuses style attributes)
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "style") Object.assign(node.style, value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  return add(node, children);
}

function add(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (selector, root = document) => root.querySelector(selector);
const pct = (x) => (100 * x).toFixed(1) + "%";
const num = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en"));
const when = (ts) =>
  ts
    ? ts
        .replace("T", " ")
        .replace(/(\.\d+)?Z$/, "")
        .replace(/\+00:00$/, "")
    : "–";
const json = (value) => JSON.stringify(value, null, 2);
const plural = (n, one, many) => `${num(n)} ${n === 1 ? one : many || one + "s"}`;

function pill(text, kind) {
  return h("span", { class: `pill ${kind || text || ""}` }, text ?? "–");
}

function foldable(summary, value, open) {
  const text = typeof value === "string" ? value : json(value);
  return h("details", { open: !!open }, h("summary", {}, summary), h("pre", {}, text));
}

function table(head, rows, attrs) {
  const thead = h(
    "thead",
    {},
    h(
      "tr",
      {},
      head.map((c) => (c instanceof Node ? c : h("th", {}, c))),
    ),
  );
  const body = rows.length
    ? rows
    : [h("tr", {}, h("td", { colspan: head.length, class: "empty" }, "nothing"))];
  return h("div", { class: "scroll" }, h("table", attrs || {}, thead, h("tbody", {}, body)));
}

function th(text, cls) {
  return h("th", { class: cls }, text);
}

function facts(pairs) {
  return h(
    "ul",
    { class: "facts" },
    pairs
      .filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => h("li", {}, h("b", {}, k), v)),
  );
}

function shortId(id) {
  return id.length > 13 ? "…" + id.slice(-12) : id;
}

// ------------------------------------------------------------------ links

function enc(segment) {
  return encodeURIComponent(segment);
}

function link(parts, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") query.set(k, v);
  }
  const q = query.toString();
  return "#/" + parts.map(enc).join("/") + (q ? "?" + q : "");
}

function episodeLink(id, step, text) {
  return h(
    "a",
    {
      href: link(["episode", id], { step }),
      class: text ? "id nowrap" : "id",
      title: id,
      dataset: { episode: id },
    },
    text ?? id,
  );
}

function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

// ------------------------------------------------------------------ the API

class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === null || v === undefined || v === "") continue;
    for (const item of Array.isArray(v) ? v : [v]) q.append(k, item);
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

async function api(path, params, options) {
  const opts = options || {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const init = { method: opts.method || "GET", headers };
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(path + query(params), init);
  } catch (err) {
    throw new ApiError(0, "unreachable", `the service did not answer (${err.message})`);
  }
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  const detail = (body && body.detail) || `${res.status} ${res.statusText}`;
  if (res.status === 401) {
    askForToken(token ? "wrong" : "missing", detail);
    throw new ApiError(
      401,
      "unauthorized",
      token ? `the token was refused: ${detail}` : `a token is needed: ${detail}`,
    );
  }
  if (!res.ok) throw new ApiError(res.status, (body && body.error) || "http_error", detail);
  return body;
}

// ------------------------------------------------------------------ token and errors

function askForToken(why, detail) {
  const box = $("#token-box");
  const message = $("#token-message");
  if (why === "wrong") {
    message.textContent =
      `The token you gave was refused (the API answered: "${detail}"). ` +
      "Enter the right token: a reader's, or a reviewer's to give verdicts.";
    box.dataset.reason = "wrong";
  } else if (why === "missing") {
    message.textContent =
      `This API needs a token (the API answered: "${detail}"). ` +
      "Enter it to continue; it is kept in this tab only.";
    box.dataset.reason = "missing";
  } else {
    message.textContent =
      "The API's bearer token (a reader's, or a reviewer's to give verdicts); kept in this tab only.";
    box.dataset.reason = "asked";
  }
  box.hidden = false;
  const input = $("#token");
  if (why !== "asked" || !input.value) input.value = "";
  input.focus();
}

function showError(message) {
  const box = $("#error");
  box.textContent = message || "";
  box.hidden = !message;
}

function describe(err) {
  if (err instanceof ApiError) {
    return err.status ? `${err.status} ${err.code}: ${err.message}` : err.message;
  }
  return `the page failed: ${err && err.message ? err.message : err}`;
}

// ------------------------------------------------------------------ routing

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const at = raw.indexOf("?");
  const path = at < 0 ? raw : raw.slice(0, at);
  const params = new URLSearchParams(at < 0 ? "" : raw.slice(at + 1));
  const parts = path
    .split("/")
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  return { parts, params, view: parts[0] || "failures" };
}

let renderCount = 0;
let current = null; // what the episode view needs for keyboard navigation

async function render() {
  const id = ++renderCount;
  const route = parseHash();
  const main = $("#view");
  for (const a of document.querySelectorAll("#nav a")) {
    const on = a.dataset.nav.split(" ").includes(route.view);
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  $("#search-q").value = route.view === "search" ? route.params.get("q") || "" : "";
  if (
    route.view === "episode" &&
    current &&
    current.id === route.parts[1] &&
    main.dataset.state === "ready"
  ) {
    // the same episode: only the step changes (a deep link or a failure's step link)
    const step = route.params.get("step");
    if (step !== null) selectStep(Number(step), { scroll: true, updateHash: false });
    return;
  }
  const view = VIEWS[route.view] || notFound;
  current = null; // the keys move no step while another view loads
  main.dataset.state = "loading";
  main.dataset.view = route.view;
  showError("");
  try {
    const node = await view(route);
    if (id !== renderCount) return; // another view was asked for meanwhile
    current = null;
    main.replaceChildren(node);
    main.dataset.state = "ready";
    if (node.afterMount) node.afterMount();
  } catch (err) {
    if (id !== renderCount) return;
    current = null;
    main.dataset.state = "error";
    if (err instanceof ApiError && err.status === 401) {
      main.replaceChildren(h("p", { class: "empty" }, "Enter the API's token above to see this view."));
      return;
    }
    showError(describe(err));
    main.replaceChildren(h("p", { class: "empty" }, "This view could not be shown: see the message above."));
  }
}

async function notFound(route) {
  document.title = "trajlake · no such view";
  return h(
    "div",
    { class: "panel" },
    h("h1", {}, `No view “${route.view}”`),
    h(
      "p",
      {},
      "The views: ",
      h("a", { href: "#/failures" }, "failures"),
      ", ",
      h("a", { href: "#/episodes" }, "episodes"),
      ", ",
      h("a", { href: "#/judges" }, "judges"),
      ", ",
      h("a", { href: "#/review" }, "review"),
      ", ",
      h("a", { href: "#/health" }, "health"),
      ".",
    ),
  );
}

// ------------------------------------------------------------------ shared pieces

function judgeControls(judges, route, onChange, resolved) {
  const params = route.params;
  const names = judges.map((j) => j.name);
  const judge = params.get("judge") || names[0] || "";
  const info = judges.find((j) => j.name === judge);
  const versions = info ? info.versions.map((v) => v.version).reverse() : [];
  const judgeSelect = h(
    "select",
    { id: "judge", onchange: (e) => onChange({ judge: e.target.value, judge_version: "" }) },
    names.length
      ? names.map((n) => h("option", { value: n, selected: n === judge }, n))
      : h("option", { value: "" }, "(no judge yet)"),
  );
  const versionSelect = h(
    "select",
    { id: "judge-version", onchange: (e) => onChange({ judge_version: e.target.value }) },
    h("option", { value: "" }, resolved ? `latest (${resolved})` : "latest"),
    versions.map((v) =>
      h(
        "option",
        { value: v, selected: v === params.get("judge_version") },
        `${v} (${num(info.versions.find((x) => x.version === v).episodes)} episodes)`,
      ),
    ),
  );
  return [h("label", {}, "judge ", judgeSelect), h("label", {}, "judge version ", versionSelect)];
}

function withParams(route, changes) {
  const params = Object.fromEntries(route.params.entries());
  for (const [k, v] of Object.entries(changes)) {
    if (v === "" || v === null || v === undefined) delete params[k];
    else params[k] = v;
  }
  return link(route.parts.length ? route.parts : [route.view], params);
}

function trend(points, big) {
  const max = Math.max(1, ...points.map((p) => p.count));
  const label =
    "failures per policy version: " +
    points.map((p) => `${p.policy_version ?? "none"}: ${p.count}`).join(", ");
  return h(
    "span",
    { class: big ? "trend big" : "trend", role: "img", "aria-label": label, title: label },
    points.map((p) =>
      h(
        "span",
        { class: "trend-point" },
        h("span", {}, p.count),
        h("span", {
          class: "trend-bar",
          style: { height: `${Math.max(2, Math.round(((big ? 60 : 18) * p.count) / max))}px` },
        }),
        h("span", { class: "nowrap" }, p.policy_version ?? "none"),
      ),
    ),
  );
}

function taskList(tasks) {
  return h(
    "span",
    { class: "items" },
    tasks.map((t) =>
      h("span", {}, `${t.task_id ?? "(none)"} `, h("span", { class: "muted" }, `×${t.count}`)),
    ),
  );
}

function examples(ids) {
  return h(
    "span",
    { class: "items" },
    ids.map((id) => episodeLink(id, null, shortId(id))),
  );
}

function versionsNote(versions) {
  const parts = Object.entries(versions || {}).map(([t, v]) => `${t} v${v ?? "–"}`);
  return h("p", { class: "muted small" }, "read from ", parts.join(" · "));
}

function pager(total, offset, limit, hrefAt) {
  if (total <= limit && offset === 0) return null;
  const to = Math.min(total, offset + limit);
  return h(
    "div",
    { class: "pager" },
    offset > 0 ? h("a", { href: hrefAt(Math.max(0, offset - limit)) }, "← newer") : null,
    h("span", { class: "muted" }, `${total ? offset + 1 : 0}–${to} of ${num(total)}`),
    to < total ? h("a", { href: hrefAt(offset + limit) }, "older →") : null,
  );
}

// ------------------------------------------------------------------ failures dashboard

const FILTER_KEYS = ["category", "task", "family", "policy_version"];
const FILTER_PARAM = { category: "category", task: "task_id", family: "family", policy_version: "policy_version" };

function crossTable(breakdown, route) {
  // rows: the `by` groups in their order; columns: the `then` values, most failures first
  const totals = new Map();
  for (const c of breakdown.cells) totals.set(c.then, (totals.get(c.then) || 0) + c.count);
  const columns = [...totals.keys()].sort(
    (a, b) => totals.get(b) - totals.get(a) || String(a).localeCompare(String(b)),
  );
  const count = new Map(breakdown.cells.map((c) => [JSON.stringify([c.key, c.then]), c.count]));
  const rows = breakdown.groups.map((g) =>
    h(
      "tr",
      { dataset: { key: g.key ?? "(none)" } },
      h("td", { class: "key" }, g.key ?? "(none)"),
      columns.map((t) => {
        const n = count.get(JSON.stringify([g.key, t]));
        if (!n) return h("td", { class: "num muted" }, "·");
        const narrowed = { then: null };
        if (g.key !== null) narrowed[FILTER_PARAM[breakdown.by]] = g.key;
        if (t !== null) narrowed[FILTER_PARAM[breakdown.then]] = t;
        return h(
          "td",
          { class: "num" },
          h("a", { href: withParams(route, narrowed), title: "only these failures" }, num(n)),
        );
      }),
    ),
  );
  return h(
    "div",
    { class: "scroll" },
    table(
      [th(`${breakdown.by.replace("_", " ")} \\ ${breakdown.then.replace("_", " ")}`),
       ...columns.map((t) => th(t ?? "(none)", "num"))],
      rows,
      { id: "crosstab", class: "crosstab" },
    ),
  );
}

async function failuresView(route) {
  const p = route.params;
  const by = p.get("by") || "category";
  const then = p.get("then") || "";
  const judgeParams = { judge: p.get("judge"), judge_version: p.get("judge_version") };
  const filters = {};
  for (const k of FILTER_KEYS) if (p.get(FILTER_PARAM[k])) filters[FILTER_PARAM[k]] = p.get(FILTER_PARAM[k]);
  const [judges, breakdown, cases, tables] = await Promise.all([
    api("judges"),
    api("failures/breakdown", { ...judgeParams, ...filters, by, then: then || null }),
    api("failures/cases", { ...judgeParams, limit: 200 }),
    api("tables"),
  ]);
  document.title = "trajlake · failures";
  const go = (changes) => navigate(withParams(route, changes));
  const bySelect = h(
    "select",
    { id: "by", onchange: (e) => go({ by: e.target.value }) },
    ["category", "task", "family", "policy_version"].map((k) =>
      h("option", { value: k, selected: k === by }, k.replace("_", " ")),
    ),
  );
  const thenSelect = h(
    "select",
    { id: "then", onchange: (e) => go({ then: e.target.value }) },
    h("option", { value: "", selected: !then }, "—"),
    FILTER_KEYS.filter((k) => k !== by).map((k) =>
      h("option", { value: k, selected: k === then }, k.replace("_", " ")),
    ),
  );
  const chips = Object.entries(breakdown.filters || {}).map(([k, v]) =>
    h(
      "a",
      { class: "chip", href: withParams(route, { [FILTER_PARAM[k]]: null }), title: "remove this filter" },
      `${k.replace("_", " ")}: ${v} ×`,
    ),
  );
  const under = breakdown.judge ? `${breakdown.judge} ${breakdown.judge_version}` : "no judge yet";
  const max = Math.max(1, ...breakdown.groups.map((g) => g.count));
  const filterOf = { task: "task_id", family: "family", policy_version: "policy_version" }[by];
  const rows = breakdown.groups.map((g) => {
    const key = g.key ?? "(none)";
    const keyCell =
      filterOf && g.key !== null
        ? h(
            "a",
            {
              href: link(["episodes"], {
                [filterOf]: g.key,
                verdict: "fail",
                judge: breakdown.judge,
                judge_version: breakdown.judge_version,
              }),
              title: `episodes of ${key} that failed`,
            },
            key,
          )
        : key;
    return h(
      "tr",
      { dataset: { key } },
      h("td", { class: "key" }, keyCell),
      h(
        "td",
        { class: "bar" },
        h("span", { class: "bar-fill", style: { width: `${(100 * g.count) / max}%` } }),
      ),
      h("td", { class: "num" }, num(g.count)),
      h("td", { class: "num" }, pct(g.share)),
    );
  });
  const caseRows = cases.clusters.map((c) =>
    h(
      "tr",
      { dataset: { cluster: c.cluster_id } },
      h("td", { class: "num" }, num(c.count)),
      h("td", {}, c.family ?? "–"),
      h("td", {}, pill(c.category, "")),
      h(
        "td",
        { class: "sig" },
        h(
          "a",
          { href: link(["cluster", c.cluster_id], judgeParams), class: "cluster-link" },
          h("code", {}, c.signature),
        ),
        h("div", { class: "small muted" }, taskList(c.tasks)),
      ),
      h("td", { class: "trend-cell" }, trend(c.trend)),
      h("td", { class: "ep" }, examples(c.example_episode_ids)),
    ),
  );
  return h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("h1", {}, "Failures"),
      h(
        "div",
        { class: "controls" },
        judgeControls(judges.judges, route, go, breakdown.judge_version),
        h("label", {}, "by ", bySelect),
        h("label", {}, "then ", thenSelect),
      ),
      chips.length ? h("p", { id: "filters", class: "chips" }, "only ", chips) : null,
      h(
        "p",
        { id: "breakdown-total" },
        `${num(breakdown.total)} failures under ${under}, by ${by.replace("_", " ")}`,
      ),
      table([th(by.replace("_", " ")), th(""), th("failures", "num"), th("share", "num")], rows, {
        class: "bars",
        id: "breakdown",
      }),
      then ? crossTable(breakdown, route) : null,
      versionsNote(breakdown.versions),
    ),
    h(
      "div",
      { class: "panel" },
      h("h2", {}, `Failure clusters (family, category, signature): ${num(cases.total_clusters)}`),
      h(
        "p",
        { class: "muted small" },
        "Each with its trend over policy versions (in the order they acted) and its newest episodes.",
      ),
      table(
        [
          th("failures", "num"),
          th("family"),
          th("category"),
          th("signature · tasks"),
          th("trend"),
          th("examples"),
        ],
        caseRows,
        { id: "cases" },
      ),
    ),
    lakeTables(tables.tables),
  );
}

function lakeTables(tables) {
  const existing = tables.filter((t) => t.exists);
  const damaged = tables.filter((t) => t.problems.length);
  return h(
    "details",
    { class: "panel", id: "lake-tables", open: damaged.length > 0 },
    h(
      "summary",
      {},
      `The lake: ${plural(existing.length, "table")}`,
      damaged.length
        ? h("span", { class: "bad" }, ` (damaged: ${damaged.map((t) => t.name).join(", ")})`)
        : "",
    ),
    h(
      "span",
      { class: "items small" },
      tables.map((t) =>
        h(
          "span",
          { class: t.problems.length ? "bad" : t.exists ? "" : "muted", title: t.problems.join("; ") },
          t.exists ? `${t.name} v${t.version} (${num(t.rows)} rows)` : `${t.name}: not yet`,
        ),
      ),
    ),
  );
}

async function clusterView(route) {
  const id = route.parts[1];
  const p = route.params;
  const judgeParams = { judge: p.get("judge"), judge_version: p.get("judge_version") };
  const cases = await api("failures/cases", { ...judgeParams, limit: 500, examples: 20 });
  const c = cases.clusters.find((x) => x.cluster_id === id);
  document.title = `trajlake · cluster ${id}`;
  if (!c) {
    throw new ApiError(
      404,
      "not_found",
      `no failure cluster ${id} under ${cases.judge} ${cases.judge_version} (it may have been read at another judge version)`,
    );
  }
  const details = await Promise.all(
    c.example_episode_ids.map((eid) =>
      api("episodes/" + enc(eid), { max_steps: 0, max_text: 200 }).catch(() => null),
    ),
  );
  const rows = c.example_episode_ids.map((eid, i) => {
    const d = details[i];
    const ep = d ? d.episode : null;
    const failure = d
      ? d.failures.find((f) => f.judge_version === cases.judge_version && f.signature === c.signature)
      : null;
    const step = failure ? failure.failing_seq : null;
    return h(
      "tr",
      {},
      h("td", { class: "ep" }, episodeLink(eid, step)),
      h("td", {}, ep ? ep.task_id : "–"),
      h("td", {}, ep ? ep.policy_id : "–"),
      h("td", {}, ep ? ep.policy_version : "–"),
      h("td", {}, ep ? pill(ep.status || "open") : "–"),
      h("td", { class: "num" }, step ?? "–"),
      h("td", {}, failure && failure.message ? h("span", { class: "small" }, failure.message) : ""),
    );
  });
  return h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("p", { class: "small" }, h("a", { href: link(["failures"], judgeParams) }, "← failures")),
      h("h1", {}, h("code", { id: "cluster-signature" }, c.signature)),
      facts([
        ["cluster", h("code", {}, c.cluster_id)],
        ["category", pill(c.category, "")],
        ["family", c.family],
        ["failures", `${num(c.count)} (${pct(c.share)} of ${cases.judge} ${cases.judge_version}'s)`],
        ["first seen", when(c.first_seen)],
        ["last seen", when(c.last_seen)],
        ["curated as", c.cases.join(", ")],
      ]),
      c.example_message ? h("pre", {}, c.example_message) : null,
      h("h3", {}, "Tasks"),
      taskList(c.tasks),
      h("h3", {}, "Trend over policy versions"),
      trend(c.trend, true),
    ),
    h(
      "div",
      { class: "panel" },
      h("h2", {}, `Its newest episodes (${c.example_episode_ids.length} of ${num(c.count)})`),
      table(
        [
          th("episode"),
          th("task"),
          th("policy"),
          th("policy version"),
          th("status"),
          th("failing step", "num"),
          th("message"),
        ],
        rows,
        { id: "cluster-episodes" },
      ),
      versionsNote(cases.versions),
    ),
  );
}

// ------------------------------------------------------------------ signature clusters

async function clustersView(route) {
  const p = route.params;
  const judgeParams = { judge: p.get("judge"), judge_version: p.get("judge_version") };
  const minSize = p.get("min_size") || "";
  const [judges, c] = await Promise.all([
    api("judges"),
    api("failures/clusters", { ...judgeParams, min_size: minSize, limit: 200 }),
  ]);
  document.title = "trajlake · error signatures";
  const go = (changes) => navigate(withParams(route, changes));
  const minInput = h("input", {
    id: "min-size",
    type: "number",
    min: 1,
    value: minSize || 1,
    class: "nowrap",
    onchange: (e) => go({ min_size: e.target.value === "1" ? "" : e.target.value }),
  });
  const rows = c.clusters.map((x) =>
    h(
      "tr",
      {},
      h("td", { class: "num" }, num(x.count)),
      h("td", { class: "num" }, pct(x.share)),
      h("td", {}, pill(x.category, "")),
      h(
        "td",
        { class: "sig" },
        h("code", {}, x.signature),
        x.example_message ? h("div", { class: "small muted" }, x.example_message) : null,
      ),
      h("td", {}, taskList(x.tasks)),
      h("td", { class: "ep" }, examples(x.example_episode_ids)),
    ),
  );
  return h(
    "div",
    { class: "panel" },
    h("h1", {}, "Failures by error signature"),
    h(
      "div",
      { class: "controls" },
      judgeControls(judges.judges, route, go, c.judge_version),
      h("label", {}, "min size ", minInput),
    ),
    h(
      "p",
      {},
      `${num(c.total_clusters)} signatures over ${num(c.total_failures)} failures under ${c.judge ?? "no judge yet"} ${c.judge_version ?? ""}`,
    ),
    table(
      [
        th("failures", "num"),
        th("share", "num"),
        th("category"),
        th("signature"),
        th("tasks"),
        th("examples"),
      ],
      rows,
      { id: "clusters" },
    ),
    versionsNote(c.versions),
  );
}

// ------------------------------------------------------------------ episodes

const EPISODE_FILTERS = [
  "task_id",
  "family",
  "policy_version",
  "status",
  "completeness",
  "verdict",
  "judge",
  "judge_version",
];

async function episodesView(route) {
  const p = route.params;
  const offset = Number(p.get("offset") || 0);
  const filters = Object.fromEntries(EPISODE_FILTERS.map((k) => [k, p.get(k) || ""]));
  const page = await api("episodes", { ...filters, limit: PAGE, offset });
  document.title = "trajlake · episodes";
  const field = (name, label, options) => {
    const control = options
      ? h(
          "select",
          { name },
          h("option", { value: "" }, "any"),
          options.map((o) => h("option", { value: o, selected: o === filters[name] }, o)),
        )
      : h("input", { name, value: filters[name], size: 12 });
    return h("label", {}, label + " ", control);
  };
  const form = h(
    "form",
    {
      class: "controls",
      id: "episode-filters",
      onsubmit: (e) => {
        e.preventDefault();
        const values = Object.fromEntries(new FormData(e.target).entries());
        navigate(
          link(["episodes"], { ...values, judge: filters.judge, judge_version: filters.judge_version }),
        );
      },
    },
    field("task_id", "task"),
    field("family", "family"),
    field("policy_version", "policy version"),
    field("status", "status", ["success", "failure", "truncated", "infra_error", "aborted"]),
    field("verdict", "verdict", ["pass", "fail", "error"]),
    h("button", { type: "submit" }, "filter"),
    h("a", { href: "#/episodes" }, "clear"),
  );
  const rows = page.items.map((e) =>
    h(
      "tr",
      {},
      h("td", { class: "nowrap" }, when(e.started_at)),
      h("td", { class: "ep" }, episodeLink(e.episode_id, null, shortId(e.episode_id))),
      h("td", {}, e.task_id, e.task_family ? h("div", { class: "small muted" }, e.task_family) : null),
      h("td", {}, e.policy_id ?? "–"),
      h("td", {}, e.policy_version ?? "–"),
      h("td", {}, pill(e.status || "open")),
      h("td", {}, e.completeness),
      h("td", { class: "num" }, num(e.num_events)),
    ),
  );
  const judged = page.judge ? ` (verdicts of ${page.judge} ${page.judge_version})` : "";
  return h(
    "div",
    { class: "panel" },
    h("h1", {}, "Episodes"),
    form,
    h("p", {}, `${num(page.total)} episodes${judged}, newest first`),
    table(
      [
        th("started"),
        th("episode"),
        th("task"),
        th("policy"),
        th("policy version"),
        th("status"),
        th("completeness"),
        th("steps", "num"),
      ],
      rows,
      { id: "episodes" },
    ),
    pager(page.total, offset, PAGE, (o) => withParams(route, { offset: o || "" })),
    versionsNote(page.versions),
  );
}

// ------------------------------------------------------------------ one episode: the timeline

// a text kept in the blob store: a button that fetches it (GET /blobs/{sha256}) into `target`
function blobOpener(ref, target, what) {
  const button = h(
    "button",
    {
      class: "link open-blob",
      type: "button",
      dataset: { blob: ref.sha256 },
      onclick: async () => {
        button.disabled = true;
        button.textContent = "opening…";
        try {
          const blob = await api("blobs/" + enc(ref.sha256));
          target.textContent = blob.text;
          button.textContent = blob.truncated
            ? `first ${num(blob.text.length)} characters of ${num(blob.size)} bytes`
            : `the whole ${what} (${num(blob.size)} bytes)`;
        } catch (err) {
          button.disabled = false;
          button.textContent = `could not open: ${err.message}`;
        }
      },
    },
    `open the whole ${what} (${num(ref.size)} bytes)`,
  );
  return button;
}

function textOutput(label, out) {
  if (!out || (!out.text && !out.size)) return null;
  const bytes = out.size ? ` · ${num(out.size)} bytes` : "";
  const pre = h("pre", {}, out.text || "");
  const blob = out.blob ? [" · a preview: ", blobOpener(out.blob, pre, "text")] : [];
  return h("div", {}, h("div", { class: "small muted" }, label + bytes, ...blob), pre);
}

function message(role, content, extra) {
  const x = extra || {};
  return h(
    "div",
    { class: `msg ${role}${x.completion ? " completion" : ""}` },
    h(
      "div",
      { class: "role" },
      x.completion ? `${role} · completion` : role,
      x.name ? ` (${x.name})` : "",
      x.tool_call_id ? ` · answers ${x.tool_call_id}` : "",
    ),
    x.reasoning ? foldable("reasoning", x.reasoning) : null,
    content !== null && content !== undefined && content !== ""
      ? h("div", { class: "text" }, content)
      : h("div", { class: "muted small" }, "(no text)"),
    x.tool_calls && x.tool_calls.length
      ? h("div", {}, h("div", { class: "small muted" }, "tool calls"), h("pre", {}, json(x.tool_calls)))
      : null,
  );
}

function samplingText(s) {
  if (!s) return null;
  const parts = Object.entries(s)
    .filter(([k, v]) => v !== null && v !== undefined && !(k === "extra" && Object.keys(v).length === 0))
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  return parts.length ? parts.join(" ") : null;
}

function sameMessage(a, b) {
  return a.role === b.role && a.content === b.content && a.tool_call_id === b.tool_call_id;
}

// The prompt of a call usually repeats the one before it and adds to it: the repeated messages are
// folded (the chat reads as a conversation, step after step).
function modelCall(p, before) {
  const parts = [];
  if (p.messages && p.messages.length) {
    const prior = before && before.payload.messages ? before.payload.messages : [];
    const repeated =
      prior.length && prior.length < p.messages.length && prior.every((m, i) => sameMessage(m, p.messages[i]))
        ? prior.length
        : 0;
    const bubble = (m) =>
      message(m.role, m.content, {
        name: m.name,
        tool_call_id: m.tool_call_id,
        tool_calls: m.tool_calls,
        reasoning: m.reasoning_content,
      });
    if (repeated) {
      parts.push(
        h(
          "details",
          { class: "history" },
          h("summary", {}, `the ${plural(repeated, "message")} of step #${before.seq}'s prompt`),
          p.messages.slice(0, repeated).map(bubble),
        ),
      );
    }
    parts.push(p.messages.slice(repeated).map(bubble));
  } else if (p.messages_ref) {
    const pre = h("pre", { class: "blob-text" });
    parts.push(
      h("div", { class: "muted small" }, "the prompt's messages are in the blob store: ",
        blobOpener(p.messages_ref, pre, "prompt")),
      pre,
    );
  } else {
    parts.push(h("div", { class: "muted small" }, "the prompt was not recorded with this call"));
  }
  parts.push(
    message("assistant", p.completion, {
      completion: true,
      reasoning: p.reasoning,
      tool_calls: p.tool_calls,
    }),
  );
  const tokens = [];
  if (p.prompt_tokens !== null && p.prompt_tokens !== undefined)
    tokens.push(`${num(p.prompt_tokens)} prompt`);
  if (p.completion_tokens !== null && p.completion_tokens !== undefined)
    tokens.push(`${num(p.completion_tokens)} completion`);
  const served = p.served_by
    ? [
        p.served_by.kind,
        p.served_by.version,
        p.served_by.weights_version && `weights ${p.served_by.weights_version}`,
      ]
        .filter(Boolean)
        .join(" ")
    : null;
  const meta = [
    p.model && `model ${p.model}`,
    tokens.length && `tokens: ${tokens.join(" · ")}`,
    p.finish_reason && `finish: ${p.finish_reason}`,
    p.latency_s ? `latency ${p.latency_s.toFixed(2)} s` : null,
    samplingText(p.sampling) && `sampling: ${samplingText(p.sampling)}`,
    served && `served by ${served}`,
    p.prompt_token_ids && `${num(p.prompt_token_ids.length)} prompt token ids`,
    p.completion_token_ids && `${num(p.completion_token_ids.length)} completion token ids`,
    p.completion_logprobs && `${num(p.completion_logprobs.length)} logprobs`,
    p.history_break && "history break",
  ].filter(Boolean);
  return h(
    "div",
    { class: "chat" },
    parts,
    h(
      "div",
      { class: "meta" },
      meta.map((m) => h("span", {}, m)),
    ),
  );
}

function stepBody(s, calls, before) {
  const p = s.payload;
  if (p === null || p === undefined) return s.text ? h("pre", {}, s.text) : null;
  switch (s.type) {
    case "episode_started":
      return facts([
        ["task", `${p.task.id} v${p.task.version} (${p.task.family})`],
        ["policy", p.policy.id],
        ["policy version", p.policy.version],
        ["group", p.group_id],
        ["attempt", p.attempt],
        ["sampling", samplingText(p.sampling)],
        ["image", p.sandbox_image],
        ["limits", samplingText(p.limits)],
        ["instruction", p.metadata && p.metadata.instruction ? h("pre", {}, p.metadata.instruction) : null],
      ]);
    case "model_call":
      return modelCall(p, before);
    case "tool_call": {
      const command = p.arguments && typeof p.arguments.command === "string" ? p.arguments.command : null;
      return h(
        "div",
        {},
        command !== null ? h("pre", { class: "command" }, "$ " + command) : h("pre", {}, json(p.arguments)),
      );
    }
    case "tool_result": {
      const call = calls.get(p.call_id);
      return h(
        "div",
        {},
        h(
          "div",
          { class: "small muted" },
          `result of ${p.call_id}${call ? ` (${call.tool})` : ""}`,
          p.duration_s ? ` · ${p.duration_s.toFixed(2)} s` : "",
        ),
        textOutput("stdout", p.stdout),
        textOutput("stderr", p.stderr),
        !p.stdout?.text && !p.stderr?.text ? h("div", { class: "muted small" }, "(no output)") : null,
      );
    }
    case "sandbox":
      return facts([
        ["action", p.action],
        ["backend", p.backend],
        ["sandbox", p.sandbox_id],
        ["detail", p.detail],
        ["usage", p.usage ? samplingText(p.usage) : null],
      ]);
    case "reward":
      return h(
        "div",
        {},
        facts([
          ["judge", `${p.judge_name} ${p.judge_version}`],
          ["verdict", pill(p.verdict)],
          ["score", p.score],
          ["flags", (p.flags || []).join(", ")],
          ["source", p.source],
        ]),
        foldable("evidence", p.evidence),
      );
    case "episode_ended":
      return facts([
        ["status", pill(p.status)],
        ["reason", p.reason],
        ["events", p.num_events],
      ]);
    case "annotation":
      return h(
        "div",
        {},
        facts([
          ["key", p.key],
          ["author", p.author],
        ]),
        foldable(`value (${Array.isArray(p.value) ? "list" : typeof p.value})`, p.value, false),
      );
    default:
      return s.text ? h("pre", {}, s.text) : null;
  }
}

function stepBadge(s) {
  if (s.type !== "tool_result") return null;
  if (s.timed_out) return h("span", { class: "exit bad" }, "timed out");
  if (s.error_kind) return h("span", { class: "exit bad" }, `error: ${s.error_kind}`);
  if (s.exit_code === null || s.exit_code === undefined)
    return h("span", { class: "exit muted" }, "no exit code");
  return h("span", { class: `exit ${s.exit_code === 0 ? "good" : "bad"}` }, `exit ${s.exit_code}`);
}

function selectStep(seq, opts) {
  if (!current) return;
  const o = opts || {};
  const node = current.nodes.get(seq);
  if (!node) return;
  for (const n of current.list.querySelectorAll(".step.current")) n.classList.remove("current");
  node.classList.add("current");
  node.setAttribute("aria-current", "step");
  for (const n of current.list.querySelectorAll(".step[aria-current]"))
    if (n !== node) n.removeAttribute("aria-current");
  current.seq = seq;
  if (o.scroll) node.scrollIntoView({ block: "nearest" });
  if (o.updateHash) history.replaceState(null, "", link(["episode", current.id], { step: seq }));
  const where = $("#step-position");
  if (where) where.textContent = `step ${seq} (${current.order.indexOf(seq) + 1} of ${current.order.length})`;
}

function moveStep(delta) {
  if (!current || !current.order.length) return;
  const at = current.order.indexOf(current.seq);
  const next =
    at < 0
      ? delta > 0
        ? 0
        : current.order.length - 1
      : Math.min(current.order.length - 1, Math.max(0, at + delta));
  selectStep(current.order[next], { scroll: true, updateHash: true });
}

function verdictForm(episodeId) {
  const status = h("div", { class: "verdict-status", "aria-live": "polite" });
  const select = h(
    "select",
    { name: "verdict", required: true },
    VERDICTS.map((v) => h("option", { value: v }, v.replace("_", " "))),
  );
  const note = h("textarea", { name: "note", maxlength: 8000, placeholder: "why (optional)" });
  const button = h("button", { type: "submit", class: "primary" }, "record verdict");
  const form = h(
    "form",
    {
      class: "verdict-form",
      dataset: { episode: episodeId },
      onsubmit: async (e) => {
        e.preventDefault();
        button.disabled = true;
        status.replaceChildren();
        try {
          const r = await api("review/" + enc(episodeId), null, {
            method: "POST",
            body: { verdict: select.value, note: note.value || null },
          });
          status.replaceChildren(
            h(
              "div",
              { class: "notice" },
              `Verdict “${r.review.verdict}” by ${r.review.reviewer} recorded in the log (${r.topic}, event ${r.event_id}); `,
              "it is folded into reviews on the pipeline's next batch.",
            ),
          );
          note.value = "";
        } catch (err) {
          status.replaceChildren(h("div", { class: "notice bad" }, describe(err)));
        } finally {
          button.disabled = false;
        }
      },
    },
    h("label", {}, "verdict ", select),
    note,
    button,
  );
  return h("div", {}, form, status);
}

async function episodeView(route) {
  const id = route.parts[1];
  if (!id) return navigateTo("#/episodes");
  // the learner's side is drawn whatever it answers: an error there is said in its panel
  const [d, learned] = await Promise.all([
    api("episodes/" + enc(id), { include_payload: true, max_text: 4000 }),
    api("episodes/" + enc(id) + "/training").catch((err) => ({ error: err })),
  ]);
  const ep = d.episode;
  document.title = `trajlake · episode ${shortId(id)}`;
  const failingBy = new Map(); // seq -> failures
  for (const f of d.failures) {
    if (f.failing_seq === null) continue;
    if (!failingBy.has(f.failing_seq)) failingBy.set(f.failing_seq, []);
    failingBy.get(f.failing_seq).push(f);
  }
  const seqs = new Set(d.steps.map((s) => s.seq));
  const calls = new Map(d.steps.filter((s) => s.type === "tool_call").map((s) => [s.call_id, s]));
  const t0 = d.steps.length ? Date.parse(d.steps[0].ts) : null;
  const nodes = new Map();
  const list = h("ol", { class: "timeline", id: "timeline", "aria-label": "steps" });
  let lastCall = null; // the model call before this step
  for (const s of d.steps) {
    const failing = failingBy.get(s.seq);
    const offset = t0 !== null ? `+${((Date.parse(s.ts) - t0) / 1000).toFixed(1)} s` : "";
    const node = h(
      "li",
      {
        class: `step type-${s.type}${failing ? " failing" : ""}`,
        id: `step-${s.seq}`,
        tabindex: -1,
        dataset: { seq: s.seq, type: s.type },
      },
      h(
        "div",
        { class: "step-head", onclick: () => selectStep(s.seq, { updateHash: true }) },
        h("span", { class: "seq" }, `#${s.seq}`),
        h("span", { class: "type" }, s.type.replace("_", " ")),
        s.tool ? h("code", {}, s.tool) : null,
        stepBadge(s),
        h("span", { class: "muted small", title: s.ts }, offset),
        failing
          ? h(
              "span",
              { class: "failing-note" },
              "failing step · " + failing.map((f) => `${judgeOf(f)}: ${f.category}`).join("; "),
            )
          : null,
      ),
      stepBody(s, calls, lastCall),
      s.text_truncated || s.payload_truncated
        ? h(
            "div",
            { class: "muted small" },
            `cut to 4000 characters per text (the full text has ${num(s.text_length)})`,
          )
        : null,
      foldable("payload (JSON)", s.payload),
    );
    nodes.set(s.seq, node);
    if (s.type === "model_call" && s.payload) lastCall = s;
    list.append(node);
  }
  const rewards = d.rewards.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, r.judge_name),
      h("td", {}, r.judge_version),
      h("td", {}, pill(r.verdict)),
      h("td", { class: "num" }, r.score),
      h("td", {}, r.source, r.rejudge_run_id ? h("div", { class: "small muted" }, r.rejudge_run_id) : null),
      h("td", {}, (r.flags || []).join(", ") || "–"),
      h(
        "td",
        {},
        r.components && Object.keys(r.components).length ? samplingText(r.components) : "–",
        foldable("evidence", r.evidence),
      ),
    ),
  );
  const failures = d.failures.map((f) =>
    h(
      "tr",
      {},
      h("td", {}, judgeOf(f)),
      h("td", {}, pill(f.category, "")),
      h(
        "td",
        { class: "num" },
        f.failing_seq === null
          ? "–"
          : seqs.has(f.failing_seq)
            ? h("a", { href: link(["episode", id], { step: f.failing_seq }) }, `#${f.failing_seq}`)
            : h(
                "span",
                { title: "not a step of the episode: the re-judge's own reward event" },
                `${f.failing_seq} (re-judge)`,
              ),
      ),
      h(
        "td",
        { class: "sig" },
        h("code", {}, f.signature),
        f.message ? h("div", { class: "small muted" }, f.message) : null,
      ),
    ),
  );
  const order = d.steps.map((s) => s.seq);
  const asked = route.params.get("step");
  const failingSeqs = [...failingBy.keys()].filter((s) => seqs.has(s));
  const start =
    asked !== null && seqs.has(Number(asked))
      ? Number(asked)
      : failingSeqs.length
        ? Math.max(...failingSeqs)
        : null;
  const root = h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("h1", {}, "Episode ", h("span", { class: "id", id: "episode-id" }, id)),
      facts([
        ["task", ep.task_id],
        ["task version", ep.task_version],
        ["family", ep.task_family],
        ["policy", h("span", { id: "episode-policy" }, ep.policy_id ?? "–")],
        ["policy version", h("span", { id: "episode-policy-version" }, ep.policy_version ?? "–")],
        ["status", pill(ep.status || "open")],
        ["completeness", ep.completeness],
        ["source", ep.source],
        [
          "steps",
          `${num(d.steps_total)} (${plural(ep.num_model_calls, "model call")}, ` +
            `${plural(ep.num_tool_calls, "tool call")})`,
        ],
        [
          "tokens",
          ep.prompt_tokens !== null
            ? `${num(ep.prompt_tokens)} prompt · ${num(ep.completion_tokens)} completion`
            : null,
        ],
        ["started", when(ep.started_at)],
        ["duration", ep.duration_s !== null ? `${ep.duration_s.toFixed(1)} s` : null],
        ["group", ep.group_id],
        ["attempt", ep.attempt],
        ["missing steps", ep.missing_seqs && ep.missing_seqs.length ? ep.missing_seqs.join(", ") : null],
      ]),
      h(
        "p",
        { class: "keys" },
        h("kbd", {}, "j"),
        " / ",
        h("kbd", {}, "↓"),
        " next step · ",
        h("kbd", {}, "k"),
        " / ",
        h("kbd", {}, "↑"),
        " previous · ",
        h("span", { id: "step-position" }, ""),
      ),
    ),
    h(
      "div",
      { class: "grid" },
      h(
        "div",
        { class: "panel" },
        h("h2", {}, "Failures"),
        table([th("judge"), th("category"), th("step", "num"), th("signature")], failures, {
          id: "episode-failures",
        }),
      ),
      h(
        "div",
        { class: "panel" },
        h("h2", {}, "Review"),
        h("p", { class: "small muted" }, "A verdict needs a reviewer's token."),
        verdictForm(id),
      ),
    ),
    learnerPanel(learned, id, seqs),
    h(
      "div",
      { class: "panel" },
      h("h2", {}, "Rewards (every judge version)"),
      table(
        [
          th("judge"),
          th("version"),
          th("verdict"),
          th("score", "num"),
          th("source"),
          th("flags"),
          th("components · evidence"),
        ],
        rewards,
        { id: "episode-rewards" },
      ),
    ),
    h(
      "div",
      { class: "panel" },
      h(
        "h2",
        {},
        d.steps.length < d.steps_total
          ? `Steps (the first ${num(d.steps.length)} of ${num(d.steps_total)})`
          : `Steps (${num(d.steps_total)})`,
      ),
      list,
      versionsNote(d.versions),
    ),
  );
  root.afterMount = () => {
    current = { id, nodes, list, order, seq: null };
    if (start !== null) selectStep(start, { scroll: asked !== null, updateHash: false });
  };
  return root;
}

// ------------------------------------------------------------------ one episode: what the learner made of it

function signed(x, digits) {
  if (x === null || x === undefined) return "–";
  return (x > 0 ? "+" : "") + x.toFixed(digits);
}

function trainedPill(v) {
  if (v.trained === true) return pill("trained", "pass");
  if (v.trained === false) return pill("not trained", "fail");
  return pill("cannot tell", "open");
}

function learnerPanel(t, episodeId, seqs) {
  const title = h("h2", {}, "Learner");
  if (t.error) {
    return h(
      "div",
      { class: "panel", id: "learner" },
      title,
      h(
        "p",
        { class: "bad", id: "learner-summary" },
        `The learner's side could not be read: ${describe(t.error)}`,
      ),
    );
  }
  const stepLink = (seq) =>
    seqs.has(seq) ? h("a", { href: link(["episode", episodeId], { step: seq }) }, `#${seq}`) : `#${seq}`;
  const samples = t.samples.map((s) =>
    h(
      "tr",
      { dataset: { sequence: s.sequence } },
      h("td", { class: "num" }, s.sequence),
      h("td", {}, s.start.replace("_", " ")),
      h(
        "td",
        { class: "nowrap" },
        stepLink(s.first_seq),
        s.last_seq !== s.first_seq ? ["–", stepLink(s.last_seq)] : "",
        s.num_calls > 1 ? h("span", { class: "muted" }, ` (${num(s.num_calls)})`) : "",
      ),
      h(
        "td",
        { class: "num" },
        `${num(s.prompt_tokens)} · ${num(s.response_tokens)} · ${num(s.loss_tokens)}`,
      ),
      h("td", { class: "num" }, s.temperature),
      h("td", { class: "num" }, s.mean_logprob === null ? "–" : s.mean_logprob.toFixed(3)),
      h("td", { class: "problem" }, s.problem ? pill(s.problem, "fail") : pill("trainable", "pass")),
    ),
  );
  const checkpoints = t.checkpoints.map((v) =>
    h(
      "tr",
      { dataset: { checkpoint: v.checkpoint_id, trained: String(v.trained) } },
      h("td", {}, h("a", { href: link(["checkpoints", v.checkpoint_id]), class: "id" }, v.checkpoint_id)),
      h("td", { class: "nowrap" }, when(v.created_at)),
      h("td", {}, v.judge_name ? `${v.judge_name} ${v.judge_version}` : "–"),
      h("td", {}, trainedPill(v)),
      h(
        "td",
        { class: "reason" },
        v.reason ? h("code", {}, v.reason) : null,
        h("div", { class: "small" }, v.detail),
      ),
      h("td", { class: "num" }, v.reward ?? "–"),
      h("td", { class: "num advantage" }, signed(v.advantage, 3)),
      h(
        "td",
        { class: "small" },
        Object.keys(v.group_rewards).length
          ? h(
              "span",
              { class: "items" },
              Object.entries(v.group_rewards).map(([e, r]) =>
                h(
                  "span",
                  {},
                  e === episodeId ? h("b", {}, shortId(e)) : episodeLink(e, null, shortId(e)),
                  ` ${r}`,
                ),
              ),
            )
          : "–",
      ),
    ),
  );
  const summary = t.trained_by.length
    ? h("span", { class: "good" }, `Trained on by ${t.trained_by.join(", ")}.`)
    : t.reason
      ? [h("span", { class: "bad" }, "Not trained on: "), h("code", {}, t.reason), ` — ${t.detail}`]
      : h("span", { class: "muted" }, t.detail);
  return h(
    "div",
    { class: "panel", id: "learner" },
    title,
    h("p", { id: "learner-summary" }, summary),
    t.retractions.length
      ? h(
          "ul",
          { id: "learner-retractions" },
          t.retractions.map((r) =>
            h(
              "li",
              { class: "bad" },
              `retracted by ${r.retraction_id} (${r.scope} ${r.target}): ${r.reason} — ` +
                `${r.retracted_by}, ${when(r.retracted_at)}`,
            ),
          ),
        )
      : null,
    h("h3", {}, `Sample rows (${num(t.samples.length)})`),
    table(
      [
        th("seq.", "num"),
        th("starts at"),
        th("model calls"),
        th("tokens: prompt · response · loss", "num"),
        th("temp.", "num"),
        th("mean log-prob", "num"),
        th("trainable"),
      ],
      samples,
      { id: "learner-samples" },
    ),
    h(
      "h3",
      {},
      `Checkpoints that read it (${num(t.checkpoints.length)})`,
      t.checkpoints_not_holding
        ? h(
            "span",
            { class: "muted small" },
            ` · ${plural(t.checkpoints_not_holding, "other checkpoint")} read before it arrived or no lake data`,
          )
        : null,
    ),
    table(
      [
        th("checkpoint"),
        th("created"),
        th("judge"),
        th("trained"),
        th("why"),
        th("reward", "num"),
        th("advantage", "num"),
        th("its group's rewards"),
      ],
      checkpoints,
      { id: "learner-checkpoints" },
    ),
    h(
      "p",
      { class: "muted small" },
      "Recomputed from each checkpoint's lineage (the table versions, judge and selection it recorded) by the learner's rules.",
    ),
  );
}

function navigateTo(hash) {
  location.hash = hash;
  return h("p", {}, "…");
}

// ------------------------------------------------------------------ judges

async function judgesView() {
  const j = await api("judges");
  document.title = "trajlake · judges";
  const panels = j.judges.map((judge) => {
    const versions = judge.versions.map((v) => v.version);
    const latest = versions[versions.length - 1];
    const before = versions.length > 1 ? versions[versions.length - 2] : latest;
    const from = h(
      "select",
      { name: "from" },
      versions.map((v) => h("option", { value: v, selected: v === before }, v)),
    );
    const to = h(
      "select",
      { name: "to" },
      versions.map((v) => h("option", { value: v, selected: v === latest }, v)),
    );
    const rows = judge.versions.map((v) =>
      h(
        "tr",
        {},
        h("td", {}, h("code", {}, v.version)),
        h("td", { class: "num" }, num(v.episodes)),
        h(
          "td",
          {},
          h(
            "span",
            { class: "items" },
            Object.entries(v.verdicts).map(([k, n]) => h("span", {}, pill(k), ` ${num(n)}`)),
          ),
        ),
        h("td", { class: "nowrap" }, when(v.first_seen)),
        h("td", { class: "nowrap" }, when(v.last_seen)),
      ),
    );
    return h(
      "div",
      { class: "panel", dataset: { judge: judge.name } },
      h("h2", {}, judge.name),
      table([th("version"), th("episodes", "num"), th("verdicts"), th("first seen"), th("last seen")], rows),
      versions.length > 1
        ? h(
            "form",
            {
              class: "controls",
              onsubmit: (e) => {
                e.preventDefault();
                navigate(link(["judges", judge.name, "diff"], { from: from.value, to: to.value }));
              },
            },
            h("label", {}, "compare ", from),
            h("label", {}, "with ", to),
            h("button", { type: "submit" }, "show flips"),
          )
        : h("p", { class: "muted small" }, "One version: nothing to compare yet."),
    );
  });
  return h(
    "div",
    {},
    h("h1", {}, "Judges"),
    panels.length ? panels : h("p", { class: "empty" }, "No judge has scored an episode yet."),
    versionsNote(j.versions),
  );
}

async function judgeDiffView(route) {
  const name = route.parts[1];
  const p = route.params;
  const d = await api("judges/" + enc(name) + "/diff", {
    from_version: p.get("from"),
    to_version: p.get("to"),
    limit: 500,
  });
  document.title = `trajlake · ${name} ${d.from_version} → ${d.to_version}`;
  const seen = new Set();
  for (const [f, row] of Object.entries(d.matrix)) {
    seen.add(f);
    for (const t of Object.keys(row)) seen.add(t);
  }
  const verdicts = [
    ...VERDICT_ORDER.filter((v) => seen.has(v)),
    ...[...seen].filter((v) => !VERDICT_ORDER.includes(v)).sort(),
  ];
  const matrix = h(
    "table",
    { class: "matrix", id: "flip-matrix" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, `${d.from_version} ↓ · ${d.to_version} →`),
        verdicts.map((v) => h("th", { scope: "col" }, v)),
      ),
    ),
    h(
      "tbody",
      {},
      verdicts.map((f) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, f),
          verdicts.map((t) => {
            const n = (d.matrix[f] || {})[t] || 0;
            return h("td", { class: f === t ? "same" : n ? "flip" : "", dataset: { from: f, to: t } }, n);
          }),
        ),
      ),
    ),
  );
  const rows = d.flips.map((x) =>
    h(
      "tr",
      {},
      h("td", { class: "ep" }, episodeLink(x.episode_id)),
      h("td", {}, pill(x.from_verdict), " → ", pill(x.to_verdict)),
      h("td", { class: "num" }, `${x.from_score} → ${x.to_score}`),
    ),
  );
  const mean = (x) => (x === null ? "–" : x.toFixed(3));
  return h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("p", { class: "small" }, h("a", { href: "#/judges" }, "← judges")),
      h("h1", {}, `${d.judge}: ${d.from_version} → ${d.to_version}`),
      facts([
        ["scored by both", num(d.both)],
        ["flipped", h("span", { id: "flipped" }, num(d.flipped))],
        [`only ${d.from_version}`, num(d.only_from)],
        [`only ${d.to_version}`, num(d.only_to)],
        ["mean score", `${mean(d.mean_score_from)} → ${mean(d.mean_score_to)}`],
      ]),
      h("div", { class: "scroll" }, matrix),
    ),
    h(
      "div",
      { class: "panel" },
      h("h2", {}, `Flipped episodes (${num(d.flipped)})`),
      table([th("episode"), th("verdict"), th("score", "num")], rows, { id: "flips" }),
      versionsNote(d.versions),
    ),
  );
}

async function judgesRoute(route) {
  if (route.parts[1] && route.parts[2] === "diff") return judgeDiffView(route);
  return judgesView(route);
}

// ------------------------------------------------------------------ review queue

// the episode's steps beside its queue item: loaded when opened, the failing steps marked
function besideTimeline(episodeId) {
  const body = h("ol", { class: "timeline compact" });
  let loaded = false;
  const box = h(
    "details",
    {
      class: "beside",
      ontoggle: async () => {
        if (!box.open || loaded) return;
        loaded = true;
        body.append(h("li", { class: "muted small" }, "loading…"));
        try {
          const d = await api("episodes/" + enc(episodeId), { include_payload: true, max_text: 2000 });
          const failing = new Set(d.failures.map((f) => f.failing_seq));
          const calls = new Map(d.steps.filter((s) => s.type === "tool_call").map((s) => [s.call_id, s]));
          let lastCall = null;
          body.replaceChildren();
          for (const s of d.steps) {
            body.append(
              h(
                "li",
                { class: `step type-${s.type}${failing.has(s.seq) ? " failing" : ""}`, dataset: { seq: s.seq, type: s.type } },
                h(
                  "div",
                  { class: "step-head" },
                  h("a", { href: link(["episode", episodeId], { step: s.seq }) }, `#${s.seq}`),
                  h("span", { class: "type" }, s.type.replace("_", " ")),
                  s.tool ? h("code", {}, s.tool) : null,
                  stepBadge(s),
                ),
                stepBody(s, calls, lastCall),
              ),
            );
            if (s.type === "model_call" && s.payload) lastCall = s;
          }
        } catch (err) {
          body.replaceChildren(h("li", { class: "error" }, `the timeline could not be read: ${err.message}`));
        }
      },
    },
    h("summary", {}, "the timeline, here"),
    body,
  );
  return box;
}

async function reviewView(route) {
  const status = route.params.get("status") || "open";
  const offset = Number(route.params.get("offset") || 0);
  const q = await api("review/queue", { status, limit: PAGE, offset });
  document.title = "trajlake · review";
  const tabs = h(
    "div",
    { class: "controls" },
    ["open", "reviewed", "all"].map((s) =>
      s === status ? h("b", {}, s) : h("a", { href: link(["review"], { status: s === "open" ? "" : s }) }, s),
    ),
  );
  const items = q.items.map((it) =>
    h(
      "div",
      { class: "panel", dataset: { item: it.item_id } },
      h("h2", {}, episodeLink(it.episode_id), " ", pill(it.rule, "")),
      h("p", {}, it.reason),
      facts([
        ["task", it.task_id],
        ["family", it.task_family],
        ["judgement", it.judge_name ? `${it.judge_name} ${it.judge_version}: ${it.judge_verdict}` : null],
        ["queued", when(it.queued_at)],
        ["kind", it.kind],
      ]),
      it.reviews.length
        ? h(
            "ul",
            {},
            it.reviews.map((r) =>
              h(
                "li",
                {},
                pill(r.verdict),
                ` by ${r.reviewer} at ${when(r.reviewed_at)}`,
                r.note ? ` — ${r.note}` : "",
              ),
            ),
          )
        : null,
      besideTimeline(it.episode_id),
      verdictForm(it.episode_id),
    ),
  );
  return h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("h1", {}, "Review queue"),
      tabs,
      h(
        "p",
        {},
        `${num(q.total)} ${status === "all" ? "" : status + " "}items, newest first. A verdict needs a reviewer's token.`,
      ),
      versionsNote(q.versions),
    ),
    items.length
      ? items
      : h(
          "p",
          { class: "empty", id: "queue-empty" },
          status === "open"
            ? "Nothing is waiting for review (`trajlake review fill` queues episodes by the rules); any episode's page takes a verdict too."
            : "Nothing here.",
        ),
    pager(q.total, offset, PAGE, (o) => withParams(route, { offset: o || "" })),
  );
}

// ------------------------------------------------------------------ checkpoints and lineage

function checkpointRow(c) {
  return h(
    "tr",
    {},
    h("td", {}, h("a", { href: link(["checkpoints", c.checkpoint_id]), class: "id" }, c.checkpoint_id)),
    h(
      "td",
      {},
      c.parent_id ? h("a", { href: link(["checkpoints", c.parent_id]), class: "id" }, c.parent_id) : "–",
    ),
    h("td", {}, c.policy_id),
    h("td", {}, c.policy_version),
    h("td", {}, c.backend),
    h("td", { class: "nowrap" }, when(c.created_at)),
    h("td", {}, c.judge_name ? `${c.judge_name} ${c.judge_version}` : "–"),
    h("td", { class: "num" }, num(c.num_samples)),
    h(
      "td",
      {},
      h(
        "span",
        { class: "items" },
        Object.entries(c.table_versions || {}).map(([t, v]) => h("span", {}, `${t} v${v}`)),
      ),
    ),
  );
}

const CHECKPOINT_HEAD = [
  "checkpoint",
  "parent",
  "policy",
  "policy version",
  "backend",
  "created",
  "judge",
  "samples",
  "table versions",
];

async function checkpointsView(route) {
  if (route.parts[1]) return lineageView(route);
  const page = await api("checkpoints", { limit: 200 });
  document.title = "trajlake · checkpoints";
  return h(
    "div",
    { class: "panel" },
    h("h1", {}, "Checkpoints"),
    h("p", {}, `${num(page.total)} checkpoints, newest first; open one for its lineage.`),
    table(
      CHECKPOINT_HEAD.map((c) => th(c, c === "samples" ? "num" : "")),
      page.items.map(checkpointRow),
      { id: "checkpoints" },
    ),
    versionsNote(page.versions),
  );
}

async function lineageView(route) {
  const id = route.parts[1];
  const l = await api("checkpoints/" + enc(id) + "/lineage");
  document.title = `trajlake · lineage of ${id}`;
  const chain = l.chain.map((c) =>
    h(
      "li",
      { dataset: { checkpoint: c.checkpoint_id } },
      h("b", { class: "id" }, c.checkpoint_id),
      facts([
        ["policy", c.policy_id],
        ["policy version", c.policy_version],
        ["created", when(c.created_at)],
        ["judge", c.judge_name ? `${c.judge_name} ${c.judge_version}` : null],
        ["samples", num(c.num_samples)],
        [
          "tables",
          Object.entries(c.table_versions || {})
            .map(([t, v]) => `${t} v${v}`)
            .join(" · "),
        ],
        ["path", h("code", {}, c.path)],
      ]),
      foldable("offsets and metrics", { offsets: c.offsets, metrics: c.metrics }),
    ),
  );
  return h(
    "div",
    { class: "panel" },
    h("p", { class: "small" }, h("a", { href: "#/checkpoints" }, "← checkpoints")),
    h("h1", {}, "Lineage of ", h("span", { class: "id" }, id)),
    h("ol", { class: "lineage", id: "lineage" }, chain),
    l.broken_at
      ? h(
          "p",
          { class: "bad" },
          `the chain breaks at ${l.broken_at}: that parent is not in the checkpoints table (or loops)`,
        )
      : h("p", { class: "muted" }, "the chain ends at a checkpoint without a parent"),
    versionsNote(l.versions),
  );
}

// ------------------------------------------------------------------ quarantine

async function quarantineView(route) {
  const offset = Number(route.params.get("offset") || 0);
  const q = await api("quarantine", { limit: PAGE, offset });
  document.title = "trajlake · quarantine";
  const rows = q.items.map((r) =>
    h(
      "tr",
      {},
      h("td", { class: "nowrap" }, when(r.kafka_ts)),
      h("td", {}, h("code", {}, `${r.topic} [${r.partition}] @${r.offset}`)),
      h(
        "td",
        { class: "sig" },
        h("div", { class: "reason" }, r.error),
        r.error_fields && r.error_fields.length
          ? h("div", { class: "small muted" }, "fields: ", r.error_fields.join(", "))
          : null,
      ),
      h("td", {}, r.key !== null ? h("code", {}, r.key) : "–"),
      h(
        "td",
        {},
        r.raw !== null ? foldable(`${num(r.raw_bytes)} bytes${r.raw_truncated ? " (cut)" : ""}`, r.raw) : "–",
      ),
    ),
  );
  return h(
    "div",
    { class: "panel" },
    h("h1", {}, "Quarantine"),
    h(
      "p",
      { id: "quarantine-total" },
      q.total
        ? `${plural(q.total, "record")} of the log could not be parsed or validated (newest first); they never reached the events table.`
        : "Nothing is quarantined: every record of the log parsed and validated.",
    ),
    table([th("received"), th("where in the log"), th("reason"), th("key"), th("raw record")], rows, {
      id: "quarantine",
    }),
    pager(q.total, offset, PAGE, (o) => withParams(route, { offset: o || "" })),
    versionsNote(q.versions),
  );
}

// ------------------------------------------------------------------ health

const HEALTH_VALUES = [
  ["pipeline_lag", "pipeline lag", (v) => `${num(Math.round(v))} records`],
  ["records_per_second", "records / s", (v) => num(Number(v.toFixed(1)))],
  ["quarantine_rate", "quarantine rate", pct],
  ["judge_error_rate", "judge error rate", pct],
];

function stat(key, label, value, title) {
  return h(
    "div",
    { class: "stat", dataset: { metric: key }, title },
    h("div", { class: "stat-value" }, value),
    h("div", { class: "stat-label" }, label),
  );
}

function prometheusPanel(prom) {
  const title = h("h2", {}, "Pipeline, sandboxes and judges (Prometheus)");
  if (!prom) {
    return h(
      "div",
      { class: "panel", id: "prometheus" },
      title,
      h(
        "p",
        { id: "prometheus-status", class: "notice warn" },
        "Prometheus is not configured: this service was started without its URL, so the pipeline's lag, " +
          "the quarantine rate, records per second, the sandbox pools, the judges' error rate and the alerts " +
          "are not shown. Start it with ",
        h("code", {}, "trajlake api serve --prometheus URL"),
        ". The lake's side is below.",
      ),
    );
  }
  if (prom.error) {
    return h(
      "div",
      { class: "panel", id: "prometheus" },
      title,
      h("p", { id: "prometheus-status", class: "notice bad" }, prom.error),
    );
  }
  const v = prom.values;
  const shown = (key, f) => (v[key] === null || v[key] === undefined ? "no data" : f(v[key]));
  const size = v.sandbox_pool_size;
  const used = v.sandbox_in_use;
  const pool =
    size === null || size === undefined
      ? "no data"
      : `${num(used === null || used === undefined ? null : Math.round(used))} / ${num(Math.round(size))}`;
  const alerts = prom.alerts.map((a) =>
    h(
      "tr",
      { dataset: { alert: a.name, state: a.state } },
      h("td", {}, pill(a.state, a.state === "firing" ? "fail" : "open")),
      h("td", {}, h("b", {}, a.name)),
      h("td", {}, a.severity ?? "–"),
      h("td", {}, a.summary ?? "–"),
      h(
        "td",
        { class: "small" },
        h(
          "span",
          { class: "items" },
          Object.entries(a.labels).map(([k, x]) => h("span", {}, `${k}=${x}`)),
        ),
      ),
    ),
  );
  const firing = prom.alerts.filter((a) => a.state === "firing").length;
  return h(
    "div",
    { class: "panel", id: "prometheus" },
    title,
    h(
      "div",
      { class: "stats" },
      HEALTH_VALUES.map(([key, label, f]) => stat(key, label, shown(key, f))),
      stat("sandbox_pool", "sandboxes in use / pool", pool),
    ),
    h(
      "h3",
      {},
      "Alerts",
      firing ? h("span", { class: "bad" }, ` · ${num(firing)} firing`) : null,
    ),
    alerts.length
      ? table([th("state"), th("alert"), th("severity"), th("summary"), th("labels")], alerts, {
          id: "alerts",
        })
      : h("p", { class: "muted", id: "alerts-none" }, "No alert is pending or firing."),
    h("p", { class: "muted small", id: "prometheus-status" }, "read from ", h("code", {}, prom.url)),
  );
}

async function healthView() {
  const p = await api("platform");
  document.title = "trajlake · health";
  const q = p.quarantine;
  const versions = Object.entries(p.versions).sort(([a], [b]) => a.localeCompare(b));
  return h(
    "div",
    {},
    h("h1", {}, "Health"),
    prometheusPanel(p.prometheus),
    h(
      "div",
      { class: "grid" },
      h(
        "div",
        { class: "panel", id: "quarantine-health" },
        h("h2", {}, "Quarantine"),
        h(
          "p",
          { id: "quarantine-count" },
          q.rows
            ? `${plural(q.rows, "record")} of the log quarantined, ${num(q.last_hour)} in the last hour.`
            : "Nothing is quarantined.",
        ),
        q.reasons.length
          ? h(
              "ul",
              { class: "reasons", id: "quarantine-reasons" },
              q.reasons.map((r) =>
                h(
                  "li",
                  {},
                  h("span", { class: "num" }, `${num(r.count)} ×`),
                  " ",
                  h("a", { href: "#/quarantine", title: "the quarantined records" }, r.reason),
                ),
              ),
            )
          : null,
        q.rows
          ? h("p", { class: "small" }, h("a", { href: "#/quarantine" }, "all quarantined records →"))
          : null,
      ),
      h(
        "div",
        { class: "panel" },
        h("h2", {}, "Tables"),
        h(
          "span",
          { class: "items small", id: "table-versions" },
          versions.map(([t, ver]) =>
            h(
              "span",
              { class: ver === null ? "muted" : "", dataset: { table: t } },
              ver === null ? `${t}: not yet` : `${t} v${ver}`,
            ),
          ),
        ),
      ),
    ),
  );
}

// ------------------------------------------------------------------ search

function snippetNode(hit) {
  const s = hit.snippet;
  return h(
    "span",
    { class: "snippet" },
    s.slice(0, hit.match_start),
    h("mark", {}, s.slice(hit.match_start, hit.match_end)),
    s.slice(hit.match_end),
  );
}

async function searchView(route) {
  const text = route.params.get("q") || "";
  const offset = Number(route.params.get("offset") || 0);
  document.title = "trajlake · search";
  if (!text) {
    return h(
      "div",
      { class: "panel" },
      h("h1", {}, "Search"),
      h(
        "p",
        {},
        "Type in the search box above: episode and task ids, instructions, completions, tool calls and outputs are searched (case-insensitive).",
      ),
    );
  }
  const r = await api("search", { q: text, limit: PAGE, offset, max_hits: 5 });
  const items = r.items.map((it) => {
    const e = it.episode;
    return h(
      "li",
      { class: "panel", dataset: { episode: e.episode_id } },
      h("div", {}, episodeLink(e.episode_id), " ", pill(e.status || "open")),
      facts([
        ["task", e.task_id],
        ["policy", e.policy_id],
        ["policy version", e.policy_version],
        ["started", when(e.started_at)],
        ["matches", num(it.hit_count)],
      ]),
      it.hits.map((hit) =>
        h(
          "div",
          { class: "hit" },
          h(
            "div",
            { class: "small muted" },
            hit.seq === null
              ? hit.field.replace("_", " ")
              : h(
                  "a",
                  { href: link(["episode", e.episode_id], { step: hit.seq }) },
                  `step #${hit.seq} · ${hit.field.replace("_", " ")}`,
                ),
          ),
          snippetNode(hit),
        ),
      ),
      it.hit_count > it.hits.length
        ? h("div", { class: "small muted" }, `and ${num(it.hit_count - it.hits.length)} more in this episode`)
        : null,
    );
  });
  return h(
    "div",
    {},
    h(
      "div",
      { class: "panel" },
      h("h1", {}, "Search ", h("q", {}, text)),
      h(
        "p",
        { id: "search-total" },
        `${plural(r.total, "episode")} (${plural(r.hits, "place")} in all), newest first`,
      ),
      versionsNote(r.versions),
    ),
    h("ol", { class: "timeline", id: "search-results" }, items),
    pager(r.total, offset, PAGE, (o) => withParams(route, { offset: o || "" })),
  );
}

// ------------------------------------------------------------------ wiring

const VIEWS = {
  failures: failuresView,
  cluster: clusterView,
  clusters: clustersView,
  episodes: episodesView,
  episode: episodeView,
  judges: judgesRoute,
  review: reviewView,
  checkpoints: checkpointsView,
  quarantine: quarantineView,
  health: healthView,
  search: searchView,
};

function typing(target) {
  return (
    target instanceof HTMLElement &&
    (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
  );
}

document.addEventListener("keydown", (e) => {
  if (!current || e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
  if (e.key === "j" || e.key === "ArrowDown") {
    e.preventDefault();
    moveStep(1);
  } else if (e.key === "k" || e.key === "ArrowUp") {
    e.preventDefault();
    moveStep(-1);
  }
});

$("#token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = $("#token").value.trim();
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  $("#token-box").hidden = true;
  render();
});
$("#token-forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  $("#token").value = "";
  $("#token-box").hidden = true;
  render();
});
$("#token-toggle").addEventListener("click", () => {
  const box = $("#token-box");
  if (box.hidden) askForToken("asked");
  else box.hidden = true;
});
$("#search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const q = $("#search-q").value.trim();
  navigate(link(["search"], { q }));
});
window.addEventListener("hashchange", render);
render();
