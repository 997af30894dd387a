// fmt.js: figures in human units, from base units (seconds, bit/s, ratios).
export function seconds(s) {
  if (s === null || s === undefined) return "-";
  if (s < 1e-3) return (s * 1e6).toPrecision(3) + " µs";
  if (s < 1) return (s * 1e3).toPrecision(3) + " ms";
  return s.toPrecision(3) + " s";
}

export function bps(v) {
  if (v === null || v === undefined) return "-";
  const units = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
  let i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return v.toPrecision(3) + " " + units[i];
}

export function figure(v, unit) {
  return unit === "bit/s" ? bps(v) : seconds(v);
}

export function percent(r) {
  if (r === null || r === undefined) return "-";
  const p = r * 100;
  return (p === 0 ? "0" : p < 0.1 ? p.toPrecision(2) : p.toFixed(1)) + " %";
}

export function time(unix) {
  return new Date(unix * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
