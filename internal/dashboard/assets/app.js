// backflow's built-in dashboard: polls /api/panels/<id> and /api/health and draws each panel as
// SVG (time series, bars) or a table. No library and no build step: this file is served as is
// from the binary. Every panel element carries data-state (loading, ok, empty, error),
// data-points (what it drew) and, for a panel that reads a rollup, data-raw-from (the first
// minute it read from raw rows), and every health card data-status (ok, warn, bad), which the
// browser test reads. Every time on the page is written by fmtUTC, in UTC, in one format; a
// chart's value axis carries the panel's unit.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const PALETTE = ["#3556d8", "#e8710a", "#1a7f37", "#c62828", "#7b3fc4", "#0097a7", "#c2185b", "#827717",
  "#5d4037", "#455a64", "#f9a825", "#2e7d32"];

const state = { layout: null, range: "30m", refresh: 10, timer: null, seq: 0 };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
function fmtNum(v, unit) {
  if (v === null || v === undefined) return "–";
  const abs = Math.abs(v);
  let s;
  if (abs >= 1e9) s = nf.format(v / 1e9) + "G";
  else if (abs >= 1e6) s = nf.format(v / 1e6) + "M";
  else if (abs >= 1e4) s = nf.format(v / 1e3) + "k";
  else s = nf.format(v);
  return unit && unit !== "tokens" ? s + " " + unit : s;
}
// fmtUTC writes a Unix time as every time on the page is written: in UTC, "HH:MM" (with
// seconds, "HH:MM:SS") and " UTC", with the ISO date in front unless it is today (UTC). A
// chart's time axis leaves the zone out of all ticks but the last (zone false).
function fmtUTC(unix, seconds, zone = true) {
  const iso = new Date(unix * 1000).toISOString();
  const t = iso.slice(11, seconds ? 19 : 16) + (zone ? " UTC" : "");
  return iso.slice(0, 10) === new Date().toISOString().slice(0, 10) ? t : iso.slice(0, 10) + " " + t;
}
function fmtCell(v, col) {
  if (v === null || v === undefined) return "–";
  if (col.type === "time") return fmtUTC(v, true);
  if (col.type === "number") return nf.format(v);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
function fmtSeconds(s) {
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return nf.format(s / 3600) + " h";
}

// sourceNote says which part of the range a panel read from its rollup and which from raw rows.
function sourceNote(res) {
  const c = res.rollup;
  if (!c.raw_from) return "raw rows only: nothing rolled up yet";
  if (c.raw_from <= res.from) return `raw rows only: rolled up before ${fmtUTC(c.raw_from)}`;
  if (c.raw_from > res.to) return "all from rollups";
  return `rollups before ${fmtUTC(c.raw_from)}, raw rows from then on`;
}

// niceTicks returns about n round values covering [0, max].
function niceTicks(max, n) {
  if (!(max > 0)) return [0, 1];
  const raw = max / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw);
  const ticks = [];
  for (let v = 0; v <= max + step * 0.001; v += step) ticks.push(v);
  if (ticks[ticks.length - 1] < max) ticks.push(ticks[ticks.length - 1] + step);
  return ticks;
}

function drawTimeSeries(body, panel, res) {
  const series = new Map();
  for (const r of res.rows) {
    const name = String(r[1]);
    if (!series.has(name)) series.set(name, []);
    if (r[2] !== null) series.get(name).push([r[0], r[2]]);
  }
  const names = [...series.keys()].sort((a, b) => total(series.get(b)) - total(series.get(a)));
  const x0 = res.from, x1 = res.to;
  let ymax = 0;
  for (const pts of series.values()) for (const [, v] of pts) ymax = Math.max(ymax, v);
  const ticks = niceTicks(ymax, 4), ytop = ticks[ticks.length - 1] || 1;
  // The value axis carries the panel's unit on every tick; the margin fits the widest.
  const ylabels = ticks.map(v => fmtNum(v, panel.unit));
  const W = Math.max(body.clientWidth, 300), H = 210, R = 10, T = 8, B = 22;
  const L = Math.max(40, 12 + 6.5 * Math.max(...ylabels.map(l => l.length)));
  const X = t => L + (W - L - R) * (t - x0) / Math.max(x1 - x0, 1);
  const Y = v => T + (H - T - B) * (1 - v / ytop);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, height: H, role: "img", "aria-label": panel.title });
  ticks.forEach((v, i) => {
    s.append(svg("line", { class: "gridline", x1: L, x2: W - R, y1: Y(v), y2: Y(v) }));
    s.append(svg("text", { class: "ytick", x: L - 6, y: Y(v) + 4, "text-anchor": "end" }, ylabels[i]));
  });
  // The time axis: as many ticks as fit, in UTC like every time on the page, the zone on the last.
  const span = x1 - x0, wide = fmtUTC(x0, false).length > 5 || fmtUTC(x1, false).length > 5;
  const n = Math.max(1, Math.min(5, Math.floor((W - L - R) / ((wide ? 110 : 60) + 16))));
  for (let i = 0; i <= n; i++) {
    const t = x0 + span * i / n;
    s.append(svg("text", { class: "xtick", x: X(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === n ? "end" : "middle" }, fmtUTC(t, false, i === n)));
  }
  s.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: Y(0), y2: Y(0) }));
  let drawn = 0;
  names.forEach((name, i) => {
    const pts = series.get(name).sort((a, b) => a[0] - b[0]);
    const color = PALETTE[i % PALETTE.length];
    // A gap of more than one bucket breaks the line: no traffic is not a straight ramp.
    let d = "", prev = null;
    for (const [t, v] of pts) {
      d += (prev !== null && t - prev <= res.interval_s ? "L" : "M") + X(t).toFixed(1) + "," + Y(v).toFixed(1);
      prev = t;
    }
    const path = svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.6, "data-series": name });
    path.append(svg("title", {}, name));
    s.append(path);
    if (pts.length <= 3) for (const [t, v] of pts) s.append(svg("circle", { cx: X(t), cy: Y(v), r: 3, fill: color }));
    drawn += pts.length;
  });
  body.append(s);
  const legend = el("div", { class: "legend" });
  names.slice(0, 12).forEach((name, i) => {
    const chip = el("i");
    chip.style.background = PALETTE[i % PALETTE.length];
    legend.append(el("span", {}, chip, name));
  });
  if (names.length > 12) legend.append(el("span", { class: "muted" }, `+${names.length - 12} more`));
  body.append(legend);
  return drawn;
}

function total(pts) { return pts.reduce((a, [, v]) => a + v, 0); }

function drawBars(body, panel, res) {
  const rows = res.rows.filter(r => r[1] !== null);
  const W = Math.max(body.clientWidth, 260), rowH = 22, H = rows.length * rowH + 4;
  const labelW = Math.min(140, W * 0.35), valueW = 60;
  const max = Math.max(...rows.map(r => r[1]), 1);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, height: H, role: "img", "aria-label": panel.title });
  rows.forEach((r, i) => {
    const y = i * rowH + 2, w = (W - labelW - valueW - 8) * r[1] / max;
    s.append(svg("text", { class: "barlabel", x: labelW - 6, y: y + 15, "text-anchor": "end" }, String(r[0])));
    const bar = svg("rect", { x: labelW, y: y + 3, width: Math.max(w, 1), height: rowH - 6, rx: 2, fill: PALETTE[i % PALETTE.length] });
    bar.append(svg("title", {}, `${r[0]}: ${nf.format(r[1])}`));
    s.append(bar);
    s.append(svg("text", { x: labelW + Math.max(w, 1) + 4, y: y + 15 }, fmtNum(r[1], panel.unit)));
  });
  body.append(s);
  return rows.length;
}

function drawTable(body, panel, res) {
  const head = el("tr");
  res.columns.forEach(c => head.append(el("th", { class: c.type === "number" ? "num" : "" }, c.name)));
  const tb = el("tbody");
  const ahead = []; // event lags below 0: events dated after the clock
  for (const r of res.rows) {
    const tr = el("tr");
    r.forEach((v, i) => {
      const col = res.columns[i];
      if (col.name === "event_lag_s" && typeof v === "number" && v < 0) {
        ahead.push(`${r[0]} on ${r[1]}`);
        tr.append(el("td", { class: "num ahead", "data-col": col.name, title: `${nf.format(v)} s` }, `ahead of the clock by ${fmtSeconds(-v)}`));
        return;
      }
      tr.append(el("td", { class: col.type === "number" ? "num" : "", "data-col": col.name }, fmtCell(v, col)));
    });
    tb.append(tr);
  }
  body.append(el("div", { class: "tablewrap" }, el("table", {}, el("thead", {}, head), tb)));
  if (ahead.length > 0) {
    body.append(el("div", { class: "note ahead-note" }, `Newest event dated after now (${ahead.join(", ")}): its producer's clock runs ahead of ` +
      "ClickHouse's, or its records carry dates to come (ingest accepts up to 24 h ahead). No lag can be told until the clock passes that date."));
  }
  return res.rows.length;
}

function drawStat(body, panel, res) {
  body.append(el("div", { class: "stat" }, fmtNum(res.rows[0][0], panel.unit)));
  return 1;
}

const drawers = { timeseries: drawTimeSeries, bars: drawBars, table: drawTable, stat: drawStat };

function rangeQuery() { return "range=" + encodeURIComponent(state.range); }

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  const body = await resp.json().catch(() => ({ error: `${resp.status} ${resp.statusText}` }));
  if (!resp.ok) throw new Error(body.error || `${resp.status} ${resp.statusText}`);
  return body;
}

async function loadPanel(node, panel, seq) {
  const body = node.querySelector(".body");
  try {
    const res = await getJSON(`/api/panels/${panel.id}?${rangeQuery()}`);
    if (seq !== state.seq) return; // a newer refresh is under way
    body.replaceChildren();
    let points = 0;
    if (res.rows.length > 0) points = drawers[panel.kind](body, panel, res);
    if (points === 0) body.replaceChildren(el("div", { class: "msg" }, "No data in this range"));
    if (res.truncated) body.append(el("div", { class: "muted" }, "more rows than shown"));
    const note = node.querySelector(".source");
    if (res.rollup) {
      note.textContent = sourceNote(res);
      node.dataset.rawFrom = String(res.rollup.raw_from);
    } else {
      note.textContent = "";
      delete node.dataset.rawFrom;
    }
    node.dataset.points = String(points);
    node.dataset.state = points > 0 ? "ok" : "empty";
  } catch (err) {
    if (seq !== state.seq) return;
    body.replaceChildren(el("div", { class: "msg" }, "Query failed: " + err.message));
    node.dataset.points = "0";
    node.dataset.state = "error";
  }
}

// card is one figure of the health strip; raw is the figure as a plain number ("" if unknown).
function card(cls, k, v, d, id, raw) {
  const c = el("div", { class: "card " + cls, "data-health": id, "data-status": cls, "data-value": raw === null || raw === undefined ? "" : String(raw) },
    el("div", { class: "k" }, k), el("div", { class: "v" }, v));
  if (d) c.append(el("div", { class: "d" }, d));
  return c;
}

async function loadHealth(seq) {
  const strip = document.getElementById("health");
  try {
    const h = await getJSON(`/api/health?${rangeQuery()}`);
    if (seq !== state.seq) return;
    const cards = [];
    for (const g of h.lag) { // the server judges each group (JudgeLag): no member reading is not ok
      const known = g.lag !== null && g.lag !== undefined;
      const members = `${g.state}, ${g.members} member${g.members === 1 ? "" : "s"}`;
      const detail = g.error ? g.error : g.why ? `${members}: ${g.why}` : members;
      cards.push(card(g.status || "warn", "lag · " + g.group, known ? nf.format(g.lag) : "unknown", detail, "lag", known ? g.lag : null));
    }
    const dlqKnown = h.dlq !== null && h.dlq !== undefined;
    cards.push(card(!dlqKnown ? "warn" : h.dlq === 0 ? "ok" : "bad", "dead letters in range",
      dlqKnown ? nf.format(h.dlq) : "unknown", h.dlq_error || "", "dlq", dlqKnown ? h.dlq : null));
    const b = h.breaker, bcls = { closed: "ok", "half-open": "warn", open: "bad" }[b.state] || "warn";
    const bdetail = b.error ? b.error : b.groups.map(g => `${g.group || "(no group)"}: ${g.state}`).join(", ");
    cards.push(card(bcls, "moderation breaker", b.state, bdetail, "breaker", b.state));
    const rs = h.restore;
    if (rs && rs.restoring && rs.restoring.length > 0) { // shown only while a table restore runs
      let done = 0, togo = 0, eta = 0;
      for (const p of rs.restoring) {
        done += p.restored; togo += p.to_go;
        eta = eta < 0 || p.eta_seconds < 0 ? -1 : Math.max(eta, p.eta_seconds);
      }
      const c = card("warn", "table restore", `${fmtNum(done)} of ${fmtNum(done + togo)}`,
        eta < 0 ? "time left unknown" : `about ${fmtSeconds(Math.ceil(eta))} left`, "restore", togo);
      for (const p of rs.restoring) {
        c.append(el("div", { class: "d", "data-restore": `${p.stage}/${p.partition}` },
          `${p.stage} partition ${p.partition}: ${fmtNum(p.restored)} of ${fmtNum(p.restored + p.to_go)} records, ` +
          `${fmtNum(Math.round(p.rate))}/s` + (p.eta_seconds < 0 ? "" : `, about ${fmtSeconds(Math.ceil(p.eta_seconds))} left`)));
      }
      cards.push(c);
    }
    const ru = h.rollups;
    if (ru) {
      const known = ru.lag_s !== null && ru.lag_s !== undefined;
      const rcls = ru.error || !known ? "warn" : ru.lag_s <= 60 ? "ok" : ru.lag_s <= 300 ? "warn" : "bad";
      const value = ru.error ? "unknown" : known ? fmtSeconds(ru.lag_s) : ru.rolled_up_to ? "no events" : "not rolled up";
      const detail = ru.error || [ru.rolled_up_to ? `rolled up to ${fmtUTC(ru.rolled_up_to, true)}` : "nothing rolled up yet",
        ru.newest_event ? `newest event ${fmtUTC(ru.newest_event, true)}` : "no event landed"].join(" · ");
      const c = card(rcls, "rollup lag", value, detail, "rollup", known ? ru.lag_s : null);
      c.title = (ru.sources || []).map(x => `${x.source}: ${x.minute ? "rolled up to " + fmtUTC(x.minute + 60) : "not rolled up"}`).join("\n");
      cards.push(c);
    }
    const a = h.alerts;
    if (a && a.source) { // shown only when prometheus.url is set
      const firing = a.firing || [];
      const acls = a.error ? "warn" : firing.length === 0 ? "ok" : firing.some(x => x.labels.severity === "critical") ? "bad" : "warn";
      const c = card(acls, "alerts firing · Prometheus", a.error ? "unknown" : nf.format(firing.length), a.error || "",
        "alerts", a.error ? null : firing.length);
      for (const x of firing) {
        c.append(el("div", { class: "d alert", "data-alert": x.name, title: x.annotations.runbook || "" },
          `${x.labels.severity || "?"} · ${x.name}: ${x.annotations.summary || ""}`));
      }
      cards.push(c);
    }
    strip.replaceChildren(...cards);
    strip.dataset.state = "ok";
  } catch (err) {
    if (seq !== state.seq) return;
    strip.replaceChildren(card("bad", "health", "unavailable", err.message, "error"));
    strip.dataset.state = "error";
  }
}

async function refresh() {
  const seq = ++state.seq;
  for (const node of document.querySelectorAll(".panel")) node.dataset.state = "loading";
  const panels = state.layout.panels.filter(p => p.section !== "Health");
  await Promise.all([loadHealth(seq), ...panels.map(p => loadPanel(document.getElementById("panel-" + p.id), p, seq))]);
  if (seq === state.seq) {
    document.getElementById("updated").textContent = "updated " + fmtUTC(Date.now() / 1000, true);
    document.body.dataset.refreshed = String(seq);
  }
}

// schedule starts the next automatic refresh state.refresh seconds after the last one ended,
// never while one is under way: on a busy server a round can take longer than the period, and
// a fixed interval would then start each round before the last drew, so nothing ever drew.
function schedule() {
  clearTimeout(state.timer);
  if (state.refresh > 0) state.timer = setTimeout(async () => { await refresh(); schedule(); }, state.refresh * 1000);
}

function saveHash() { location.hash = `range=${state.range}&refresh=${state.refresh}`; }

function build(layout) {
  const main = document.getElementById("sections");
  let grid = null, section = null;
  for (const p of layout.panels) {
    if (p.section === "Health") continue;
    if (p.section !== section) {
      section = p.section;
      grid = el("div", { class: "grid" });
      main.append(el("h2", {}, section), grid);
    }
    const node = el("div", { class: "panel", id: "panel-" + p.id, "data-panel": p.id, "data-kind": p.kind, "data-state": "loading" },
      el("h3", {}, p.title), el("div", { class: "help" }, p.help), el("div", { class: "body" }, el("div", { class: "msg" }, "loading…")),
      el("div", { class: "source" }));
    node.style.gridColumn = `span ${p.width}`;
    node.title = p.sql;
    grid.append(node);
  }
}

async function main() {
  const layout = await getJSON("/api/panels");
  state.layout = layout;
  const params = new URLSearchParams(location.hash.slice(1));
  state.range = params.get("range") || (layout.range_s % 3600 === 0 ? layout.range_s / 3600 + "h" : layout.range_s / 60 + "m");
  state.refresh = params.has("refresh") ? Number(params.get("refresh")) : layout.refresh_s;
  const rangeSel = document.getElementById("range"), refreshSel = document.getElementById("refresh");
  if (![...rangeSel.options].some(o => o.value === state.range)) rangeSel.append(el("option", { value: state.range }, "last " + state.range));
  if (![...refreshSel.options].some(o => Number(o.value) === state.refresh)) refreshSel.append(el("option", { value: state.refresh }, state.refresh + " s"));
  rangeSel.value = state.range;
  refreshSel.value = String(state.refresh);
  rangeSel.onchange = () => { state.range = rangeSel.value; saveHash(); refresh(); };
  refreshSel.onchange = () => { state.refresh = Number(refreshSel.value); saveHash(); schedule(); };
  document.getElementById("now").onclick = refresh;
  build(layout);
  await refresh();
  schedule();
}

main().catch(err => {
  document.getElementById("sections").replaceChildren(el("div", { class: "panel", "data-state": "error" }, "Could not load the dashboard: " + err.message));
});
