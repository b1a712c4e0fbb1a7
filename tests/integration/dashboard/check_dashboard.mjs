// Drives the korch dashboard in headless Chromium (playwright-core over CDP,
// Debian's chromium binary) for tests/integration/test_dashboard.cpp, and
// prints what it saw as one JSON object on stdout; the C++ test compares it
// with the API and the store. Screenshots go to --out.
//
//   node check_dashboard.mjs --url http://127.0.0.1:PORT/ --token T --out DIR
//        --chromium /usr/bin/chromium --campaign NAME --controls NAME [--timeout-s 120]
//
// Every wait is for a condition: one the test drives (a click, a page load)
// or the campaign's own progress, which the test's fake LLM and mock
// evaluator make finite. --timeout-s only bounds a wait that can never end
// (a broken page), it is never slept.
import { chromium } from "playwright-core";
import path from "node:path";

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^--/, "")] = v[i + 1];
  return a;
}

const opt = args();
const timeoutMs = Number(opt["timeout-s"] || 120) * 1000;
const result = {console_errors: [], page_errors: [], progress: [], screenshots: [], widths: {}};
const shot = async (page, name) => {
  const file = path.join(opt.out, name);
  await page.screenshot({path: file, fullPage: true});
  result.screenshots.push(file);
  return file;
};
// How wide the page is against its viewport: overflow > 0 means a
// horizontal scroll bar.
const width = (page) => page.evaluate(() => ({
  viewport: window.innerWidth,
  scroll: document.documentElement.scrollWidth,
  body: document.body.scrollWidth,
  aside: document.querySelector(".layout > aside").getBoundingClientRect().toJSON(),
  main: document.querySelector(".layout > main").getBoundingClientRect().toJSON(),
  // Panels whose content is wider than they are (a scroll bar inside).
  panels_overflowing: [...document.querySelectorAll(".panel")]
    .filter((p) => p.offsetParent !== null && p.scrollWidth > p.clientWidth)
    .map((p) => `${(p.querySelector("h2") || p).textContent}: ${p.scrollWidth} > ${p.clientWidth}`),
}));

const browser = await chromium.launch({
  executablePath: opt.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  // A wrong token: said plainly, and no "none yet" campaign list.
  {
    const page = await browser.newPage({viewport: {width: 1280, height: 800}});
    page.setDefaultTimeout(timeoutMs);
    await page.goto(`${opt.url}#token=wrong-${encodeURIComponent(opt.token)}`);
    await page.waitForSelector('body[data-auth="wrong"]');
    result.wrong_token = await page.evaluate(() => ({
      conn: document.getElementById("conn").textContent,
      auth: document.getElementById("auth").textContent,
      campaigns: document.getElementById("campaigns").textContent,
      form_shown: document.getElementById("token-form").classList.contains("shown"),
    }));
    await shot(page, "dashboard-wrong-token.png");
    await page.close();
  }

  const page = await browser.newPage({viewport: {width: 1280, height: 900}});
  page.setDefaultTimeout(timeoutMs);
  page.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
  page.on("pageerror", (e) => result.page_errors.push(String(e)));
  page.on("dialog", (d) => { result.dialog = d.message(); d.accept(); });
  // Anything the page loads from elsewhere than the daemon.
  const origin = new URL(opt.url).origin;
  result.foreign_requests = [];
  page.on("request", (r) => { if (!r.url().startsWith(origin)) result.foreign_requests.push(r.url()); });
  result.failed_responses = [];
  page.on("response", (r) => { if (r.status() >= 400) result.failed_responses.push(`${r.status()} ${r.url()}`); });

  await page.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
  result.token_left_in_url = page.url().includes(opt.token);
  const card = page.locator(".campaign", {hasText: opt.campaign});
  await card.waitFor();
  await shot(page, "dashboard-loaded.png");

  // Pause, resume and cancel, by the buttons, on the second campaign (its
  // LLM never answers, so it is active until the test acts).
  const controls = page.locator(".campaign", {hasText: opt.controls});
  await controls.click();
  await page.waitForSelector('#campaign-stats[data-state="active"]');
  result.controls = [];
  for (const [action, wanted] of [["pause", "paused"], ["resume", "active"], ["cancel", "cancelled"]]) {
    await page.locator(`#campaign-controls button[data-action="${action}"]:not([disabled])`).click();
    await page.waitForSelector(`#campaign-stats[data-state="${wanted}"]`);
    await page.waitForSelector(`#control-msg[data-action="${action}"]`);
    result.controls.push({action, state: wanted, message: await page.locator("#control-msg").textContent(),
                          enabled: await page.evaluate(() => [...document.querySelectorAll("#campaign-controls button")]
                            .filter((b) => !b.disabled).map((b) => b.dataset.action))});
  }

  // The watched campaign was paused by the test: the page's resume button
  // starts it, so the page sees it from its first episodes on, however
  // slowly the browser started.
  await card.click();
  await page.waitForSelector('#campaign-stats[data-state="paused"]');
  await page.locator('#campaign-controls button[data-action="resume"]:not([disabled])').click();
  await page.waitForSelector('#campaign-stats[data-state="active"]');
  result.resumed_at_final = Number(await card.getAttribute("data-final"));

  // Progress updating: the campaign card's final-episode count, read at each
  // progress event the stream delivers, until it took three different values.
  const seen = new Set();
  let events = 0;
  while (seen.size < 3) {
    await page.waitForFunction((n) => Number(document.body.dataset.events || 0) > n, events);
    const s = await card.evaluate((el) => ({
      final: Number(el.dataset.final), episodes: Number(el.dataset.episodes),
      events: Number(document.body.dataset.events || 0), text: el.querySelector(".progress-text").textContent,
      bar: el.querySelector(".progress .bar").style.width,
    }));
    events = s.events;
    if (s.episodes === 0) continue;  // its episodes are not created yet
    const last = result.progress[result.progress.length - 1];
    if (!last || last.final !== s.final) result.progress.push(s);
    seen.add(s.final);
    if (s.final === s.episodes) break;  // finished before a third value was seen
  }
  result.progress_stats = await page.locator("#campaign-stats").textContent();
  await shot(page, "dashboard-progress.png");

  // Once the watched campaign completed and the report shows
  // the last progress version, nothing re-renders under the clicks below.
  await page.waitForSelector('#campaign-stats[data-state="completed"]');
  await page.waitForFunction(() => {
    const r = document.getElementById("report");
    return r.dataset.version !== undefined && r.dataset.version === document.body.dataset.version &&
           document.querySelector('table[data-plot="task-grid"]');
  });
  result.final_stats = await page.locator("#campaign-stats").textContent();

  result.plots = await page.evaluate(() => {
    const q = (s) => [...document.querySelectorAll(s)];
    return {
      histogram_count: q('svg[data-plot="speedup-histogram"] rect.bar').reduce((n, r) => n + Number(r.dataset.count), 0),
      fastp_curves: q('svg[data-plot="fast-p"] path.curve').map((p) => p.dataset.model),
      fastp_dots: q('svg[data-plot="fast-p"] circle.threshold').map((c) => ({model: c.dataset.model, p: Number(c.dataset.p), value: Number(c.dataset.value)})),
      cost_bars: q('svg[data-plot="cost"] rect.bar').map((r) => ({model: r.dataset.model, cost: Number(r.dataset.cost)})),
      grid_cells: q('table[data-plot="task-grid"] td.cell[data-episode]').map((c) => ({id: c.dataset.episode, status: c.dataset.status})),
      summary_rows: q('table[data-plot="summary"] tbody tr').length,
      rendered: Number(document.getElementById("report").dataset.rendered || 0),
      // The mock label: in the header (shown), above the report, on every panel of it.
      mock_header: (() => { const m = document.getElementById("mock-label");
                            const r = m.getBoundingClientRect();
                            return {text: m.textContent, hidden: m.hidden, height: r.height, top: r.top}; })(),
      mock_banner: (q("#report > .mock-banner")[0] || {}).textContent || null,
      campaign_cards_mock: q(".campaign").map((c) => !!c.querySelector(".mock-tag")),
      panels: q("#report section.panel > h2").map((h) => ({title: h.firstChild.textContent,
                                                           mock: !!h.querySelector(".mock-tag")})),
      verdicts: q('[data-plot="verdicts"] tbody tr').flatMap((tr) =>
        [...tr.querySelectorAll("td[data-verdict]")].map((td) => ({
          scope: tr.dataset.scope, key: tr.dataset.key, verdict: td.dataset.verdict, count: Number(td.dataset.count)}))),
    };
  });
  // A verdict count is one click from its episodes: the campaign's first
  // non-zero count lists that many.
  {
    const first = page.locator('[data-plot="verdicts"] tr[data-scope="campaign"] td[data-count]:not([data-count="0"]) button').first();
    const td = first.locator("xpath=..");
    const want = Number(await td.getAttribute("data-count"));
    await first.click();
    await page.waitForSelector(".verdict-episodes button.verdict-episode");
    result.verdict_click = {verdict: await td.getAttribute("data-verdict"), count: want,
                            listed: await page.locator(".verdict-episodes button.verdict-episode").count()};
  }
  await shot(page, "dashboard-mock-verdicts.png");

  // Widths: 1,280 and 1,920 px without a horizontal scroll bar (screenshots
  // of each); 900 px stacks the campaign list above the campaign.
  for (const w of [1280, 1920, 900]) {
    await page.setViewportSize({width: w, height: 900});
    await page.waitForFunction((ww) => window.innerWidth === ww, w);
    result.widths[w] = await width(page);
    result.widths[w].screenshot = await shot(page, `dashboard-${w}.png`);
  }
  await page.setViewportSize({width: 1280, height: 900});
  await page.waitForFunction(() => window.innerWidth === 1280);

  // The episode viewer: a finished episode's cell (the first with two turns
  // or more, so a CHECK's feedback shows), then every turn.
  const finals = page.locator('td.cell[data-status="final"]');
  const buttons = page.locator("#turns button");
  for (let i = 0; i < await finals.count(); ++i) {
    result.clicked_episode = await finals.nth(i).getAttribute("data-episode");
    await finals.nth(i).click();
    await page.waitForSelector(`#episode-panel.shown[data-episode="${result.clicked_episode}"]`);
    result.turn_buttons = await buttons.count();
    if (result.turn_buttons >= 2) break;
  }
  const readTurn = () => page.evaluate(() => {
    const text = (s) => { const e = document.querySelector(s); return e ? e.textContent : null; };
    return {
      turn: Number(document.getElementById("turn-view").dataset.turn),
      code: text("#turn-view .turn-code"),
      reply: text("#turn-view .turn-reply"),
      feedback: text("#turn-view .turn-feedback"),
      action: text('#turn-view dd[data-field="action"]'),
      parse: text('#turn-view dd[data-field="parse"]'),
      verdict: text('#turn-view dd[data-field="verdict"]'),
      selected: document.querySelector("#turns button.selected").dataset.turn,
    };
  });
  result.turns = [];
  for (let i = 0; i < result.turn_buttons; ++i) {
    await buttons.nth(i).click();
    const n = await buttons.nth(i).getAttribute("data-turn");
    await page.waitForSelector(`#turn-view[data-turn="${n}"]`);
    result.turns.push(await readTurn());
  }
  await shot(page, "dashboard-episode.png");

  // A turn without code: the viewer shows what the model said. The episode
  // is found through the API, then opened by its cell like a user would.
  const noCode = await page.evaluate(async (token) => {
    const get = async (p) => (await fetch(p, {headers: {Authorization: `Bearer ${token}`}})).json();
    for (const td of document.querySelectorAll('td.cell[data-status="final"]')) {
      const ep = await get(`/api/episodes/${td.dataset.episode}`);
      const t = ep.turns.find((x) => x.parse_status === "no_code");
      if (t) return {episode: ep.id, turn: t.turn};
    }
    return null;
  }, opt.token);
  if (noCode) {
    await page.locator(`td.cell[data-episode="${noCode.episode}"]`).click();
    await page.waitForSelector(`#episode-panel.shown[data-episode="${noCode.episode}"]`);
    await page.locator(`#turns button[data-turn="${noCode.turn}"]`).click();
    await page.waitForSelector(`#turn-view[data-turn="${noCode.turn}"] .turn-reply`);
    result.no_code = {...noCode, shown: await readTurn()};
    await shot(page, "dashboard-no-code.png");
  }
  result.conn = await page.locator("#conn").textContent();
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + "\n");
