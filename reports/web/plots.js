// korch plots: hand-written SVG charts of a campaign report (the JSON of
// `korch report --format json` and GET /api/campaigns/{id}/report). One file
// shared by the daemon's dashboard (served as /dashboard/plots.js) and the
// self-contained page of `korch report --format html` (inlined). No library,
// no network: every element is built with the DOM API.
//
// Every chart is an <svg class="korch-plot" data-plot="NAME"> whose marks
// carry data-* attributes with the numbers they draw, so a test can read back
// what was plotted.
"use strict";

(function (global) {
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#bab0ac"];

  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else e.setAttribute(k, String(v));
    }
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function modelIds(report) { return Object.keys(report.models || {}).sort(); }
  function colorOf(report, model) {
    const i = modelIds(report).indexOf(model);
    return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
  }

  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "n/a";
    return Number(x).toFixed(digits === undefined ? 3 : digits);
  }

  // A chart frame: an svg with margins, axes and a title; returns the plot
  // area's geometry and the svg.
  function frame(name, title, width, height) {
    const svg = el("svg", {class: "korch-plot", "data-plot": name, viewBox: `0 0 ${width} ${height}`,
                           width, height, role: "img", "aria-label": title});
    el("title", {}, svg, title);
    const m = {left: 52, right: 14, top: 26, bottom: 40};  // the legend sits in the top margin
    return {svg, x0: m.left, x1: width - m.right, y0: height - m.bottom, y1: m.top, width, height};
  }

  function axes(f, xTicks, yTicks, xLabel, yLabel) {
    const g = el("g", {class: "axes"}, f.svg);
    el("line", {x1: f.x0, y1: f.y0, x2: f.x1, y2: f.y0, class: "axis"}, g);
    el("line", {x1: f.x0, y1: f.y0, x2: f.x0, y2: f.y1, class: "axis"}, g);
    for (const [x, label] of xTicks) {
      el("line", {x1: x, y1: f.y0, x2: x, y2: f.y0 + 4, class: "axis"}, g);
      el("text", {x, y: f.y0 + 15, "text-anchor": "middle", class: "tick"}, g, label);
    }
    for (const [y, label] of yTicks) {
      el("line", {x1: f.x0 - 4, y1: y, x2: f.x1, y2: y, class: "grid"}, g);
      el("text", {x: f.x0 - 6, y: y + 3, "text-anchor": "end", class: "tick"}, g, label);
    }
    if (xLabel) el("text", {x: (f.x0 + f.x1) / 2, y: f.height - 6, "text-anchor": "middle", class: "label"}, g, xLabel);
    if (yLabel) {
      el("text", {x: 12, y: (f.y0 + f.y1) / 2, "text-anchor": "middle", class: "label",
                  transform: `rotate(-90 12 ${(f.y0 + f.y1) / 2})`}, g, yLabel);
    }
  }

  function legend(f, report, models) {
    let x = f.x1;
    const g = el("g", {class: "legend"}, f.svg);
    for (const m of models.slice().reverse()) {
      const w = 18 + 7 * m.length;
      x -= w;
      el("rect", {x, y: 7, width: 10, height: 10, fill: colorOf(report, m)}, g);
      el("text", {x: x + 13, y: 16, class: "tick"}, g, m);
    }
  }

  function empty(f, message) {
    el("text", {x: (f.x0 + f.x1) / 2, y: (f.y0 + f.y1) / 2, "text-anchor": "middle", class: "empty"}, f.svg, message);
    return f.svg;
  }

  // Histogram of the speedups of correct submissions, bins of half a power
  // of two (…, 0.71–1, 1–1.41, …), stacked by model.
  function speedupHistogram(report, opts) {
    const f = frame("speedup-histogram", "Speedup of correct submissions", (opts && opts.width) || 460, 240);
    const models = modelIds(report);
    const all = models.flatMap((m) => report.models[m].speedups || []).filter((s) => s > 0);
    if (!all.length) return empty(f, "no correct submission yet");
    const lo = Math.floor(Math.log2(Math.min(...all)) * 2), hi = Math.floor(Math.log2(Math.max(...all)) * 2) + 1;
    const nb = Math.max(1, hi - lo);
    const counts = models.map((m) => {
      const c = new Array(nb).fill(0);
      for (const s of report.models[m].speedups || []) {
        if (s > 0) c[Math.min(nb - 1, Math.max(0, Math.floor(Math.log2(s) * 2) - lo))] += 1;
      }
      return c;
    });
    const totals = new Array(nb).fill(0);
    counts.forEach((c) => c.forEach((v, i) => { totals[i] += v; }));
    const ymax = Math.max(1, ...totals);
    const bw = (f.x1 - f.x0) / nb;
    const y = (v) => f.y0 - (v / ymax) * (f.y0 - f.y1);
    const xTicks = [];
    const step = Math.ceil((nb + 1) / 8);
    for (let i = 0; i <= nb; i += step) xTicks.push([f.x0 + i * bw, fmt(Math.pow(2, (lo + i) / 2), 2)]);
    const yTicks = [];
    const ystep = Math.max(1, Math.ceil(ymax / 5));
    for (let v = 0; v <= ymax; v += ystep) yTicks.push([y(v), String(v)]);
    axes(f, xTicks, yTicks, "speedup (log scale)", "submissions");
    const base = new Array(nb).fill(0);
    const g = el("g", {class: "marks"}, f.svg);
    models.forEach((m, mi) => {
      counts[mi].forEach((v, i) => {
        if (!v) return;
        const r = el("rect", {class: "bar", x: f.x0 + i * bw + 1, width: Math.max(1, bw - 2), y: y(base[i] + v),
                              height: y(base[i]) - y(base[i] + v), fill: colorOf(report, m), "data-model": m,
                              "data-count": v, "data-low": Math.pow(2, (lo + i) / 2), "data-high": Math.pow(2, (lo + i + 1) / 2)}, g);
        el("title", {}, r, `${m}: ${v} in ${fmt(Math.pow(2, (lo + i) / 2), 2)}–${fmt(Math.pow(2, (lo + i + 1) / 2), 2)}×`);
        base[i] += v;
      });
    });
    // speedup 1 (the reference)
    const x1 = f.x0 + (-lo) * bw;
    if (x1 >= f.x0 && x1 <= f.x1) el("line", {x1, x2: x1, y1: f.y0, y2: f.y1, class: "ref"}, f.svg);
    legend(f, report, models);
    return f.svg;
  }

  // fast_p(p): the share of all episodes that are correct with speedup > p,
  // as a step curve per model; dots at the report's thresholds (the numbers
  // of the text report).
  function fastPCurve(report, opts) {
    const f = frame("fast-p", "fast_p: share of episodes correct and faster than p", (opts && opts.width) || 460, 240);
    const models = modelIds(report);
    if (!models.length) return empty(f, "no episodes");
    const maxS = Math.max(2, ...models.flatMap((m) => report.models[m].speedups || []));
    const pmax = Math.ceil(maxS * 1.1 * 2) / 2;
    const x = (p) => f.x0 + (p / pmax) * (f.x1 - f.x0);
    const y = (v) => f.y0 - v * (f.y0 - f.y1);
    const xTicks = [];
    const step = pmax <= 4 ? 0.5 : Math.ceil(pmax / 8);
    for (let p = 0; p <= pmax + 1e-9; p += step) xTicks.push([x(p), String(Math.round(p * 100) / 100)]);
    axes(f, xTicks, [0, 0.25, 0.5, 0.75, 1].map((v) => [y(v), String(v)]), "p (speedup threshold)", "fast_p");
    for (const m of models) {
      const mr = report.models[m];
      const n = mr.episodes || 0;
      const s = (mr.speedups || []).slice().sort((a, b) => a - b);
      const color = colorOf(report, m);
      const share = (k) => (n ? k / n : 0);
      // fast_p(0) counts every correct episode (also one without a speedup);
      // for p > 0 it is the number of speedups above p.
      let d = `M ${x(0)} ${y(share(mr.correct))} L ${x(0)} ${y(share(s.length))}`;
      let above = s.length;
      for (let i = 0; i < s.length && s[i] <= pmax; ++i) {
        d += ` L ${x(s[i])} ${y(share(above))}`;
        while (i + 1 < s.length && s[i + 1] === s[i]) { ++i; --above; }
        --above;
        d += ` L ${x(s[i])} ${y(share(above))}`;
      }
      d += ` L ${x(pmax)} ${y(share(above))}`;
      el("path", {d, class: "curve", stroke: color, fill: "none", "data-model": m}, f.svg);
      for (const [key, v] of Object.entries(mr.fast_p || {})) {
        const p = Number(key.replace("fast_", ""));
        const c = el("circle", {cx: x(p), cy: y(v), r: 3.5, fill: color, class: "threshold", "data-model": m,
                                "data-p": p, "data-value": v}, f.svg);
        el("title", {}, c, `${m} ${key} = ${fmt(v)}`);
      }
    }
    legend(f, report, models);
    return f.svg;
  }

  // Cost per model: one bar each, labelled with dollars and tokens.
  function costBars(report, opts) {
    const models = modelIds(report);
    const rowH = 26;
    const f = frame("cost", "Cost per model (USD)", (opts && opts.width) || 460, Math.max(80, 36 + rowH * models.length));
    if (!models.length) return empty(f, "no episodes");
    const max = Math.max(1e-9, ...models.map((m) => report.models[m].cost_usd || 0));
    const left = f.x0 + 40;
    const w = (v) => (v / max) * (f.x1 - left - 120);
    models.forEach((m, i) => {
      const mr = report.models[m];
      const yy = 10 + i * rowH;
      el("text", {x: left - 6, y: yy + 14, "text-anchor": "end", class: "tick"}, f.svg, m);
      const r = el("rect", {class: "bar", x: left, y: yy, height: rowH - 8, width: Math.max(1, w(mr.cost_usd || 0)),
                            fill: colorOf(report, m), "data-model": m, "data-cost": mr.cost_usd || 0}, f.svg);
      el("title", {}, r, `${m}: $${fmt(mr.cost_usd, 4)}, ${mr.prompt_tokens} in / ${mr.completion_tokens} out tokens, ${mr.llm_calls} calls`);
      el("text", {x: left + Math.max(1, w(mr.cost_usd || 0)) + 6, y: yy + 14, class: "tick"}, f.svg,
         `$${fmt(mr.cost_usd, 4)} · ${(mr.prompt_tokens || 0) + (mr.completion_tokens || 0)} tok`);
    });
    return f.svg;
  }

  // The strategy's curve (report.strategy, issue #37): per-task fast_1 (the
  // best kernel so far) against `axis` ("cost_usd", "gpu_hours" or "round"):
  // the points as episodes ended, or, against rounds, one point per round.
  function strategyCurve(report, axis, opts) {
    const titles = {cost_usd: "spend (USD)", gpu_hours: "GPU-hours", round: "round"};
    const st = report.strategy || {};
    const f = frame(`strategy-${axis}`, `fast_1 per task against ${titles[axis]} (strategy ${st.kind || "grid"})`,
                    (opts && opts.width) || 460, 240);
    const pts = (axis === "round" ? st.by_round : st.by_episode) || [];
    if (!pts.length) return empty(f, "no finished episodes");
    const xs = pts.map((p) => p[axis] || 0);
    const xmax = Math.max(axis === "round" ? 1 : 1e-9, ...xs);
    const x = (v) => f.x0 + (v / xmax) * (f.x1 - f.x0);
    const y = (v) => f.y0 - v * (f.y0 - f.y1);
    const xTicks = [0, 0.25, 0.5, 0.75, 1].map((t) => [x(t * xmax), axis === "round" ? String(Math.round(t * xmax * 100) / 100) : fmt(t * xmax, 3)]);
    axes(f, xTicks, [0, 0.25, 0.5, 0.75, 1].map((v) => [y(v), String(v)]), titles[axis], "fast_1");
    let d = "";
    pts.forEach((p, i) => {
      const v = (p.fast_p || {}).fast_1 || 0;
      d += `${i ? " L" : "M"} ${x(p[axis] || 0)} ${y(v)}`;
    });
    el("path", {d, class: "curve", stroke: PALETTE[0], fill: "none"}, f.svg);
    for (const p of (axis === "round" ? pts : pts.slice(-1))) {
      const v = (p.fast_p || {}).fast_1 || 0;
      const c = el("circle", {cx: x(p[axis] || 0), cy: y(v), r: 3.5, fill: PALETTE[0], class: "curve-point",
                              "data-axis": axis, "data-x": p[axis] || 0, "data-fast1": v}, f.svg);
      el("title", {}, c, `${titles[axis]} ${fmt(p[axis], 4)}: fast_1 = ${fmt(v)} (${p.episodes} episodes)`);
    }
    return f.svg;
  }

  // One number per model: the text report as a table.
  function summaryTable(report) {
    const t = html("table", {class: "summary", "data-plot": "summary"});
    const head = html("tr", {}, html("thead", {}, t));
    const thresholds = report.thresholds || [];
    const passKeys = [...new Set(modelIds(report).flatMap((m) => Object.keys(report.models[m].pass_at_k || {})))]
      .sort((a, b) => Number(a.split("@")[1]) - Number(b.split("@")[1]));
    for (const h of ["model", "episodes", "finished", "correct", ...thresholds.map((p) => `fast_${p}`),
                     "geomean", ...passKeys, "calls", "tokens in/out", "cost $"]) html("th", {}, head, h);
    const body = html("tbody", {}, t);
    for (const m of modelIds(report)) {
      const mr = report.models[m];
      const tr = html("tr", {"data-model": m}, body);
      const cells = [m, mr.episodes, mr.finished, mr.correct, ...thresholds.map((p) => fmt(mr.fast_p[`fast_${p}`])),
                     fmt(mr.geomean_speedup_correct), ...passKeys.map((k) => fmt(mr.pass_at_k[k])), mr.llm_calls,
                     `${mr.prompt_tokens} / ${mr.completion_tokens}`, fmt(mr.cost_usd, 4)];
      cells.forEach((c, i) => html("td", i === 0 ? {} : {class: "num"}, tr, String(c)));
    }
    return t;
  }

  function cellState(e) {
    if (e.status !== "final") return e.status === "running" ? "running" : "pending";
    if (e.correct) return e.speedup !== null && e.speedup !== undefined && e.speedup > 1 ? "fast" : "correct";
    if (!e.verdict) return "nosubmit";
    return "incorrect";
  }

  // Tasks down, (model, sample) across; a cell per episode coloured by its
  // state. `onEpisode(id)` (the dashboard's viewer) makes cells clickable.
  function taskGrid(report, onEpisode) {
    const wrap = html("div", {class: "grid-wrap"});
    const t = html("table", {class: "task-grid", "data-plot": "task-grid"}, wrap);
    const models = modelIds(report);
    const samples = {};
    for (const e of report.episodes || []) samples[e.model_id] = Math.max(samples[e.model_id] || 0, e.sample + 1);
    const thead = html("thead", {}, t);
    const h1 = html("tr", {}, thead);
    html("th", {}, h1, "task");
    for (const m of models) html("th", {colspan: samples[m] || 1}, h1, m);
    const byKey = new Map();
    for (const e of report.episodes || []) byKey.set(`${e.task_id}\u0000${e.model_id}\u0000${e.sample}`, e);
    const body = html("tbody", {}, t);
    for (const task of report.tasks || []) {
      const tr = html("tr", {"data-task": task}, body);
      html("th", {class: "task"}, tr, task);
      for (const m of models) {
        for (let s = 0; s < (samples[m] || 1); ++s) {
          const e = byKey.get(`${task}\u0000${m}\u0000${s}`);
          if (!e) { html("td", {class: "cell none"}, tr); continue; }
          const state = cellState(e);
          const label = state === "fast" || state === "correct" ? (e.speedup != null ? `${fmt(e.speedup, 2)}×` : "✓")
                      : state === "incorrect" ? "✗" : state === "nosubmit" ? "–" : state === "running" ? "…" : "";
          const td = html("td", {class: `cell ${state}`, "data-episode": e.id, "data-status": e.status,
                                 "data-state": state, "data-verdict": e.verdict || ""}, tr, label);
          td.title = `${e.id}\n${e.task_id} · ${e.model_id} · sample ${e.sample}\n${e.status}` +
                     (e.status === "final" ? ` · ${e.reason}${e.verdict ? " · " + e.verdict : ""}` : "") +
                     (e.evaluator ? ` · ${e.evaluator} evaluator` : "") +
                     (e.speedup != null ? ` · ${fmt(e.speedup, 3)}×` : "");
          if (onEpisode) {
            td.classList.add("clickable");
            td.addEventListener("click", () => onEpisode(e.id));
          }
        }
      }
    }
    const key = html("div", {class: "grid-key"}, wrap);
    for (const [cls, text] of [["fast", "correct, faster"], ["correct", "correct"], ["incorrect", "not correct (Verdicts says why)"],
                               ["nosubmit", "no submission"], ["running", "running"], ["pending", "pending"]]) {
      html("span", {class: `cell ${cls}`}, key, " ");
      html("span", {class: "key-text"}, key, text);
    }
    return wrap;
  }

  // A section of the report; a mock campaign's says so in its title, so no
  // plot or table of made-up numbers stands without the word.
  function section(parent, title, content, report) {
    const s = html("section", {class: "panel"}, parent);
    const h2 = html("h2", {}, s, title);
    if (report && report.mock) html("span", {class: "mock-tag", "data-mock-label": ""}, h2, "MOCK");
    s.appendChild(content);
    return s;
  }

  // Verdict counts (the names of docs/rules.md; "none": ended without a
  // judged submission) for the campaign, each model and each task; a count
  // is a link to the episodes that ended so, listed under the table.
  function verdictTable(report, onEpisode) {
    const wrap = html("div", {class: "verdicts", "data-plot": "verdicts"});
    const names = Object.keys(report.verdicts || {}).sort();
    if (!names.length) { html("p", {class: "muted"}, wrap, "no episode has ended yet"); return wrap; }
    const t = html("table", {class: "summary verdict-table"}, wrap);
    const head = html("tr", {}, html("thead", {}, t));
    for (const h of ["", ...names]) html("th", {}, head, h);
    const body = html("tbody", {}, t);
    const list = html("div", {class: "verdict-episodes"}, wrap);
    const show = (scope, key, verdict) => {
      list.textContent = "";
      const eps = (report.episodes || []).filter((e) => e.status === "final" &&
        (e.verdict || "none") === verdict && (scope === "campaign" || e[scope === "model" ? "model_id" : "task_id"] === key));
      html("div", {class: "stats"}, list, `${verdict}: ${eps.length} episode(s)${scope === "campaign" ? "" : " of " + key}`);
      for (const e of eps) {
        const b = html("button", {type: "button", class: "verdict-episode", "data-episode": e.id}, list,
                       `${e.task_id} · ${e.model_id} · sample ${e.sample} · ${e.reason}` +
                       (e.evaluator ? ` · ${e.evaluator}` : ""));
        if (onEpisode) b.addEventListener("click", () => onEpisode(e.id));
      }
    };
    const row = (scope, key, label, counts) => {
      const tr = html("tr", {"data-scope": scope, "data-key": key}, body);
      html("th", {}, tr, label);
      for (const v of names) {
        const n = (counts || {})[v] || 0;
        const td = html("td", {class: "num", "data-verdict": v, "data-count": String(n)}, tr);
        if (!n) { td.textContent = "0"; continue; }
        const a = html("button", {type: "button", class: "link"}, td, String(n));
        a.addEventListener("click", () => show(scope, key, v));
      }
    };
    row("campaign", "", "campaign", report.verdicts);
    for (const m of modelIds(report)) row("model", m, `model ${m}`, report.models[m].verdicts);
    for (const task of report.tasks || []) row("task", task, `task ${task}`, (report.task_verdicts || {})[task]);
    return wrap;
  }

  // The whole report into `root` (emptied first).
  function renderReport(root, report, opts) {
    opts = opts || {};
    root.textContent = "";
    root.classList.add("korch-report");
    if (report.mock) html("p", {class: "mock-banner", "data-mock-label": ""}, root, report.label);
    // The reward's measured error rates (korch audit --store), or "no card measured".
    for (const c of report.verdict_cards || [])
      html("p", {class: "verdict-card", "data-verdict-card": c.measured ? "measured" : "none"}, root, c.text);
    const evaluators = Object.entries(report.evaluators || {});
    if (evaluators.length > 1)
      html("p", {class: "stats", "data-evaluators": ""}, root,
           "results by evaluator: " + evaluators.map(([m, n]) => `${m} ${n}`).join(", "));
    const plots = html("div", {class: "plots"}, root);
    section(plots, "Speedup distribution", speedupHistogram(report), report);
    section(plots, "fast_p", fastPCurve(report), report);
    section(plots, "Cost", costBars(report), report);
    for (const [axis, title] of [["cost_usd", "fast_1 against spend"], ["gpu_hours", "fast_1 against GPU-hours"],
                                 ["round", "fast_1 against rounds"]])
      section(plots, title, strategyCurve(report, axis), report);
    section(root, "Verdicts", verdictTable(report, opts.onEpisode), report);
    section(root, "Per model", summaryTable(report), report);
    section(root, "Tasks", taskGrid(report, opts.onEpisode), report);
    root.setAttribute("data-rendered", String((Number(root.getAttribute("data-rendered")) || 0) + 1));
  }

  global.KorchPlots = {renderReport, speedupHistogram, fastPCurve, costBars, strategyCurve, summaryTable, taskGrid,
                       verdictTable,
                       cellState, fmt};
})(typeof window !== "undefined" ? window : globalThis);
