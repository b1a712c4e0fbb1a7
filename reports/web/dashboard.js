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
    $("auth").textContent = "";
    start();
  });

  function headers() {
    return state.token ? {Authorization: `Bearer ${state.token}`} : {};
  }

  // A 401 says which: no token, or a token the daemon refused. The page
  // then shows that (and the form), not an empty campaign list.
  async function refused(res) {
    let why = "";
    try { why = (await res.json()).error || ""; } catch (e) { /* not JSON */ }
    const wrong = state.token !== "" || why.startsWith("wrong");
    $("token-form").classList.add("shown");
    $("auth").textContent = wrong ? "Wrong token: the daemon refused it. Enter the daemon's API token."
                                  : "This daemon needs its API token.";
    setConn("down", wrong ? "wrong token" : "token needed");
    $("campaigns").textContent = "";
    $("campaigns").appendChild(h("span", "muted", wrong ? "not loaded: the token was refused"
                                                        : "not loaded: no token"));
    document.body.dataset.auth = wrong ? "wrong" : "missing";
  }

  async function api(path, method) {
    const res = await fetch(path, {method: method || "GET", headers: headers(), cache: "no-store"});
    if (res.status === 401) {
      await refused(res);
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
      div.dataset.state = c.state;
      div.dataset.final = p.final || 0;
      div.dataset.episodes = p.episodes || 0;
      const name = h("div", "name", c.name);
      if (c.evaluator === "mock") name.appendChild(h("span", "mock-tag", "MOCK"));
      div.appendChild(name);
      div.appendChild(h("div", "stats", `${c.state} · ${c.phase}`));
      const bar = h("div", "progress");
      const fill = h("div", "bar");
      fill.style.width = `${p.episodes ? (100 * (p.final || 0)) / p.episodes : 0}%`;
      bar.appendChild(fill);
      div.appendChild(bar);
      div.appendChild(h("div", "stats progress-text",
        `${p.final || 0}/${p.episodes || 0} episodes finished · ${p.running || 0} running · ` +
        `${p.turns || 0} turns · $${(p.cost_usd || 0).toFixed(4)} · eta ${fmtS(p.eta_s)}`));
      div.addEventListener("click", () => select(c.id));
      root.appendChild(div);
    }
  }

  function renderSelectedStats() {
    const c = state.campaigns.get(state.selected);
    if (!c) return;
    const p = c.progress || {};
    $("campaign-title").textContent = c.name;
    // Named as what they are: "failed" in the API is "finished without a
    // correct submission", not an error.
    const final = p.final || 0;
    const correct = p.correct !== undefined ? p.correct : final - (p.failed || 0);
    $("campaign-stats").textContent =
      `${c.id} · ${c.state} · ${c.phase}${c.message ? " (" + c.message + ")" : ""} · ` +
      `${final}/${p.episodes || 0} episodes finished: ${correct} with a correct submission, ` +
      `${final - correct} without · ${p.running || 0} running · ` +
      `${p.turns || 0} turns · ${p.tokens || 0} tokens · $${(p.cost_usd || 0).toFixed(4)} · ` +
      `elapsed ${fmtS(p.elapsed_s)} · eta ${fmtS(p.eta_s)}`;
    $("campaign-stats").dataset.state = c.state;
    const can = {
      pause: c.state === "active",
      resume: c.state === "paused" || (c.state === "active" && c.phase === "aborted"),
      cancel: c.state === "active" || c.state === "paused",
    };
    for (const b of document.querySelectorAll("#campaign-controls button")) b.disabled = !can[b.dataset.action];
  }

  // pause, resume, cancel: POST /api/campaigns/{id}/<action>; the stream
  // brings the new state, the reply is shown at once.
  for (const b of document.querySelectorAll("#campaign-controls button")) {
    b.addEventListener("click", async () => {
      const id = state.selected;
      const action = b.dataset.action;
      if (!id) return;
      if (action === "cancel" && !confirm("Cancel this campaign for good? What is stored stays.")) return;
      const msg = $("control-msg");
      try {
        const c = await api(`/api/campaigns/${encodeURIComponent(id)}/${action}`, "POST");
        msg.textContent = `${action}: ${c.state}`;
        const old = state.campaigns.get(c.id) || {};
        state.campaigns.set(c.id, {...old, ...c});
        renderCampaigns();
        renderSelectedStats();
      } catch (e) {
        msg.textContent = `${action}: ${e.message}`;
      }
      msg.dataset.action = action;
    });
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
      // The header says it too, above every number of a mock campaign.
      $("mock-label").hidden = !report.mock;
      $("mock-label").textContent = report.mock ? report.label : "";
      $("report").dataset.version = String(version);  // the progress version it shows
    } catch (e) {
      $("report").textContent = `report: ${e.message}`;
    }
    scheduleReport();
  }

  function applySnapshot(snap) {
    state.lastVersion = snap.version;
    document.body.dataset.version = String(snap.version);
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
          await refused(res);
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
    if (t.code) {
      view.appendChild(h("h3", "", "Code"));
      view.appendChild(h("pre", "turn-code", t.code));
    } else {
      // no_code, truncated: what the model said instead.
      view.appendChild(h("h3", "", `The model's reply (${t.parse_status === "truncated" ? "cut off" : "no code block"})`));
      view.appendChild(h("pre", "turn-reply wrap", t.reply || "(empty reply)"));
    }
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
    $("auth").textContent = "";
    delete document.body.dataset.auth;
    if (!started) {
      started = true;
      stream();
    }
  }
  start();
})();
