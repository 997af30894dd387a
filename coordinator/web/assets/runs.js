// runs.js: the Runs pages: the list, one run (live progress while it
// runs, then its report: matrices, overhead against host-host, summary,
// findings and a chart of the overheads) and two runs compared.
import { api, el, svg, ready, replace, poll } from "./app.js";
import { figure, percent } from "./fmt.js";

function runLink(id) {
  return el("a", { href: "/runs/" + encodeURIComponent(id) }, id);
}

export async function renderRuns(params) {
  const picked = new Set();
  const token = params.get("page_token") || "";
  poll(async () => {
    const d = await api("runs" + (token ? "?page_token=" + encodeURIComponent(token) : ""));
    const t = el("table", { id: "runs", class: "list" },
      el("thead", {}, el("tr", {}, ...["", "Run", "Label", "State", "Done", "Tests", "Paths", "Created", "Ended"].map((h) => el("th", { scope: "col" }, h)))));
    const body = el("tbody");
    const btn = el("button", { type: "button", id: "compare-picked", disabled: picked.size !== 2 }, "Compare the two checked runs");
    btn.addEventListener("click", () => {
      const [a, b] = [...picked];
      location.href = "/compare?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b);
    });
    for (const r of d.runs) {
      const box = el("input", { type: "checkbox", "aria-label": "pick run " + r.id, checked: picked.has(r.id) });
      box.addEventListener("change", () => {
        if (box.checked) picked.add(r.id); else picked.delete(r.id);
        btn.disabled = picked.size !== 2;
      });
      body.append(el("tr", { "data-run": r.id, "data-state": r.state },
        el("td", {}, box), el("td", {}, runLink(r.id)), el("td", {}, r.label), el("td", {}, r.state),
        el("td", {}, r.done + "/" + r.total + (r.failed ? " (" + r.failed + " failed)" : "")),
        el("td", {}, r.tests), el("td", {}, r.paths), el("td", {}, r.created), el("td", {}, r.ended)));
    }
    t.append(body);
    const older = d.next_page_token ? el("a", { id: "older", href: "/runs?page_token=" + encodeURIComponent(d.next_page_token) }, "Older runs") : null;
    replace(el("h1", {}, "Runs"), el("div", { class: "controls" }, btn, token ? el("a", { href: "/runs" }, "Newest runs") : null, older), el("div", { class: "scroll" }, t));
    ready();
    return d.refresh_seconds;
  }, 10);
}

function matrix(m) {
  const n = m.nodes.length;
  const t = el("table", { class: "matrix", "data-test": m.test, "data-path": m.path });
  t.append(el("caption", {}, m.title + " (median of each pair)"));
  t.append(el("tr", {}, el("th", {}, "src \\ dst"), ...m.nodes.map((d) => el("th", { scope: "col" }, d))));
  for (let i = 0; i < n; i++) {
    const tr = el("tr", {}, el("th", { scope: "row" }, m.nodes[i]));
    for (let j = 0; j < n; j++) {
      const at = i * n + j;
      if (i === j) { tr.append(el("td", { class: "self" })); continue; }
      let text = m.value[at] === null ? (m.failed[at] ? "failed" : "-") : figure(m.value[at], m.unit);
      if (m.value[at] !== null && m.failed[at]) text += " (" + m.failed[at] + " failed)";
      tr.append(el("td", { class: m.value[at] === null && m.failed[at] ? "bad" : "" }, text));
    }
    t.append(tr);
  }
  return t;
}

// overheadChart draws each overhead ratio as a bar against 1 (host-host).
function overheadChart(ovs) {
  if (!ovs.length) return null;
  const w = 640, row = 22, h = ovs.length * row + 30, x0 = 220;
  const max = Math.max(2, ...ovs.map((o) => o.ratio || 0));
  const sx = (v) => x0 + (v / max) * (w - x0 - 20);
  const g = svg("svg", { id: "overhead-chart", class: "chart", viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img", "aria-label": "overhead against host-host" });
  ovs.forEach((o, i) => {
    const y = 10 + i * row;
    g.append(svg("text", { x: x0 - 6, y: y + 14, "text-anchor": "end" }, o.path + " " + o.test));
    g.append(svg("rect", { x: x0, y: y + 2, width: Math.max(1, sx(o.ratio || 0) - x0), height: row - 6, class: "bar" },
      svg("title", {}, o.path + " " + o.test + ": " + o.words)));
  });
  g.append(svg("line", { x1: sx(1), x2: sx(1), y1: 0, y2: h - 20, class: "ref" }));
  g.append(svg("text", { x: sx(1), y: h - 6, "text-anchor": "middle" }, "host-host = 1"));
  return g;
}

export async function renderRun(_params, id) {
  let stop = null;
  stop = poll(async () => {
    const d = await api("runs/" + encodeURIComponent(id));
    const r = d.run;
    const running = r.state === "queued" || r.state === "running";
    const pct = r.total ? Math.round((100 * r.done) / r.total) : 0;
    const progress = el("section", { id: "progress", "data-state": r.state },
      el("h2", {}, "Progress"),
      el("p", {}, "State ", el("strong", { class: "state" }, r.state), ": ", el("span", { class: "done" }, r.done + "/" + r.total), " tests done" + (r.failed ? ", " + r.failed + " failed" : "") + (r.message ? " — " + r.message : "")),
      el("progress", { max: r.total || 1, value: r.done }, pct + " %"));
    const rep = el("section", { id: "report" }, el("h2", {}, "Report"));
    for (const m of d.matrices) rep.append(el("div", { class: "scroll" }, matrix(m)));
    if (d.overheads.length) {
      const ot = el("table", { class: "list overheads" }, el("caption", {}, "Against host-host on the same node pairs (median over pairs of median(path)/median(host-host))"),
        el("tr", {}, ...["Path", "Test", "Change", "Pairs"].map((h) => el("th", { scope: "col" }, h))));
      for (const o of d.overheads) ot.append(el("tr", {}, el("td", {}, o.path), el("td", {}, o.test), el("td", {}, o.words), el("td", {}, o.pairs)));
      rep.append(ot);
      const c = overheadChart(d.overheads);
      if (c) rep.append(c);
    }
    if (d.summary.length) rep.append(el("h3", {}, "Summary"), el("ul", { class: "summary" }, ...d.summary.map((s) => el("li", {}, s))));
    rep.append(el("h3", {}, "Diagnosis"), el("p", { class: "diagnosis" }, d.diagnosis));
    replace(el("h1", {}, "Run ", r.id, r.label ? " [" + r.label + "]" : ""), progress, rep);
    ready();
    if (!running && stop) stop();
    return running ? Math.min(5, d.refresh_seconds) : 3600;
  }, 2);
}

export async function renderCompare(params) {
  const a = params.get("a") || "", b = params.get("b") || "";
  const d = await api("compare?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b));
  const t = el("table", { class: "list" },
    el("thead", {}, el("tr", {}, ...["Test", "Path", "Src", "Dst", "A median", "B median", "Change", "p", "Verdict"].map((h) => el("th", { scope: "col" }, h)))));
  const body = el("tbody");
  for (const c of d.cells) {
    body.append(el("tr", { "data-verdict": c.verdict },
      el("td", {}, c.test), el("td", {}, c.path), el("td", {}, c.src), el("td", {}, c.dst),
      el("td", {}, figure(c.a, c.unit)), el("td", {}, figure(c.b, c.unit)),
      el("td", {}, c.change === null ? "-" : (c.change >= 0 ? "+" : "") + (100 * c.change).toFixed(1) + " %"),
      el("td", {}, c.p === null ? "-" : c.p.toPrecision(3)), el("td", { class: "verdict-" + c.verdict.replace(" ", "-") }, c.verdict)));
  }
  t.append(body);
  replace(el("h1", {}, "Compare"),
    el("section", { id: "compare" },
      el("p", {}, "A: ", runLink(d.a.id), " " + d.a.label + "  B: ", runLink(d.b.id), " " + d.b.label),
      el("p", {}, d.cells.length + " cells: " + d.worse + " significantly worse, " + d.better + " significantly better (Welch's t-test, 95 %)"),
      el("div", { class: "scroll" }, t)));
  ready();
}

export { percent };
