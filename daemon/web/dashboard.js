// The korch dashboard (served by `korch serve` at /): campaigns and their
// progress, live from the server-sent-events stream GET /api/events; the
// selected campaign's report (GET /api/campaigns/{id}/report, plotted by
// plots.js, the same code as `korch report --format html`); an episode viewer
// (GET /api/episodes/{id}) with each turn's code, action and feedback.
//
// The bearer token: from the page's fragment (#token=…, kept in
// sessionStorage and removed from the address bar) or typed into the form
// shown after a 401. EventSource cannot send an Authorization header, so the
// stream is read with fetch() and parsed here.
"use strict";

(function () {
  const state = {
    token: sessionStorage.getItem("korch-token") || "",
    campaigns: new Map(),   // id -> snapshot {id, name, state, phase, progress}
    selected: null,         // campaign id
    reportVersion: -1,      // progress version the shown report was fetched at
    lastVersion: 0,
    reportTimer: null,
    events: 0,
    episode: null,
  };

  const $ = (id) => document.getElementById(id);
  const h = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  // --- token ----------------------------------------------------------------
  const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (hash.get("token")) {
    state.token = hash.get("token");
    sessionStorage.setItem("korch-token", state.token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token-input").value.trim();
    sessionStorage.setItem("korch-token", state.token);
    $("token-form").classList.remove("shown");
    start();
  });

  function headers() {
    return state.token ? {Authorization: `Bearer ${state.token}`} : {};
  }

  async function api(path) {
    const res = await fetch(path, {headers: headers(), cache: "no-store"});
    if (res.status === 401) {
      $("token-form").classList.add("shown");
      setConn("down", "token needed");
      throw new Error("401");
    }
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
    return body;
  }

  function setConn(cls, text) {
    const c = $("conn");
    c.className = cls;
    c.textContent = text;
  }

  // --- campaigns --------------------------------------------------------------
  function fmtS(s) {
    if (s === null || s === undefined || s < 0) return "–";
    if (s < 90) return `${Math.round(s)} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  function renderCampaigns() {
    const root = $("campaigns");
    root.textContent = "";
    if (!state.campaigns.size) root.appendChild(h("span", "muted", "none yet"));
    for (const c of [...state.campaigns.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      const p = c.progress || {};
      const div = h("div", "campaign" + (c.id === state.selected ? " selected" : ""));
      div.dataset.campaign = c.id;
      div.dataset.final = p.final || 0;
      div.dataset.episodes = p.episodes || 0;
      div.appendChild(h("div", "name", c.name));
      div.appendChild(h("div", "stats", `${c.state} · ${c.phase}`));
      const bar = h("div", "progress");
      const fill = h("div", "bar");
      fill.style.width = `${p.episodes ? (100 * (p.final || 0)) / p.episodes : 0}%`;
      bar.appendChild(fill);
      div.appendChild(bar);
      div.appendChild(h("div", "stats progress-text",
        `${p.final || 0}/${p.episodes || 0} episodes · ${p.running || 0} running · ${p.turns || 0} turns · ` +
        `$${(p.cost_usd || 0).toFixed(4)} · eta ${fmtS(p.eta_s)}`));
      div.addEventListener("click", () => select(c.id));
      root.appendChild(div);
    }
  }

  function renderSelectedStats() {
    const c = state.campaigns.get(state.selected);
    if (!c) return;
    const p = c.progress || {};
    $("campaign-title").textContent = c.name;
    $("campaign-stats").textContent =
      `${c.id} · ${c.state} · ${c.phase} · ${p.final || 0}/${p.episodes || 0} final · ${p.failed || 0} failed · ` +
      `${p.turns || 0} turns · ${p.tokens || 0} tokens · $${(p.cost_usd || 0).toFixed(4)} · ` +
      `elapsed ${fmtS(p.elapsed_s)} · eta ${fmtS(p.eta_s)}`;
  }

  function select(id) {
    state.selected = id;
    state.reportVersion = -1;
    renderCampaigns();
    renderSelectedStats();
    refreshReport();
  }

  // The report is re-read when progress changed, at most once a second.
  function scheduleReport() {
    if (!state.selected || state.reportTimer || state.reportVersion === state.lastVersion) return;
    state.reportTimer = setTimeout(() => { state.reportTimer = null; refreshReport(); }, 1000);
  }

  async function refreshReport() {
    if (!state.selected) return;
    const id = state.selected;
    const version = state.lastVersion;
    try {
      const report = await api(`/api/campaigns/${encodeURIComponent(id)}/report`);
      if (id !== state.selected) return;
      state.reportVersion = version;
      KorchPlots.renderReport($("report"), report, {onEpisode: openEpisode});
    } catch (e) {
      $("report").textContent = `report: ${e.message}`;
    }
    scheduleReport();
  }

  function applySnapshot(snap) {
    state.lastVersion = snap.version;
    const seen = new Set();
    for (const c of snap.campaigns || []) {
      state.campaigns.set(c.id, c);
      seen.add(c.id);
    }
    for (const id of [...state.campaigns.keys()]) if (!seen.has(id)) state.campaigns.delete(id);
    if (!state.selected && state.campaigns.size) {
      const running = [...state.campaigns.values()].find((c) => c.phase === "running");
      select((running || [...state.campaigns.values()][0]).id);
    } else {
      renderCampaigns();
      renderSelectedStats();
      scheduleReport();
    }
  }

  // --- the progress stream ------------------------------------------------------
  async function stream() {
    for (;;) {
      try {
        const res = await fetch("/api/events", {headers: headers(), cache: "no-store"});
        if (res.status === 401) {
          $("token-form").classList.add("shown");
          setConn("down", "token needed");
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        setConn("live", "live");
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buf += decoder.decode(value, {stream: true});
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let event = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            }
            if (event === "progress" && data.length) {
              state.events += 1;
              document.body.dataset.events = String(state.events);
              applySnapshot(JSON.parse(data.join("\n")));
            } else if (event === "shutdown") {
              setConn("down", "daemon stopped");
            }
          }
        }
      } catch (e) {
        setConn("down", `stream: ${e.message}`);
      }
      await new Promise((r) => setTimeout(r, 2000));  // reconnect
    }
  }

  // --- episode viewer -------------------------------------------------------------
  async function openEpisode(id) {
    try {
      const ep = await api(`/api/episodes/${encodeURIComponent(id)}`);
      state.episode = ep;
      $("episode-panel").classList.add("shown");
      $("episode-panel").dataset.episode = ep.id;
      $("episode-title").textContent = `Episode ${ep.id}`;
      const f = ep.final;
      $("episode-meta").textContent =
        `${ep.task_id} · ${ep.model_id} · sample ${ep.sample} · ${ep.status} · ${ep.tokens} tokens · ` +
        `$${(ep.cost_usd || 0).toFixed(4)}` +
        (f ? ` · final: ${f.reason}${f.verdict ? " / " + f.verdict : ""}` +
             `${f.speedup !== undefined ? " / " + f.speedup.toFixed(3) + "×" : ""}` : "");
      const turns = $("turns");
      turns.textContent = "";
      for (const t of ep.turns) {
        const b = h("button", "turn-button", `turn ${t.turn} · ${t.action || "?"} · ${t.verdict || "–"}`);
        b.dataset.turn = t.turn;
        b.addEventListener("click", () => showTurn(t.turn));
        turns.appendChild(b);
      }
      $("turn-view").textContent = ep.turns.length ? "" : "no turn yet";
      if (ep.turns.length) showTurn(ep.turns[0].turn);
      $("episode-panel").scrollIntoView({block: "nearest"});
    } catch (e) {
      $("turn-view").textContent = `episode: ${e.message}`;
    }
  }

  function showTurn(n) {
    const t = state.episode.turns.find((x) => x.turn === n);
    for (const b of document.querySelectorAll("#turns button")) {
      b.classList.toggle("selected", Number(b.dataset.turn) === n);
    }
    const view = $("turn-view");
    view.textContent = "";
    view.dataset.turn = String(n);
    const dl = h("dl", "turn-meta");
    for (const [k, v] of [["action", t.action], ["parse", t.parse_status], ["verdict", t.verdict],
                          ["finish", t.finish_reason], ["tokens", `${t.prompt_tokens} in / ${t.completion_tokens} out`],
                          ["LLM latency", `${(t.llm_latency_s || 0).toFixed(2)} s`]]) {
      dl.appendChild(h("dt", "", k));
      const dd = h("dd", "", v === undefined || v === "" ? "–" : String(v));
      dd.dataset.field = k;
      dl.appendChild(dd);
    }
    view.appendChild(dl);
    view.appendChild(h("h3", "", "Code"));
    view.appendChild(h("pre", "turn-code", t.code || ""));
    view.appendChild(h("h3", "", "Feedback"));
    view.appendChild(h("pre", "turn-feedback wrap", t.feedback || "(not kept: before a compaction, or none yet)"));
  }

  // --- start ------------------------------------------------------------------------
  let started = false;
  async function start() {
    try {
      const list = await api("/api/campaigns");
      applySnapshot({campaigns: list.campaigns, version: 0});
    } catch (e) {
      if (e.message !== "401") setConn("down", e.message);
      return;
    }
    if (!started) {
      started = true;
      stream();
    }
  }
  start();
})();
