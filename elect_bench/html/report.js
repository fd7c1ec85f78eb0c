// elect's report.html: sortable tables, failover CDFs and zoomable timelines, drawn from the JSON in #data.
// Plain DOM and SVG, no library: the file opens with no network.
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

function el(name, attrs, parent, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function sortable(table) {
  const heads = table.querySelectorAll("th");
  heads.forEach((th, col) => th.addEventListener("click", () => {
    const up = !th.classList.contains("sorted-up");
    heads.forEach(h => h.classList.remove("sorted-up", "sorted-down"));
    th.classList.add(up ? "sorted-up" : "sorted-down");
    const rows = Array.from(table.tBodies[0].rows);
    const key = r => { const t = r.cells[col].textContent; const n = parseFloat(t); return isNaN(n) ? t : n; };
    rows.sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1); });
    rows.forEach(r => table.tBodies[0].appendChild(r));
  }));
}

function cdf(chart, box) {
  const W = 640, H = 300, L = 50, B = 40, R = 20, T = 20;
  const svg = el("svg", {class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`}, box);
  const xmax = Math.max(1.5, ...chart.series.flatMap(s => s.xs)) * 1.05;
  const x = v => L + (W - L - R) * v / xmax, y = v => H - B - (H - B - T) * v;
  for (let i = 0; i <= 4; i++) {
    el("line", {x1: L, x2: W - R, y1: y(i / 4), y2: y(i / 4), stroke: "#eee"}, svg);
    el("text", {x: L - 6, y: y(i / 4) + 3, "text-anchor": "end", class: "axis"}, svg, `${i * 25}%`);
  }
  for (let v = 0; v <= xmax; v += xmax > 4 ? 1 : 0.5) el("text", {x: x(v), y: H - B + 14, "text-anchor": "middle", class: "axis"}, svg, v.toFixed(1));
  el("text", {x: (W + L) / 2, y: H - 6, "text-anchor": "middle", class: "axis"}, svg, chart.xlabel);
  el("line", {x1: x(1), x2: x(1), y1: T, y2: H - B, stroke: "#999", "stroke-dasharray": "3 3"}, svg);
  const legend = document.createElement("div");
  legend.className = "legend";
  chart.series.forEach((s, i) => {
    const xs = s.xs.slice().sort((a, b) => a - b), color = COLORS[i % COLORS.length];
    let d = `M ${x(0)} ${y(0)}`;
    xs.forEach((v, k) => { d += ` H ${x(v)} V ${y((k + 1) / xs.length)}`; });
    el("path", {d, fill: "none", stroke: color, "stroke-width": 1.5}, svg);
    legend.insertAdjacentHTML("beforeend", `<span><i style="background:${color}"></i>${s.name} (${xs.length})</span>`);
  });
  box.appendChild(legend);
}

class Timeline {
  constructor(trial, box) {
    this.t = trial; this.box = box;
    this.members = Array.from(new Set(trial.lanes.map(l => l.member))).sort();
    this.full = [0, Math.max(trial.end - trial.start, 0.001)];
    this.view = this.full.slice();
    this.svg = el("svg", {class: "timeline", "data-trial": trial.id}, box);
    this.width = Math.min(1150, box.clientWidth || 1150);
    const legend = document.createElement("div");
    legend.className = "legend";
    this.members.forEach(m => legend.insertAdjacentHTML("beforeend", `<span><i style="background:${this.color(m)}"></i>${m}</span>`));
    legend.insertAdjacentHTML("beforeend", '<span><i style="background:#d62728;opacity:.35"></i>overlap</span><span><i style="background:#bbb"></i>leaderless</span><span><i style="background:#d62728;opacity:.15"></i>fault</span>');
    box.appendChild(legend);
    this.listen();
    this.draw();
  }
  color(m) { return COLORS[this.members.indexOf(m) % COLORS.length]; }
  zoomTo(a, b) { this.view = [Math.max(this.full[0], a), Math.min(this.full[1], b)]; this.draw(); }
  listen() {
    const s = this.svg;
    s.addEventListener("wheel", e => {
      e.preventDefault();
      const [a, b] = this.view, at = this.timeAt(e.offsetX), k = e.deltaY > 0 ? 1.25 : 0.8;
      const span = Math.min(this.full[1] - this.full[0], Math.max(0.01, (b - a) * k));
      const left = at - (at - a) * span / (b - a);
      this.view = [left, left + span]; this.clamp(); this.draw();
    }, {passive: false});
    s.addEventListener("mousedown", e => { this.drag = [e.clientX, this.view.slice()]; s.classList.add("dragging"); });
    window.addEventListener("mouseup", () => { this.drag = null; s.classList.remove("dragging"); });
    window.addEventListener("mousemove", e => {
      if (!this.drag) return;
      const [x0, [a, b]] = this.drag, dt = (x0 - e.clientX) * (b - a) / (this.width - 110);
      this.view = [a + dt, b + dt]; this.clamp(); this.draw();
    });
    s.addEventListener("dblclick", () => { this.view = this.full.slice(); this.draw(); });
  }
  clamp() {
    const span = this.view[1] - this.view[0];
    if (this.view[0] < this.full[0]) this.view = [this.full[0], this.full[0] + span];
    if (this.view[1] > this.full[1]) this.view = [this.full[1] - span, this.full[1]];
  }
  timeAt(px) { const [a, b] = this.view; return a + (px - 100) * (b - a) / (this.width - 110); }
  draw() {
    const t = this.t, s = this.svg, lane = 14, top = 20, left = 100, right = 10;
    const rows = t.lanes.length, H = top + rows * lane + 24, W = this.width;
    s.setAttribute("width", W); s.setAttribute("height", H); s.setAttribute("viewBox", `0 0 ${W} ${H}`);
    while (s.firstChild) s.removeChild(s.firstChild);
    const defs = el("defs", {}, s), hatch = el("pattern", {id: `hatch-${t.id}`, width: 4, height: 4, patternUnits: "userSpaceOnUse"}, defs);
    el("path", {d: "M0,4 L4,0", stroke: "#999", "stroke-width": 1}, hatch);
    el("rect", {x: left, y: top, width: W - left - right, height: rows * lane, fill: "#fafafa"}, s);
    const [a, b] = this.view, x = v => left + (W - left - right) * (v - t.start - a) / (b - a);
    const clip = (u, v) => [Math.max(x(u), left), Math.min(x(v), W - right)];
    const step = Math.pow(10, Math.floor(Math.log10((b - a) / 4)));
    for (let v = Math.ceil(a / step) * step; v <= b; v += step) {
      const px = x(t.start + v);
      el("line", {x1: px, x2: px, y1: top, y2: top + rows * lane, stroke: "#eee"}, s);
      el("text", {x: px, y: top + rows * lane + 14, "text-anchor": "middle", class: "axis"}, s, +v.toFixed(3) + " s");
    }
    const laneOf = {};
    t.lanes.forEach((l, i) => {
      laneOf[l.role] = laneOf[l.role] || [i, i];
      laneOf[l.role][1] = i;
      el("text", {x: left - 4, y: top + i * lane + 10, "text-anchor": "end", class: "lane-label"}, s, `role ${l.role} · ${l.member}`);
    });
    const seen = t.faults.filter(f => x(f.at) >= left && x(f.at) <= W - right).length;
    let labelled = -Infinity;  // a label only where it has room: a soak's thousand strikes, zoomed out, are lines
    for (const f of t.faults) {
      if (f.healed !== null) {  // a fault that is never healed (a kill, a stop) is a moment, not a span
        const [p, q] = clip(f.at, f.healed);
        if (q > p) el("rect", {x: p, y: top, width: q - p, height: rows * lane, class: "fault-span"}, s);
      }
      const px = x(f.at);
      if (px >= left && px <= W - right) {
        el("line", {x1: px, x2: px, y1: top - 4, y2: top + rows * lane, class: "fault-at",
                    "stroke-opacity": seen > 40 ? 0.3 : 1}, s);
        if (px - labelled > 90) {
          el("text", {x: px + 3, y: top - 6, class: "axis"}, s, `${f.kind} ${f.target}`);
          labelled = px;
        }
      }
    }
    t.lanes.forEach((l, i) => {
      for (const [u, v, token, how] of l.bars) {
        const [p, q] = clip(u, v);
        if (q <= p) continue;
        const r = el("rect", {x: p, y: top + i * lane + 2, width: Math.max(q - p, 1), height: lane - 4,
                              fill: this.color(l.member), class: "bar", "data-role": l.role, "data-member": l.member}, s);
        el("title", {}, r, `${l.member} led role ${l.role}: token ${token}, ${(u - t.start).toFixed(3)}-${(v - t.start).toFixed(3)} s, ended: ${how}`);
      }
    });
    for (const [kind, list] of [["overlap", t.overlaps], ["gap", t.gaps]]) {
      for (const [role, u, v] of list) {
        const [p, q] = clip(u, v), span = laneOf[role];
        if (q <= p || !span) continue;
        const r = el("rect", {x: p, y: top + span[0] * lane, width: Math.max(q - p, 1), height: (span[1] - span[0] + 1) * lane, class: kind}, s);
        if (kind === "gap") r.setAttribute("fill", `url(#hatch-${t.id})`);
        el("title", {}, r, `${kind === "gap" ? "nobody led" : "two led"} role ${role} for ${(v - u).toFixed(3)} s`);
      }
    }
  }
}

document.querySelectorAll("table.sortable").forEach(sortable);
DATA.charts.forEach((chart, i) => cdf(chart, document.getElementById(`chart-${i}`)));
const TIMELINES = {};
DATA.trials.forEach(trial => { TIMELINES[trial.id] = new Timeline(trial, document.getElementById(trial.id)); });
document.querySelectorAll("[data-zoom]").forEach(a => a.addEventListener("click", e => {
  e.preventDefault();
  const [id, at] = a.dataset.zoom.split("@"), line = TIMELINES[id], t = parseFloat(at) - line.t.start;
  line.zoomTo(t - 3, t + 3);
  line.svg.scrollIntoView({block: "center"});
}));
