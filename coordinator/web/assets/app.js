// app.js: the router, the API client (with the token kept in
// sessionStorage) and the DOM helpers every page uses. Every value from
// the data goes into the page as text (textContent, text nodes or
// attributes), never as HTML.
import { renderMesh } from "./mesh.js";
import { renderPair } from "./pair.js";
import { renderRuns, renderRun, renderCompare } from "./runs.js";
import { renderAgents } from "./agents.js";

const tokenKey = "meshperf-token";

// el builds an element: attrs are set as attributes (class, href, data-*,
// title, ...); children are nodes or strings (added as text).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// svg builds an SVG element the same way.
export function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function showError(msg) {
  const e = document.getElementById("error");
  e.textContent = msg;
  e.hidden = false;
}

function clearError() {
  const e = document.getElementById("error");
  e.textContent = "";
  e.hidden = true;
}

// askToken shows the token form and resolves once it is submitted.
function askToken() {
  return new Promise((resolve) => {
    const form = document.getElementById("token-form");
    const input = document.getElementById("token");
    form.hidden = false;
    input.focus();
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(tokenKey, input.value.trim());
      input.value = "";
      form.hidden = true;
      resolve();
    }, { once: true });
  });
}

// api GETs /api/v1/PATH and returns its JSON; on 401 it asks for the token
// and tries again; other errors throw with the API's message.
export async function api(path) {
  for (;;) {
    const headers = {};
    const tok = sessionStorage.getItem(tokenKey);
    if (tok) headers["Authorization"] = "Bearer " + tok;
    const resp = await fetch("/api/v1/" + path, { headers, cache: "no-store" });
    let body = null;
    try { body = await resp.json(); } catch (_) { body = null; }
    if (resp.status === 401) {
      showError((body && body.error) || "API token required");
      await askToken();
      clearError();
      continue;
    }
    if (!resp.ok) throw new Error((body && body.error) || ("HTTP " + resp.status));
    return body;
  }
}

// ready marks the page as rendered (again).
export function ready() {
  document.body.setAttribute("data-ready", "1");
}

// replace puts nodes in #main in place of what was there.
export function replace(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

// poll calls fn now and then every seconds (at least 2), until the page
// is left; errors show in #error and polling goes on.
export function poll(fn, seconds) {
  let timer = null, stopped = false;
  let period = Math.max(2, seconds || 10);
  const tick = async () => {
    try {
      const next = await fn();
      clearError();
      if (typeof next === "number" && next > 0) period = Math.max(2, next);
    } catch (err) {
      showError(String(err.message || err));
    }
    if (!stopped) timer = setTimeout(tick, period * 1000); // fn may have stopped it
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

const routes = [
  [/^\/mesh$/, renderMesh],
  [/^\/pair$/, renderPair],
  [/^\/runs$/, renderRuns],
  [/^\/runs\/([^/]+)$/, renderRun],
  [/^\/compare$/, renderCompare],
  [/^\/agents$/, renderAgents],
];

function route() {
  const path = location.pathname;
  for (const a of document.querySelectorAll("#nav a")) {
    const href = a.getAttribute("href");
    if (path === href || path.startsWith(href + "/") || (href === "/mesh" && path === "/pair")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  for (const [re, render] of routes) {
    const m = path.match(re);
    if (m) {
      // A malformed %-escape in the path throws in decodeURIComponent:
      // shown as an error like any other.
      Promise.resolve().then(() => render(new URLSearchParams(location.search), ...m.slice(1).map(decodeURIComponent)))
        .catch((err) => showError(String(err.message || err)));
      return;
    }
  }
  showError("no page at " + path);
}

route();
