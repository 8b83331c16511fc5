// The Fuyao hub web view: polls the hub's REST API (the endpoints fuyaoctl uses) and draws
// clusters, capacity bars, the N-1 verdict, queues, placements, pending reasons and history.
// No framework, no build step. The bearer token lives in sessionStorage only.
"use strict";

const API = "/api/v1";
const TOKEN_KEY = "fuyao.token";
const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(500, Number(params.get("refresh") || 3000));
const RECENT = 12;

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

async function get(path) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const res = await fetch(API + path, { headers, cache: "no-store" });
  if (!res.ok) {
    let message = res.status + " " + res.statusText;
    try { message = (await res.json()).error.message || message; } catch (e) { /* keep */ }
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return res.json();
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "testid") node.dataset.testid = v; else if (k === "cls") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function num(x) {
  return Math.abs(x - Math.round(x)) < 1e-9 ? String(Math.round(x))
    : x.toFixed(2).replace(/0+$/, "").replace(/\.$/, "");
}

function ago(iso) {
  if (!iso) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  return Math.round(s / 3600) + "h ago";
}

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
}

function bar(row) {
  const total = row.devices_total || 0;
  const box = el("div", { cls: "bar", title: `${num(row.devices_allocated)} allocated, ` +
    `${num(row.devices_reserved)} headroom, ${num(row.devices_free)} free of ${total}` });
  if (!total) return box;
  const parts = [["alloc", row.devices_allocated], ["rsvd", row.devices_reserved],
    ["free", Math.max(0, row.devices_free - row.devices_fragmented)],
    ["frag", Math.min(row.devices_free, row.devices_fragmented)]];
  for (const [cls, value] of parts) {
    const seg = el("span", { cls: "seg " + cls });
    seg.style.width = (100 * value / total).toFixed(2) + "%";
    box.append(seg);
  }
  return box;
}

function drawClusters(clusters) {
  fill("clusters", clusters.map((c) => el("tr", { testid: "cluster-" + c.name },
    el("td", {}, c.name),
    el("td", { testid: `cluster-${c.name}-state`, cls: "state " + c.state.toLowerCase() },
      c.cordoned && c.state !== "Cordoned" ? c.state + " (cordoned)" : c.state),
    el("td", {}, ago(c.last_heartbeat)), el("td", {}, c.nodes),
    el("td", {}, Object.entries(c.gpus).map(([m, n]) => n + "x" + m).join(", ")),
    el("td", { testid: `cluster-${c.name}-tasks` }, c.tasks),
    el("td", {}, Math.round(c.headroom * 100) + "%"))));
}

function drawCapacity(report) {
  const cells = (r, prefix) => [
    el("td", { testid: prefix + "-alloc" }, num(r.devices_allocated)),
    el("td", { testid: prefix + "-rsvd" }, num(r.devices_reserved)),
    el("td", { testid: prefix + "-free" }, num(r.devices_free)),
    el("td", { testid: prefix + "-frag" }, num(r.devices_fragmented)),
    el("td", { testid: prefix + "-queued" }, num(r.queued_devices))];
  fill("capacity", report.rows.filter((r) => r.model !== "none" || !r.devices_total)
    .map((r) => {
      const id = `cap-${r.group}-${r.model}`;
      return el("tr", { testid: id }, el("td", {}, r.group), el("td", {}, r.model),
        el("td", { cls: "bar-col" }, bar(r), el("small", { testid: id + "-total" },
          num(r.devices_total))), ...cells(r, id));
    }));
  fill("fleet", report.fleet.map((r) => el("tr", { testid: "fleet-" + r.model },
    el("td", {}, r.model), el("td", { testid: `fleet-${r.model}-total` }, num(r.devices_total)),
    ...cells(r, "fleet-" + r.model))));
}

function drawN1(verdict) {
  const p = document.getElementById("n1");
  p.textContent = verdict.safe ? "Safe: the fleet can lose any one cluster."
    : "NOT safe: losing " + Object.entries(verdict.clusters).filter(([, l]) => !l.safe)
      .map(([n]) => n).join(", ") + " would strand tasks.";
  p.className = verdict.safe ? "ok" : "bad";
  p.dataset.safe = String(verdict.safe);
  fill("n1-table", Object.entries(verdict.clusters).map(([name, loss]) =>
    el("tr", { testid: "n1-" + name }, el("td", {}, name),
      el("td", { testid: `n1-${name}-safe`, cls: loss.safe ? "ok" : "bad" },
        loss.safe ? "yes" : "NO"),
      el("td", {}, loss.tasks),
      el("td", {}, Object.entries(loss.short).map(([k, v]) => k + "=" + num(v)).join(", ")),
      el("td", {}, Math.round(loss.headroom_needed * 100) + "%"))));
}

function drawTasks(queued, placed, running) {
  const queues = {};
  for (const [list, key] of [[queued, "q"], [placed, "p"], [running, "r"]]) {
    for (const t of list) {
      queues[t.queue] = queues[t.queue] || { q: 0, p: 0, r: 0 };
      queues[t.queue][key] += 1;
    }
  }
  fill("queues", Object.keys(queues).sort().map((q) => el("tr", { testid: "queue-" + q },
    el("td", {}, q), el("td", { testid: `queue-${q}-queued` }, queues[q].q),
    el("td", {}, queues[q].p), el("td", {}, queues[q].r))));
  const recent = placed.concat(running)
    .sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at)).slice(0, RECENT);
  fill("placements", recent.map((t) => el("tr", { testid: "placed-" + t.name },
    el("td", {}, t.name), el("td", {}, t.state), el("td", {}, t.cluster || "-"),
    el("td", {}, t.node || "-"),
    el("td", {}, Number(t.spec.gpu) ? t.spec.gpu + " " + (t.spec.gpu_model || "") : ""),
    el("td", {}, ago(t.updated_at)))));
  fill("pending", queued.slice(0, 50).map((t) => el("tr", { testid: "pending-" + t.name },
    el("td", {}, t.name), el("td", {}, t.queue), el("td", {}, ago(t.created_at)),
    el("td", { cls: "why" }, t.message || Object.entries(t.reasons)
      .map(([c, r]) => c + ": " + r).join("; ") || "waiting for a placement cycle"))));
}

function drawHistory(points) {
  const box = document.getElementById("history");
  const series = {};
  for (const p of points) {
    if (!p.devices_total) continue;
    const s = series[p.model] = series[p.model] || {};
    const at = Date.parse(p.at);
    s[at] = s[at] || { alloc: 0, total: 0 };
    s[at].alloc += p.devices_allocated;
    s[at].total += p.devices_total;
  }
  const models = Object.keys(series).sort();
  if (!models.length) { box.replaceChildren(el("p", {}, "No samples yet.")); return; }
  const W = 640, H = 160, NS = "http://www.w3.org/2000/svg";
  const times = points.map((p) => Date.parse(p.at));
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1);
  const top = Math.max(1, ...models.flatMap((m) => Object.values(series[m]).map((v) => v.total)));
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H + 20}`);
  svg.setAttribute("class", "chart");
  const legend = el("div", { cls: "chart-legend" });
  models.forEach((model, i) => {
    const pts = Object.entries(series[model]).sort((a, b) => a[0] - b[0])
      .map(([t, v]) => `${((t - t0) / (t1 - t0) * W).toFixed(1)},` +
        `${(H - v.alloc / top * H).toFixed(1)}`);
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("class", "line c" + (i % 6));
    line.dataset.model = model;
    svg.append(line);
    legend.append(el("span", { cls: "key c" + (i % 6) }, model));
  });
  const axis = document.createElementNS(NS, "text");
  axis.setAttribute("x", "0");
  axis.setAttribute("y", String(H + 16));
  axis.textContent = `${new Date(t0).toLocaleTimeString()} – ` +
    `${new Date(t1).toLocaleTimeString()}, top ${top} devices`;
  svg.append(axis);
  box.replaceChildren(svg, legend);
}

async function refresh() {
  const error = document.getElementById("error");
  try {
    const [clusters, report, verdict, queued, placed, running, history] = await Promise.all([
      get("/clusters"), get("/capacity/report?by=cluster"), get("/capacity/n-1"),
      get("/tasks?state=Queued"), get("/tasks?state=Placed"), get("/tasks?state=Running"),
      get("/capacity/history?since=1h")]);
    drawClusters(clusters);
    drawCapacity(report);
    drawN1(verdict);
    drawTasks(queued, placed, running);
    drawHistory(history);
    error.hidden = true;
    const stamp = document.getElementById("updated");
    stamp.textContent = "updated " + new Date().toLocaleTimeString();
    stamp.dataset.refreshes = String(Number(stamp.dataset.refreshes || 0) + 1);
  } catch (err) {
    error.hidden = false;
    error.textContent = err.status === 401 || err.status === 403
      ? "The hub refused the request (" + err.message + "): enter a valid token above."
      : "Could not load from the hub: " + err.message;
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  else sessionStorage.removeItem(TOKEN_KEY);
  input.value = "";
  input.placeholder = token() ? "token set for this tab" : "bearer token";
});
if (token()) document.getElementById("token").placeholder = "token set for this tab";
refresh();
