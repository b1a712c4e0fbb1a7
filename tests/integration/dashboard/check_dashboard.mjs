// Drives the korch dashboard in headless Chromium (playwright-core over CDP,
// Debian's chromium binary) for tests/integration/test_dashboard.cpp, and
// prints what it saw as one JSON object on stdout; the C++ test compares it
// with the API. Screenshots go to --out.
//
//   node check_dashboard.mjs --url http://127.0.0.1:PORT/ --token T --out DIR
//        --chromium /usr/bin/chromium --campaign NAME [--timeout-s 90]
import { chromium } from "playwright-core";
import path from "node:path";

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^--/, "")] = v[i + 1];
  return a;
}

const opt = args();
const timeoutMs = Number(opt["timeout-s"] || 90) * 1000;
const result = {console_errors: [], page_errors: [], progress: [], screenshots: []};
const shot = async (page, name) => {
  const file = path.join(opt.out, name);
  await page.screenshot({path: file, fullPage: true});
  result.screenshots.push(file);
};

const browser = await chromium.launch({
  executablePath: opt.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
  page.setDefaultTimeout(timeoutMs);
  page.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
  page.on("pageerror", (e) => result.page_errors.push(String(e)));
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

  // Progress updating: the campaign card's final-episode count, sampled while
  // the stream delivers events, until it took three different values.
  const deadline = Date.now() + timeoutMs;
  const seen = new Set();
  while (Date.now() < deadline) {
    const s = await card.evaluate((el) => ({
      final: Number(el.dataset.final), episodes: Number(el.dataset.episodes),
      events: Number(document.body.dataset.events || 0), text: el.querySelector(".progress-text").textContent,
      bar: el.querySelector(".progress .bar").style.width,
    }));
    const last = result.progress[result.progress.length - 1];
    if (!last || last.final !== s.final || last.events !== s.events) result.progress.push(s);
    seen.add(s.final);
    if (seen.size >= 3) break;
    await page.waitForTimeout(150);
  }
  await shot(page, "dashboard-progress.png");

  // The plots: wait until the histogram has bars (a correct submission), then
  // read every chart's marks.
  await page.waitForSelector('svg[data-plot="speedup-histogram"] rect.bar');
  await page.waitForSelector('svg[data-plot="fast-p"] path.curve');
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
    };
  });
  await shot(page, "dashboard-plots.png");

  // The episode viewer: click a finished episode's cell (the first with a
  // CHECK's feedback before its end: two turns or more), then every turn.
  const finals = page.locator('td.cell[data-status="final"]');
  const buttons = page.locator("#turns button");
  for (let i = 0; i < await finals.count(); ++i) {
    result.clicked_episode = await finals.nth(i).getAttribute("data-episode");
    await finals.nth(i).click();
    await page.waitForSelector(`#episode-panel.shown[data-episode="${result.clicked_episode}"]`);
    result.turn_buttons = await buttons.count();
    if (result.turn_buttons >= 2) break;
  }
  // Every turn, clicked in turn; the last one stays open for the screenshot.
  result.turns = [];
  for (let i = 0; i < result.turn_buttons; ++i) {
    await buttons.nth(i).click();
    const n = await buttons.nth(i).getAttribute("data-turn");
    await page.waitForSelector(`#turn-view[data-turn="${n}"]`);
    result.turns.push(await page.evaluate(() => ({
      turn: Number(document.getElementById("turn-view").dataset.turn),
      code: document.querySelector("#turn-view .turn-code").textContent,
      feedback: document.querySelector("#turn-view .turn-feedback").textContent,
      action: document.querySelector('#turn-view dd[data-field="action"]').textContent,
      verdict: document.querySelector('#turn-view dd[data-field="verdict"]').textContent,
      selected: document.querySelector("#turns button.selected").dataset.turn,
    })));
  }
  await shot(page, "dashboard-episode.png");
  result.conn = await page.locator("#conn").textContent();
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + "\n");
