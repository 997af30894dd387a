// pair.js: the Pair page: one node pair's continuous probes over a range,
// an SVG chart per figure drawn here (RTT median line and p90 band, loss
// below), one series per path, pod-pod beside its host-host baseline;
// then the pair's on-demand results.
import { api, el, svg, ready, replace, poll } from "./app.js";
import { seconds, percent, figure, time } from "./fmt.js";

const colors = { "host-host": "#1f5fa8", "pod-pod": "#c2501a", "host-pod": "#2e8540", "host-service": "#7a3fa0", "pod-service": "#8a6d00" };
const W = 900, H = 260, LH = 110, L = 70, R = 20, T = 14, B = 28;

function axisX(g, x0, x1, y, start, end) {
  g.append(svg("line", { x1: x0, x2: x1, y1: y, y2: y, class: "axis" }));
  for (let k = 0; k <= 4; k++) {
    const t = start + ((end - start) * k) / 4;
    const x = x0 + ((x1 - x0) * k) / 4;
    g.append(svg("text", { x, y: y + 16, "text-anchor": "middle", class: "tick" }, time(t).slice(5, 16)));
  }
}

function chart(d) {
  const s = svg("svg", { id: "pair-chart", class: "chart", viewBox: "0 0 " + W + " " + (H + LH + 20), width: W, height: H + LH + 20, role: "img",
    "aria-label": "RTT and loss of " + d.src + " → " + d.dst });
  let max = 0;
  for (const se of d.series) for (const v of se.p90) if (v !== null && v > max) max = v;
  for (const se of d.series) for (const v of se.median) if (v !== null && v > max) max = v;
  if (max <= 0) max = 1e-3;
  const sx = (t) => L + ((t - d.start) / (d.end - d.start)) * (W - L - R);
  const sy = (v) => T + (1 - v / max) * (H - T - B);
  const ly0 = H + 10, ly1 = H + LH - B + 10;
  const sl = (v) => ly1 - v * (ly1 - ly0);
  // axes
  s.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    s.append(svg("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end", class: "tick" }, seconds(v)));
    s.append(svg("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "grid" }));
  }
  axisX(s, L, W - R, H - B, d.start, d.end);
  s.append(svg("text", { x: 4, y: T + 4, class: "label" }, "RTT"));
  s.append(svg("line", { x1: L, x2: L, y1: ly0, y2: ly1, class: "axis" }));
  s.append(svg("text", { x: L - 6, y: ly0 + 4, "text-anchor": "end", class: "tick" }, "100 %"));
  s.append(svg("text", { x: L - 6, y: ly1 + 4, "text-anchor": "end", class: "tick" }, "0 %"));
  s.append(svg("text", { x: 4, y: ly0 + 4, class: "label" }, "loss"));
  axisX(s, L, W - R, ly1, d.start, d.end);
  for (const se of d.series) {
    const c = colors[se.path] || "#444";
    const g = svg("g", { class: "series", "data-path": se.path, stroke: c, fill: c });
    // the p90 band: from the median up to the p90, per run of points
    const up = [], down = [];
    let line = "";
    let lossLine = "";
    se.t.forEach((t, i) => {
      const m = se.median[i], p = se.p90[i];
      if (m !== null) {
        line += (line ? " L" : "M") + sx(t).toFixed(1) + " " + sy(m).toFixed(1);
        up.push(sx(t).toFixed(1) + "," + sy(p !== null ? p : m).toFixed(1));
        down.unshift(sx(t).toFixed(1) + "," + sy(m).toFixed(1));
      }
      if (se.loss[i] !== null) lossLine += (lossLine ? " L" : "M") + sx(t).toFixed(1) + " " + sl(se.loss[i]).toFixed(1);
    });
    if (up.length) g.append(svg("polygon", { class: "band", points: up.concat(down).join(" "), "fill-opacity": "0.18", stroke: "none" }));
    if (line) g.append(svg("path", { class: "median", d: line, fill: "none", "stroke-width": 1.5 }));
    if (lossLine) g.append(svg("path", { class: "loss", d: lossLine, fill: "none", "stroke-width": 1 }));
    se.t.forEach((t, i) => {
      const m = se.median[i];
      const y = m !== null ? sy(m) : sl(se.loss[i] || 0);
      const pt = svg("circle", { class: "point", cx: sx(t).toFixed(1), cy: y.toFixed(1), r: 1.6, "data-t": t, "data-path": se.path, stroke: "none" },
        svg("title", {}, se.path + " " + time(t) + ": median " + seconds(m) + ", p90 " + seconds(se.p90[i]) + ", loss " + percent(se.loss[i]) + ", " + se.sent[i] + " probes" + (se.rollup[i] ? " (hourly rollups)" : "")));
      g.append(pt);
    });
    s.append(g);
  }
  return s;
}

function legend(d) {
  const ul = el("ul", { class: "chart-legend" });
  for (const se of d.series) {
    const sw = el("span", { class: "swatch path-" + se.path });
    ul.append(el("li", {}, sw, " " + se.path + (se.path === "host-host" ? " (baseline)" : "")));
  }
  ul.append(el("li", {}, "line: median RTT; band: median to p90; lower chart: loss"));
  return ul;
}

export async function renderPair(params) {
  const src = params.get("src") || "", dst = params.get("dst") || "";
  const range = params.get("range") || "24h";
  poll(async () => {
    const d = await api("pair?" + new URLSearchParams({ src, dst, range }).toString());
    const sel = el("select", { id: "range" }, ...["1h", "24h", "7d", "30d"].map((r) => el("option", { value: r, selected: r === d.range }, r)));
    sel.addEventListener("change", () => {
      location.href = "/pair?" + new URLSearchParams({ src, dst, range: sel.value }).toString();
    });
    const od = el("ul", { id: "ondemand" });
    for (const r of d.ondemand) {
      od.append(el("li", { "data-run": r.run_id },
        r.time + " ", el("a", { href: "/runs/" + encodeURIComponent(r.run_id) }, r.run_id), " " + r.test + " " + r.path + ": " + (r.value === null ? r.status : figure(r.value, r.unit))));
    }
    const reverse = el("a", { href: "/pair?" + new URLSearchParams({ src: dst, dst: src, range: d.range }).toString() }, "reverse direction");
    replace(el("h1", {}, "Pair " + d.src + " → " + d.dst),
      el("div", { class: "controls" }, el("label", {}, "Range ", sel), " ", reverse, " ", el("a", { href: "/mesh" }, "back to the mesh")),
      el("p", { class: "about" }, "Continuous " + d.kind + " probes, one point per " + d.step_seconds + " s" + (d.series.length ? "" : ": no data in this range")),
      chart(d), legend(d),
      el("h2", {}, "On-demand results"), od);
    ready();
    return d.refresh_seconds;
  }, 10);
}
