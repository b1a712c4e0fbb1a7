// The dashboard of `korch serve` in headless Chromium (issue 11): a real
// daemon with a running campaign (fake LLM, mock evaluator), the page driven
// by tests/integration/dashboard/check_dashboard.mjs (playwright-core over
// CDP, Debian's chromium); what the page showed is compared with the API.
// Screenshots are kept in <build>/tests/integration/dashboard-artifacts/.
// Skips when chromium, node or the npm package (scripts/install-test-npm.sh)
// is missing. Also, without a browser: the dashboard's files are served
// without a token, embedded, with a CSP that allows no other origin.
#include <gtest/gtest.h>

#include <map>

#include <regex>
#include <set>

#include "tests/integration/serve_fixture.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr const char* k_token = "dashboard-token-0123456789abcdef";

std::string campaign_toml(const std::string& base_url, const std::string& name = "watched") {
  std::ostringstream s;
  s << "name = \"" << name
    << "\"\nsamples_per_task = 3\nmax_turns = 3\nmax_inflight_episodes = "
       "2\nlog_level = \"warn\"\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = 0.4\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\nconcurrency = 2\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-2\"\nconcurrency = 2\n"
    << "price_prompt_per_mtok = 3.0\nprice_completion_per_mtok = 4.0\n";
  return s.str();
}

std::string find_chromium() {
  if (const char* c = std::getenv("KORCH_CHROMIUM"); c && *c)
    return std::filesystem::exists(c) ? c : "";
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

TEST(Dashboard, FilesAreServedWithoutATokenAndOnlyFromTheDaemon) {
  TempDir dir;
  auto d = dir.path().string();
  ServeProcess serve;
  ASSERT_TRUE(serve.start(d, d + "/s.db", {}, {{"KORCH_API_TOKEN", k_token}})) << serve.err();
  auto anon = serve.client();
  auto page = anon.Get("/");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  auto csp = page->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  // Every script and style sheet of the page is one of the daemon's files.
  std::regex ref(R"re((?:src|href)="([^"]+)")re");
  int refs = 0;
  for (auto it = std::sregex_iterator(page->body.begin(), page->body.end(), ref);
       it != std::sregex_iterator(); ++it) {
    std::string url = (*it)[1];
    if (url == "data:,") continue;  // the empty icon (no /favicon.ico request)
    ASSERT_EQ(url.rfind("/dashboard/", 0), 0u) << url;
    auto r = anon.Get(url.c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << url;
    EXPECT_GT(r->body.size(), 100u) << url;
    // No URL but the SVG namespace name (an identifier, never fetched).
    auto body = std::regex_replace(r->body, std::regex("http://www\\.w3\\.org/2000/svg"), "");
    EXPECT_EQ(body.find("http://"), std::string::npos) << url;
    EXPECT_EQ(body.find("https://"), std::string::npos) << url;
    ++refs;
  }
  EXPECT_EQ(refs, 3);  // style.css, plots.js, dashboard.js
  auto js = anon.Get("/dashboard/plots.js");
  ASSERT_TRUE(js);
  EXPECT_NE(js->get_header_value("Content-Type").find("javascript"), std::string::npos);
  auto missing = anon.Get("/dashboard/nope.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The data still needs the token.
  auto r = anon.Get("/api/campaigns/x/report");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  auto cli = serve.client(k_token);
  r = cli.Get("/api/campaigns/c-nope/report");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(body_json(r).value("error", "").find("no campaign"), std::string::npos) << r->body;
  r = cli.Get("/api/campaigns/c-nope/report?format=pdf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST(Dashboard, ShowsARunningCampaignInHeadlessChromium) {
  auto chromium = find_chromium();
  if (chromium.empty())
    KORCH_SKIP_OR_FAIL("chromium not installed (scripts/install-deps.sh, or KORCH_CHROMIUM=PATH)");
  const std::string driver_dir = KORCH_SOURCE_DIR "/tests/integration/dashboard";
  if (!std::filesystem::exists(driver_dir + "/node_modules/playwright-core/package.json")) {
    KORCH_SKIP_OR_FAIL("playwright-core not installed: run scripts/install-test-npm.sh");
  }
  auto [nrc, node_version] = run_capture({"/usr/bin/env", "node", "--version"}, "/tmp");
  if (nrc != 0) KORCH_SKIP_OR_FAIL("node not found");

  const std::string artifacts = KORCH_ARTIFACTS_DIR;
  std::filesystem::remove_all(artifacts);
  std::filesystem::create_directories(artifacts);

  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(llm.start(d, {"--script", "kernel", "--latency-ms", "60"}));
  // The campaign the buttons act on: its LLM takes an hour per reply, so it
  // stays active until the test pauses, resumes and cancels it.
  auto slow_dir = d + "/slow";
  std::filesystem::create_directories(slow_dir);
  FakeLlmProcess slow_llm;
  ASSERT_TRUE(slow_llm.start(slow_dir, {"--script", "kernel", "--latency-ms", "3600000"}));
  ServeProcess serve;
  ASSERT_TRUE(
      serve.start(d, d + "/dash.db", {"--sse-interval-s", "0.2"}, {{"KORCH_API_TOKEN", k_token}}))
      << serve.err();
  auto cli = serve.client(k_token);
  auto r = cli.Post("/api/campaigns", campaign_toml(slow_llm.base_url(), "controls"),
                    "application/toml");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  std::string controls_id = body_json(r)["id"];
  r = cli.Post("/api/campaigns", campaign_toml(llm.base_url()), "application/toml");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  std::string id = body_json(r)["id"];
  // Paused until the page's resume button starts it: the page then watches
  // the whole run, however long the browser takes to start.
  r = cli.Post(("/api/campaigns/" + id + "/pause").c_str(), "", "text/plain");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;

  auto url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/";
  auto [rc, out] = run_capture({"/usr/bin/env", "node", driver_dir + "/check_dashboard.mjs",
                                "--url", url, "--token", k_token, "--out", artifacts, "--chromium",
                                chromium, "--campaign", "watched", "--controls", "controls"},
                               d);
  ASSERT_EQ(rc, 0) << out;
  auto seen = nlohmann::json::parse(out.substr(0, out.find('\n')), nullptr, false);
  ASSERT_TRUE(seen.is_object()) << out;

  EXPECT_TRUE(seen["page_errors"].empty()) << seen["page_errors"];
  EXPECT_TRUE(seen["console_errors"].empty())
      << seen["console_errors"] << " " << seen["failed_responses"];
  EXPECT_TRUE(seen["failed_responses"].empty()) << seen["failed_responses"];
  EXPECT_TRUE(seen["foreign_requests"].empty()) << seen["foreign_requests"];
  EXPECT_FALSE(seen["token_left_in_url"].get<bool>());
  EXPECT_EQ(seen["conn"], "live");

  // A wrong token is said plainly; the campaign list does not claim "none yet".
  auto& wrong = seen["wrong_token"];
  EXPECT_EQ(wrong["conn"], "wrong token") << wrong;
  EXPECT_NE(wrong["auth"].get<std::string>().find("Wrong token"), std::string::npos) << wrong;
  EXPECT_EQ(wrong["campaigns"].get<std::string>().find("none yet"), std::string::npos) << wrong;
  EXPECT_TRUE(wrong["form_shown"].get<bool>());

  // Progress updated in place, from the stream: the card showed at least three
  // different counts of final episodes, never going back, out of 24.
  auto& progress = seen["progress"];
  ASSERT_GE(progress.size(), 3u) << progress;
  std::set<int> finals;
  int prev = -1;
  for (auto& p : progress) {
    EXPECT_EQ(p["episodes"], 24);
    EXPECT_GE(p["final"].get<int>(), prev) << progress;
    prev = p["final"];
    finals.insert(prev);
  }
  EXPECT_GE(finals.size(), 3u) << progress;
  EXPECT_GT(progress.back()["events"].get<int>(), progress.front()["events"].get<int>());
  // Counts named as what they are: no bare "failed".
  std::string stats = seen["final_stats"];
  EXPECT_EQ(stats.find("failed"), std::string::npos) << stats;
  EXPECT_NE(stats.find("with a correct submission"), std::string::npos) << stats;

  // Pause, resume and cancel by the buttons: each reached the API.
  auto& controls = seen["controls"];
  ASSERT_EQ(controls.size(), 3u) << controls;
  EXPECT_EQ(controls[0]["enabled"], nlohmann::json({"resume", "cancel"})) << controls;
  EXPECT_EQ(controls[1]["enabled"], nlohmann::json({"pause", "cancel"})) << controls;
  EXPECT_EQ(controls[2]["enabled"], nlohmann::json::array()) << controls;
  EXPECT_EQ(body_json(cli.Get(("/api/campaigns/" + controls_id).c_str()))["state"], "cancelled");
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  // The test's own pause of the watched campaign, then the page's clicks:
  // pause and resume of `controls`, resume of `watched`, cancel of `controls`.
  for (auto [action, n] : {std::pair{"pause", 2}, {"resume", 2}, {"cancel", 1}}) {
    EXPECT_EQ(metric_value(metrics->body, std::string("korch_http_requests_total{route=\"/api/"
                                                      "campaigns/{id}/") +
                                              action + "\",status=\"200\"}"),
              n)
        << action;
  }

  // No horizontal scroll bar at 1,280 and 1,920 px; 900 px stacks.
  for (auto* w : {"1280", "1920", "900"}) {
    auto& m = seen["widths"][w];
    EXPECT_LE(m["scroll"].get<int>(), m["viewport"].get<int>()) << w << ": " << m;
    EXPECT_GT(std::filesystem::file_size(m["screenshot"].get<std::string>()), 10000u) << w;
  }
  // At 1,280 px and up every panel fits too: the plots, the per-model
  // table's last column, the task grid.
  for (auto* w : {"1280", "1920"})
    EXPECT_TRUE(seen["widths"][w]["panels_overflowing"].empty()) << w << ": " << seen["widths"][w];
  auto& narrow = seen["widths"]["900"];
  EXPECT_LE(narrow["aside"]["bottom"].get<double>(), narrow["main"]["top"].get<double>()) << narrow;
  auto& wide = seen["widths"]["1280"];
  EXPECT_LT(wide["aside"]["right"].get<double>(), wide["main"]["left"].get<double>()) << wide;

  // The plots, against the report and the episodes of the API.
  auto& plots = seen["plots"];
  EXPECT_GE(plots["rendered"].get<int>(), 1);
  EXPECT_GE(plots["histogram_count"].get<int>(), 1);
  EXPECT_EQ(plots["fastp_curves"], nlohmann::json({"m1", "m2"}));
  EXPECT_EQ(plots["fastp_dots"].size(), 2u * 6);
  for (auto& dot : plots["fastp_dots"]) {
    EXPECT_GE(dot["value"].get<double>(), 0.0);
    EXPECT_LE(dot["value"].get<double>(), 1.0);
  }
  EXPECT_EQ(plots["cost_bars"].size(), 2u);
  EXPECT_EQ(plots["summary_rows"], 2);

  // Issue 48: a mock campaign says so in the header (shown, in the
  // screenshots' first screen), above the report and on every panel.
  const std::string label = "MOCK evaluator: fake verdicts and speedups";
  EXPECT_EQ(plots["mock_header"]["text"], label) << plots["mock_header"];
  EXPECT_FALSE(plots["mock_header"]["hidden"].get<bool>());
  EXPECT_GT(plots["mock_header"]["height"].get<double>(), 0);
  EXPECT_LT(plots["mock_header"]["top"].get<double>(), 900);
  EXPECT_EQ(plots["mock_banner"], label);
  // Both campaigns of the list (mock ones) carry the tag.
  EXPECT_EQ(plots["campaign_cards_mock"], nlohmann::json({true, true}));
  ASSERT_GE(plots["panels"].size(), 9u) << plots["panels"];
  for (auto& p : plots["panels"]) EXPECT_TRUE(p["mock"].get<bool>()) << p;
  // Verdict counts per campaign, model and task: the store's, by own SQL.
  std::map<std::string, std::map<std::string, std::int64_t>> shown_counts, stored_counts;
  for (auto& v : plots["verdicts"]) {
    const std::string scope = v["scope"].get<std::string>() + ":" + v["key"].get<std::string>();
    if (v["count"].get<std::int64_t>() > 0) shown_counts[scope][v["verdict"]] = v["count"];
  }
  const std::string verdict = "CASE WHEN f.verdict = '' THEN 'none' ELSE f.verdict END";
  const std::string of_watched =
      " FROM finals f JOIN episodes e ON e.id = f.episode_id JOIN campaigns c ON c.id = "
      "e.campaign_id WHERE c.name = 'watched' GROUP BY 1, 2";
  for (auto& [scope, column] :
       {std::pair{"campaign:", "''"}, {"model:", "e.model_id"}, std::pair{"task:", "e.task_id"}}) {
    for (auto& row : query(d + "/dash.db", std::string("SELECT ") + column + ", " + verdict +
                                               ", COUNT(*)" + of_watched))
      stored_counts[scope + row[0]][row[1]] = std::stoll(row[2]);
  }
  EXPECT_EQ(shown_counts, stored_counts);
  EXPECT_EQ(seen["verdict_click"]["listed"], seen["verdict_click"]["count"])
      << seen["verdict_click"];
  auto eps = body_json(cli.Get(("/api/campaigns/" + id + "/episodes").c_str()))["episodes"];
  ASSERT_EQ(eps.size(), 24u);
  std::set<std::string> api_ids, grid_ids;
  for (auto& e : eps) api_ids.insert(e["id"].get<std::string>());
  for (auto& c : plots["grid_cells"]) grid_ids.insert(c["id"].get<std::string>());
  EXPECT_EQ(grid_ids, api_ids);

  // The episode viewer showed every stored turn: code, action, verdict and
  // feedback (feedback not kept by the store reads as the viewer's note).
  std::string ep_id = seen["clicked_episode"];
  auto ep = body_json(cli.Get(("/api/episodes/" + ep_id).c_str()));
  ASSERT_TRUE(ep.is_object());
  ASSERT_EQ(seen["turn_buttons"].get<std::size_t>(), ep["turns"].size());
  ASSERT_EQ(seen["turns"].size(), ep["turns"].size());
  ASSERT_FALSE(ep["turns"].empty());
  auto shown = [](const nlohmann::json& v) {
    return v.get<std::string>().empty() ? std::string("–") : v.get<std::string>();
  };
  int with_feedback = 0;
  for (std::size_t i = 0; i < ep["turns"].size(); ++i) {
    auto& turn = seen["turns"][i];
    auto& stored = ep["turns"][i];
    EXPECT_EQ(turn["turn"], stored["turn"]);
    EXPECT_EQ(turn["selected"], std::to_string(stored["turn"].get<int>()));
    EXPECT_EQ(turn["code"], stored["code"]);
    EXPECT_EQ(turn["action"], shown(stored["action"]));
    EXPECT_EQ(turn["verdict"], shown(stored["verdict"]));
    if (!stored["feedback"].get<std::string>().empty()) {
      EXPECT_EQ(turn["feedback"], stored["feedback"]);
      ++with_feedback;
    }
  }
  EXPECT_GE(with_feedback, 1) << ep.dump().substr(0, 3000);

  // A turn without code shows the model's reply, as stored.
  ASSERT_TRUE(seen["no_code"].is_object()) << "no no_code turn in the campaign";
  auto& nc = seen["no_code"];
  auto stored_reply =
      query(d + "/dash.db",
            "SELECT content FROM messages WHERE episode_id = '" + nc["episode"].get<std::string>() +
                "' AND role = 'assistant' AND turn = " + std::to_string(nc["turn"].get<int>()));
  ASSERT_EQ(stored_reply.size(), 1u);
  EXPECT_EQ(nc["shown"]["reply"], stored_reply[0][0]) << nc;
  EXPECT_EQ(nc["shown"]["parse"], "no_code") << nc;
  EXPECT_TRUE(nc["shown"]["code"].is_null()) << nc;

  for (auto& f : seen["screenshots"]) {
    EXPECT_GT(std::filesystem::file_size(f.get<std::string>()), 10000u) << f;
  }
  // The campaign completed (the page waited for it); the report route serves
  // what `korch report` prints for the same database, as JSON and as the page.
  auto done = body_json(cli.Get(("/api/campaigns/" + id).c_str()));
  EXPECT_EQ(done["state"], "completed");
  EXPECT_EQ(done["progress"]["eta_s"], 0.0) << done;  // finished: nothing left, not "unknown"
  auto api_report = body_json(cli.Get(("/api/campaigns/" + id + "/report").c_str()));
  auto [jrc, jtext] = run_capture(
      {KORCH_BIN, "report", "--db", d + "/dash.db", "--campaign", "watched", "--format", "json"},
      d);
  ASSERT_EQ(jrc, 0) << jtext;
  EXPECT_EQ(api_report, nlohmann::json::parse(jtext));
  EXPECT_EQ(api_report["episodes"].size(), 24u);
  auto html = cli.Get(("/api/campaigns/watched/report?format=html"));
  ASSERT_TRUE(html);
  EXPECT_EQ(html->status, 200);
  EXPECT_NE(html->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(html->body.find("<script id=\"korch-report-data\""), std::string::npos);
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
}

}  // namespace
}  // namespace korch::testing
