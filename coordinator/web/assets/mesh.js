// mesh.js: the Mesh page: diagnose's findings, then a node x node matrix
// of one test and path of the continuous probes' newest period (tests
// probe_icmp, probe_tcp, ...) or of the newest continuous run, coloured by state
// and shaded by the ratio to the host-host baseline of the same pair,
// re-fetched at the report interval. The matrix is one tab stop: arrow
// keys move between cells (roving tabindex), Enter opens the pair page.
import { api, el, ready, replace, poll } from "./app.js";
import { figure, percent } from "./fmt.js";

const stateNames = { o: "ok", d: "degraded", f: "fail", n: "none", s: "self" };

// shade is 0..3 by how much worse than its reference a figure is.
function shade(v, ref, higher) {
  if (v === null || ref === null || ref <= 0 || v <= 0) return 0;
  const r = higher ? ref / v : v / ref;
  if (r < 1.2) return 0;
  if (r < 1.5) return 1;
  if (r < 2) return 2;
  return 3;
}

function legend(m) {
  const item = (state, words) => el("li", {}, el("span", { class: "swatch", "data-state": state }), " " + words);
  const ref = m.path === m.baseline ? "the matrix's median" : m.baseline + " of the same pair";
  return el("div", { id: "legend" },
    el("ul", {},
      item("ok", "ok"),
      item("degraded", "degraded: loss, some failures, or over " + m.degraded_ratio + "× " + ref +
        (m.unit === "s" ? " and " + figure(m.degraded_floor_seconds, "s") + " slower" : "")),
      item("fail", "failed: no measurement"),
      item("none", "no result yet")),
    el("p", { class: "note" }, "Darker: further from " + ref + " (1.2×, 1.5×, 2×). Hover a cell for its figures; Enter or click opens the pair."));
}

function findings(list) {
  const ul = el("ul", { id: "findings" });
  for (const f of list || []) {
    const who = f.node ? f.node : "target " + f.target;
    ul.append(el("li", { "data-node": f.node || "", "data-kind": f.kind }, who + ": " + f.kind + " (" + (f.bad || []).length + " of " + f.of + " bad)"));
  }
  if (!ul.children.length) return el("div", {}, ul, el("p", { class: "note" }, "No fault localised."));
  return ul;
}

function select(id, label, options, value, onChange) {
  const s = el("select", { id });
  for (const o of options) s.append(el("option", { value: o, selected: o === value }, o));
  s.addEventListener("change", () => onChange(s.value));
  return el("label", {}, label + " ", s);
}

let focusAt = null; // [row, col] of the roving tab stop, kept across updates

function table(m) {
  const n = m.nodes.length;
  const t = el("table", { id: "mesh", class: n > 80 ? "mesh big" : n <= 30 ? "mesh small" : "mesh", "aria-label": m.test + " " + m.path + " source by destination" });
  const head = el("tr", {}, el("th", { class: "corner" }, "src \\ dst"));
  for (const d of m.nodes) head.append(el("th", { class: "col", scope: "col", title: d }, el("span", {}, d)));
  t.append(el("thead", {}, head));
  const body = el("tbody");
  if (!focusAt || focusAt[0] >= n || focusAt[1] >= n) focusAt = n > 1 ? [0, 1] : null;
  const baseName = m.path === m.baseline ? "median" : m.baseline;
  for (let i = 0; i < n; i++) {
    const src = m.nodes[i];
    const tr = el("tr", { "data-node": src }, el("th", { scope: "row", title: src }, src));
    for (let j = 0; j < n; j++) {
      const at = i * n + j;
      const st = stateNames[m.state[at]] || "none";
      if (st === "self") {
        tr.append(el("td", { class: "self" }));
        continue;
      }
      const dst = m.nodes[j];
      const v = m.value[at];
      const ref = m.path === m.baseline ? m.median : m.base[at];
      let title = src + " → " + dst + ": ";
      if (st === "none") title += "no result yet";
      else if (st === "fail" && v === null) title += "failed";
      else title += (m.unit === "s" ? "RTT " : "throughput ") + figure(v, m.unit) + " (" + baseName + " " + figure(ref, m.unit) + ")";
      if (m.loss[at] !== null) title += ", loss " + percent(m.loss[at]);
      if (st === "degraded") title += ", degraded";
      const focused = focusAt && focusAt[0] === i && focusAt[1] === j;
      // 90,000 cells at 300 nodes: set the attributes directly.
      const td = document.createElement("td");
      td.className = "cell s" + shade(v, ref, m.higher_is_better);
      td.dataset.src = src;
      td.dataset.dst = dst;
      td.dataset.state = st;
      td.dataset.i = i;
      td.dataset.j = j;
      td.title = title;
      td.tabIndex = focused ? 0 : -1;
      tr.append(td);
    }
    body.append(tr);
  }
  t.append(body);
  const cellAt = (i, j) => t.querySelector('td.cell[data-i="' + i + '"][data-j="' + j + '"]');
  const open = (td) => {
    location.href = "/pair?src=" + encodeURIComponent(td.dataset.src) + "&dst=" + encodeURIComponent(td.dataset.dst);
  };
  t.addEventListener("click", (ev) => {
    const td = ev.target.closest("td.cell");
    if (td) open(td);
  });
  t.addEventListener("keydown", (ev) => {
    const td = ev.target.closest("td.cell");
    if (!td) return;
    let i = +td.dataset.i, j = +td.dataset.j;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -n], End: [0, n] };
    if (ev.key === "Enter") { ev.preventDefault(); open(td); return; }
    const mv = moves[ev.key];
    if (!mv) return;
    ev.preventDefault();
    let ni = Math.min(n - 1, Math.max(0, i + mv[0])), nj = Math.min(n - 1, Math.max(0, j + mv[1]));
    if (ni === nj) { // skip the self cell
      const di = mv[0], dj = mv[1];
      ni = Math.min(n - 1, Math.max(0, ni + Math.sign(di)));
      nj = Math.min(n - 1, Math.max(0, nj + Math.sign(dj)));
      if (ni === nj) return;
    }
    const next = cellAt(ni, nj);
    if (!next) return;
    td.setAttribute("tabindex", "-1");
    next.setAttribute("tabindex", "0");
    next.focus();
    focusAt = [ni, nj];
  });
  return t;
}

export async function renderMesh(params) {
  // The test and path chosen (the URL's): none means the default view,
  // asked for again at every poll (the probes' newest period, or the
  // newest run while there is none), never pinned to the first answer.
  const test = params.get("test") || "", path = params.get("path") || "";
  const go = (t, p) => {
    const q = new URLSearchParams();
    if (t) q.set("test", t);
    if (p) q.set("path", p);
    location.href = "/mesh?" + q.toString();
  };
  let shown = ""; // the run, test and path on screen: an ended run does not change
  poll(async () => {
    const q = new URLSearchParams();
    if (test) q.set("test", test);
    if (path) q.set("path", path);
    const m = await api("mesh?" + q.toString());
    const key = m.run_id + "|" + m.test + "|" + m.path;
    if (key === shown && m.run_id) {
      ready();
      return m.refresh_seconds;
    }
    shown = key;
    const hadFocus = document.activeElement && document.activeElement.matches && document.activeElement.matches("td.cell");
    const controls = el("div", { class: "controls" },
      select("test", "Test", m.tests.length ? m.tests : [m.test || ""], m.test, (v) => go(v, m.path)),
      select("path", "Path", m.paths.length ? m.paths : [m.path || ""], m.path, (v) => go(m.test, v)));
    const nodes = m.total_nodes > m.nodes.length ? "the " + m.nodes.length + " of " + m.total_nodes + " nodes with the most bad pairs"
      : m.nodes.length + " nodes";
    const about = !m.run_id && m.label === "continuous probes"
      ? el("p", { class: "about" }, "Continuous probes" + (m.end_time ? ", newest period ended " + m.end_time : ", no report yet") +
        "; " + nodes + "; updated every " + m.refresh_seconds + " s")
      : m.run_id
      ? el("p", { class: "about" }, "Run ", el("a", { href: "/runs/" + encodeURIComponent(m.run_id) }, m.run_id),
        " " + (m.label || "") + (m.end_time ? ", ended " + m.end_time : "") + (m.params ? ", " + m.params : "") + "; " + nodes + "; updated every " + m.refresh_seconds + " s")
      : el("p", { class: "about" }, "No ended run yet.");
    replace(el("h1", {}, "Mesh"), el("section", {}, el("h2", {}, "Findings"), findings(m.findings)), controls, about, legend(m),
      el("div", { class: "scroll" }, table(m)));
    if (hadFocus) {
      const f = document.querySelector('#mesh td.cell[tabindex="0"]');
      if (f) f.focus();
    }
    ready();
    return m.refresh_seconds;
  }, 10);
}
