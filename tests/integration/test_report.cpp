// `korch report --format text|json|html` on a real campaign (korch run with
// the fake LLM and the mock evaluator): the JSON carries the text report's
// numbers and the store's, the HTML page is self-contained and carries the
// same data; when Debian's chromium is installed the page is rendered
// headless and its plots are read back.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/support/required.hpp"
#include "util/fs.hpp"

namespace korch::testing {
namespace {

std::string campaign_toml(const std::string& db, const std::string& base_url) {
  std::ostringstream s;
  s << "name = \"reported\"\ndb_path = \"" << db << "\"\n"
    << "samples_per_task = 3\nmax_turns = 3\nmax_inflight_episodes = 8\nlog_level = \"warn\"\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\nconcurrency = 8\napi_key_env = \"KORCH_TEST_TRAINING_KEY\"\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-2\"\nconcurrency = 8\n"
    << "price_prompt_per_mtok = 3.0\nprice_completion_per_mtok = 5.0\n";
  return s.str();
}

double num(const std::string& s) { return std::stod(s); }

constexpr const char* k_training_secret = "sk-korch-training-secret-42";

std::vector<nlohmann::json> jsonl(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = new TempDir();
    auto d = s_dir->path().string();
    s_llm = new FakeLlmProcess();
    ASSERT_TRUE(s_llm->start(d, {"--script", "kernel"}));
    s_toml = d + "/c.toml";
    s_db = d + "/c.db";
    write_text(s_toml, campaign_toml(s_db, s_llm->base_url()));
    // An API key, as a real campaign has: it must reach no export.
    setenv("KORCH_TEST_TRAINING_KEY", k_training_secret, 1);
    auto [rc, out] = run_capture({KORCH_BIN, "run", s_toml, "--no-progress"}, d);
    ASSERT_EQ(rc, 0) << out;
  }
  static void TearDownTestSuite() {
    delete s_llm;
    delete s_dir;
  }
  static std::string dir() { return s_dir->path().string(); }

  static TempDir* s_dir;
  static FakeLlmProcess* s_llm;
  static std::string s_toml, s_db;
};
TempDir* Report::s_dir = nullptr;
FakeLlmProcess* Report::s_llm = nullptr;
std::string Report::s_toml, Report::s_db;

TEST_F(Report, JsonCarriesTheTextNumbersAndTheStores) {
  auto [trc, text] = run_capture({KORCH_BIN, "report", s_toml}, dir());
  ASSERT_EQ(trc, 0) << text;
  auto [jrc, jtext] = run_capture({KORCH_BIN, "report", s_toml, "--format", "json"}, dir());
  ASSERT_EQ(jrc, 0) << jtext;
  auto j = nlohmann::json::parse(jtext, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << jtext;
  auto [arc, alias] = run_capture({KORCH_BIN, "report", s_toml, "--json"}, dir());
  ASSERT_EQ(arc, 0);
  EXPECT_EQ(alias, jtext) << "--json is --format json";

  EXPECT_EQ(j["campaign"]["name"], "reported");
  ASSERT_EQ(j["models"].size(), 2u);

  // Every number of the text report, block by block, equals the JSON's
  // (rounded as the text prints it).
  std::regex head(R"(model (\S+): (\d+) episodes, (\d+) finished, (\d+) correct)");
  std::regex kv(R"((fast_[0-9.]+|pass@\d+)=([0-9.]+))");
  std::regex geo(R"(geomean speedup \(correct\): (\S+))");
  std::regex calls(
      R"(llm calls (\d+) \(dup_possible (\d+)\), tokens (\d+) in / (\d+) out, cost \$([0-9.]+))");
  std::istringstream in(text);
  std::string line, model;
  int blocks = 0, values = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, head)) {
      model = m[1];
      ++blocks;
      ASSERT_TRUE(j["models"].contains(model)) << model;
      auto& jm = j["models"][model];
      EXPECT_EQ(jm["episodes"].get<int>(), std::stoi(m[2]));
      EXPECT_EQ(jm["finished"].get<int>(), std::stoi(m[3]));
      EXPECT_EQ(jm["correct"].get<int>(), std::stoi(m[4]));
      continue;
    }
    if (model.empty()) {
      // Before the model blocks: the campaign's label, counts and verdict
      // card lines only.
      EXPECT_TRUE(line.rfind("MOCK evaluator", 0) == 0 ||
                  line.rfind("results by evaluator: ", 0) == 0 ||
                  line.rfind("verdicts: ", 0) == 0 || line.rfind("verdict card of ", 0) == 0 ||
                  line.rfind("no card measured for evaluator version ", 0) == 0)
          << line;
      continue;
    }
    auto& jm = j["models"][model];
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kv); it != std::sregex_iterator();
         ++it) {
      std::string key = (*it)[1];
      auto& group = key.rfind("fast_", 0) == 0 ? jm["fast_p"] : jm["pass_at_k"];
      ASSERT_TRUE(group.contains(key)) << key;
      EXPECT_NEAR(group[key].get<double>(), num((*it)[2]), 0.0005) << model << " " << key;
      ++values;
    }
    if (std::regex_search(line, m, geo)) {
      EXPECT_NEAR(jm["geomean_speedup_correct"].get<double>(), num(m[1]), 0.0005);
    }
    if (std::regex_search(line, m, calls)) {
      EXPECT_EQ(jm["llm_calls"].get<int>(), std::stoi(m[1]));
      EXPECT_EQ(jm["dup_possible_calls"].get<int>(), std::stoi(m[2]));
      EXPECT_EQ(jm["prompt_tokens"].get<int>(), std::stoi(m[3]));
      EXPECT_EQ(jm["completion_tokens"].get<int>(), std::stoi(m[4]));
      EXPECT_NEAR(jm["cost_usd"].get<double>(), num(m[5]), 0.00005);
    }
  }
  EXPECT_EQ(blocks, 2);
  EXPECT_GE(values, 2 * 8) << text;  // 6 fast_p + pass@1, pass@2 per model

  // The numbers against the store, read with SQL.
  for (auto& [model, jm] : j["models"].items()) {
    auto q = [&](const std::string& sql) { return query(s_db, sql)[0][0]; };
    auto eps = std::stoi(q("SELECT COUNT(*) FROM episodes WHERE model_id = '" + model + "'"));
    EXPECT_EQ(jm["episodes"].get<int>(), eps);
    auto correct = query(s_db,
                         "SELECT f.speedup FROM finals f JOIN episodes e ON e.id = f.episode_id "
                         "WHERE f.correct = 1 AND e.model_id = '" +
                             model + "' ORDER BY f.speedup");
    EXPECT_EQ(jm["correct"].get<std::size_t>(), correct.size());
    ASSERT_GT(correct.size(), 0u) << "the fake LLM's kernels should pass sometimes";
    ASSERT_LT(correct.size(), static_cast<std::size_t>(eps)) << "and fail sometimes";
    std::vector<double> speedups;
    double log_sum = 0;
    for (auto& r : correct) {
      speedups.push_back(num(r[0]));
      log_sum += std::log(num(r[0]));
    }
    EXPECT_EQ(jm["speedups"].size(), speedups.size());
    for (std::size_t i = 0; i < speedups.size(); ++i)
      EXPECT_NEAR(jm["speedups"][i].get<double>(), speedups[i], 1e-9);
    EXPECT_NEAR(jm["geomean_speedup_correct"].get<double>(), std::exp(log_sum / speedups.size()),
                1e-9);
    auto faster = std::count_if(speedups.begin(), speedups.end(), [](double s) { return s > 1; });
    EXPECT_NEAR(jm["fast_p"]["fast_1"].get<double>(), static_cast<double>(faster) / eps, 1e-12);
    EXPECT_NEAR(jm["fast_p"]["fast_0"].get<double>(), static_cast<double>(correct.size()) / eps,
                1e-12);
    EXPECT_EQ(
        jm["prompt_tokens"].get<std::int64_t>(),
        std::stoll(
            q("SELECT SUM(l.prompt_tokens) FROM llm_calls l JOIN episodes e ON e.id = l.episode_id "
              "WHERE e.model_id = '" +
              model + "'")));
  }

  // Per-task status: every episode once, with the store's status and verdict.
  auto rows =
      query(s_db,
            "SELECT e.id, e.task_id, e.status, COALESCE(f.verdict, ''), COALESCE(f.correct, 0) "
            "FROM episodes e LEFT JOIN finals f ON f.episode_id = e.id");
  ASSERT_EQ(j["episodes"].size(), rows.size());
  ASSERT_EQ(rows.size(), 4u * 2 * 3);
  std::map<std::string, nlohmann::json> by_id;
  for (auto& e : j["episodes"]) by_id[e["id"]] = e;
  for (auto& r : rows) {
    ASSERT_TRUE(by_id.count(r[0])) << r[0];
    auto& e = by_id[r[0]];
    EXPECT_EQ(e["task_id"], r[1]);
    EXPECT_EQ(e["status"], r[2]);
    EXPECT_EQ(e["verdict"], r[3]);
    EXPECT_EQ(e["correct"].get<bool>(), r[4] == "1");
  }
  EXPECT_EQ(j["tasks"].size(), 4u);
}

// Issue 48: a mock campaign says so in every format (its numbers are made
// up), and its verdict counts per campaign, model and task are the store's,
// counted here with the test's own SQL.
TEST_F(Report, EveryFormatSaysMockAndCountsVerdictsAsTheStoreDoes) {
  const std::string label = "MOCK evaluator: fake verdicts and speedups";
  auto [trc, text] = run_capture({KORCH_BIN, "report", s_toml}, dir());
  ASSERT_EQ(trc, 0) << text;
  EXPECT_EQ(text.substr(0, text.find('\n')), label) << text;
  auto [jrc, jtext] = run_capture({KORCH_BIN, "report", s_toml, "--format", "json"}, dir());
  ASSERT_EQ(jrc, 0) << jtext;
  auto j = nlohmann::json::parse(jtext);
  EXPECT_EQ(j["mock"], true);
  EXPECT_EQ(j["label"], label);
  const std::string page_path = dir() + "/mock.html";
  auto [hrc, hout] =
      run_capture({KORCH_BIN, "report", s_toml, "--format", "html", "--out", page_path}, dir());
  ASSERT_EQ(hrc, 0) << hout;
  const auto page = slurp(page_path);
  EXPECT_NE(page.find("<p class=\"mock-banner\" id=\"korch-mock-label\">" + label + "</p>"),
            std::string::npos);
  EXPECT_NE(page.find("<title>korch report: reported (MOCK)</title>"), std::string::npos);
  auto [src, status] = run_capture({KORCH_BIN, "status", s_toml}, dir());
  ASSERT_EQ(src, 0) << status;
  EXPECT_NE(status.find("campaign reported (" + j["campaign"]["id"].get<std::string>() + ") [" +
                        label + "]"),
            std::string::npos)
      << status;
  const std::string card = dir() + "/mock-card.json";
  auto [erc, eout] = run_capture({KORCH_BIN, "export", s_toml, "--format", "rl", "--out",
                                  dir() + "/mock-rl.jsonl", "--card", card},
                                 dir());
  ASSERT_EQ(erc, 0) << eout;
  auto c = nlohmann::json::parse(korch::read_file(card).value_or("{}"));
  EXPECT_EQ(c["mock"], true);
  EXPECT_EQ(c["label"], label);

  // Verdict counts: the store's, by the test's own SQL.
  using Counts = std::map<std::string, std::int64_t>;
  auto counts = [](const std::vector<std::vector<std::string>>& rows) {
    std::map<std::string, std::map<std::string, std::int64_t>> out;
    for (auto& r : rows) out[r[0]][r[1]] = std::stoll(r[2]);
    return out;
  };
  const std::string verdict = "CASE WHEN f.verdict = '' THEN 'none' ELSE f.verdict END";
  auto by_campaign =
      counts(query(s_db, "SELECT 'c', " + verdict + ", COUNT(*) FROM finals f GROUP BY 1, 2"));
  auto by_model = counts(query(s_db, "SELECT e.model_id, " + verdict +
                                         ", COUNT(*) FROM finals f JOIN episodes e ON e.id = "
                                         "f.episode_id GROUP BY 1, 2"));
  auto by_task = counts(query(s_db, "SELECT e.task_id, " + verdict +
                                        ", COUNT(*) FROM finals f JOIN episodes e ON e.id = "
                                        "f.episode_id GROUP BY 1, 2"));
  ASSERT_FALSE(by_campaign["c"].empty());
  EXPECT_EQ(j["verdicts"].get<Counts>(), by_campaign["c"]);
  ASSERT_EQ(j["models"].size(), by_model.size());
  for (auto& [model, v] : by_model)
    EXPECT_EQ(j["models"][model]["verdicts"].get<Counts>(), v) << model;
  ASSERT_EQ(j["task_verdicts"].size(), by_task.size());
  for (auto& [task, v] : by_task) EXPECT_EQ(j["task_verdicts"][task].get<Counts>(), v) << task;
  // The text names each count, as `korch status` does.
  std::string line;
  for (auto& [name, n] : by_campaign["c"])
    line += (line.empty() ? "" : ", ") + name + " " + std::to_string(n);
  EXPECT_NE(text.find("\nverdicts: " + line + "\n"), std::string::npos) << text;
  EXPECT_NE(status.find("  verdicts: " + line + "\n"), std::string::npos) << status;

  // Which evaluator judged each result: the store's evaluation report says.
  auto modes = query(s_db,
                     "SELECT f.episode_id, CASE WHEN json_extract(v.report_json, '$.mock') THEN "
                     "'mock' ELSE json_extract(v.report_json, '$.mode') END FROM finals f JOIN "
                     "evaluations v ON v.request_id = f.request_id WHERE v.state = 'done'");
  ASSERT_FALSE(modes.empty());
  std::map<std::string, std::string> mode_of;
  for (auto& r : modes) mode_of[r[0]] = r[1];
  for (auto& e : j["episodes"]) {
    auto it = mode_of.find(e["id"].get<std::string>());
    EXPECT_EQ(e["evaluator"], it == mode_of.end() ? "" : it->second) << e;
  }
  EXPECT_EQ(j["evaluators"], nlohmann::json({{"mock", modes.size()}}));
}

// A campaign whose results came from two evaluators says which came from
// which: one final submission's evaluation row rewritten as a cpu evaluator
// writes it (mode "cpu", mock false), in a copy of the store.
TEST_F(Report, MixedEvaluatorsSayWhichResultCameFromWhich) {
  const std::string copy = dir() + "/mixed.db";
  std::filesystem::remove(copy);
  sqlite3* h = nullptr;
  auto exec = [&](const std::string& db, int flags, const std::string& sql) {
    ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, flags, nullptr), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(h);
  };
  exec(s_db, SQLITE_OPEN_READONLY, "VACUUM INTO '" + copy + "'");
  const auto judged = query(copy,
                            "SELECT f.episode_id, f.request_id FROM finals f JOIN evaluations v ON "
                            "v.request_id = f.request_id WHERE v.state = 'done' ORDER BY 1");
  ASSERT_GE(judged.size(), 2u);
  exec(copy, SQLITE_OPEN_READWRITE,
       "UPDATE evaluations SET report_json = json_set(report_json, '$.mode', 'cpu', '$.mock', "
       "json('false')) WHERE request_id = '" +
           judged[0][1] + "'");
  auto [jrc, jtext] = run_capture({KORCH_BIN, "report", "--db", copy, "--format", "json"}, dir());
  ASSERT_EQ(jrc, 0) << jtext;
  auto j = nlohmann::json::parse(jtext);
  EXPECT_EQ(j["evaluators"], nlohmann::json({{"cpu", 1}, {"mock", judged.size() - 1}}));
  EXPECT_EQ(j["mock"], true);  // the others are still made up
  for (auto& e : j["episodes"]) {
    if (e["id"] == judged[0][0]) EXPECT_EQ(e["evaluator"], "cpu");
    if (e["id"] == judged[1][0]) EXPECT_EQ(e["evaluator"], "mock");
  }
  auto [trc, text] = run_capture({KORCH_BIN, "report", "--db", copy}, dir());
  ASSERT_EQ(trc, 0) << text;
  EXPECT_NE(text.find("results by evaluator: cpu 1, mock " + std::to_string(judged.size() - 1)),
            std::string::npos)
      << text;
}

TEST_F(Report, HtmlIsOneSelfContainedFileWithTheData) {
  auto out = dir() + "/report.html";
  auto [rc, text] =
      run_capture({KORCH_BIN, "report", s_toml, "--format", "html", "--out", out}, dir());
  ASSERT_EQ(rc, 0) << text;
  auto page = slurp(out);
  ASSERT_GT(page.size(), 2000u);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  // Nothing loaded from elsewhere: no src/href at all, no @import, no url().
  std::smatch m;
  EXPECT_FALSE(std::regex_search(page, m, std::regex(R"((src|href)\s*=)", std::regex::icase)))
      << m.str();
  // No URL but the SVG namespace name (an identifier, never fetched).
  auto stripped = std::regex_replace(page, std::regex("http://www\\.w3\\.org/2000/svg"), "");
  EXPECT_EQ(stripped.find("https://"), std::string::npos);
  EXPECT_EQ(stripped.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_NE(page.find("KorchPlots.renderReport"), std::string::npos);
  // The embedded data is the JSON report.
  const std::string open = "<script id=\"korch-report-data\" type=\"application/json\">";
  auto a = page.find(open);
  ASSERT_NE(a, std::string::npos);
  auto b = page.find("</script>", a);
  auto data =
      nlohmann::json::parse(page.substr(a + open.size(), b - a - open.size()), nullptr, false);
  ASSERT_FALSE(data.is_discarded());
  auto [jrc, jtext] = run_capture({KORCH_BIN, "report", s_toml, "--format", "json"}, dir());
  ASSERT_EQ(jrc, 0);
  EXPECT_EQ(data, nlohmann::json::parse(jtext));
  // The text report as the no-script fallback.
  auto [trc, ttext] = run_capture({KORCH_BIN, "report", s_toml}, dir());
  EXPECT_NE(page.find(ttext.substr(0, ttext.find('\n'))), std::string::npos);

  // Rendered by a real browser (when installed): the three plots and a grid
  // cell per episode, with the numbers of the data.
  const char* chromium = std::getenv("KORCH_CHROMIUM");
  std::string browser = chromium ? chromium : "/usr/bin/chromium";
  if (!std::filesystem::exists(browser))
    KORCH_SKIP_OR_FAIL(
        "chromium not installed (apt-get install chromium): the page was not rendered");
  auto [crc, dom] =
      run_capture({browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   "--user-data-dir=" + dir() + "/chromium-profile", "--dump-dom", "file://" + out},
                  dir());
  ASSERT_EQ(crc, 0) << dom.substr(0, 2000);
  for (const char* plot : {"data-plot=\"speedup-histogram\"", "data-plot=\"fast-p\"",
                           "data-plot=\"cost\"", "data-plot=\"task-grid\"", "data-plot=\"summary\"",
                           "data-plot=\"verdicts\"", "class=\"mock-tag\""}) {
    EXPECT_NE(dom.find(plot), std::string::npos) << plot;
  }
  std::size_t cells = 0;
  for (auto& e : data["episodes"])
    cells += dom.find("data-episode=\"" + e["id"].get<std::string>() + "\"") != std::string::npos;
  EXPECT_EQ(cells, data["episodes"].size());
  // The histogram's bars add up to the correct submissions with a speedup.
  std::size_t bars = 0;
  std::regex bar(R"re(class="bar"[^>]*data-model="m[12]" data-count="(\d+)")re");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), bar); it != std::sregex_iterator();
       ++it) {
    bars += std::stoul((*it)[1]);
  }
  EXPECT_EQ(bars,
            data["models"]["m1"]["speedups"].size() + data["models"]["m2"]["speedups"].size());
  // A fast_p dot per threshold and model, at the report's values.
  std::regex dot(R"re(data-model="(m[12])" data-p="([0-9.]+)" data-value="([0-9.e-]+)")re");
  int dots = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), dot); it != std::sregex_iterator();
       ++it) {
    auto key = "fast_" + (*it)[2].str();
    EXPECT_NEAR(num((*it)[3]), data["models"][(*it)[1].str()]["fast_p"][key].get<double>(), 1e-9)
        << key;
    ++dots;
  }
  EXPECT_EQ(dots, 2 * 6);
  // The strategy curves (issue #37): against spend and GPU-hours the last
  // point, against rounds one point per round, at the data's fast_1.
  std::regex curve(R"re(data-axis="(\w+)" data-x="([0-9.e-]+)" data-fast1="([0-9.e-]+)")re");
  std::map<std::string, int> curve_points;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), curve); it != std::sregex_iterator();
       ++it) {
    ++curve_points[(*it)[1]];
    auto& last = data["strategy"]["by_episode"].back();
    EXPECT_NEAR(num((*it)[3]), last["fast_p"]["fast_1"].get<double>(), 1e-9) << (*it)[1];
  }
  EXPECT_EQ(curve_points["cost_usd"], 1);
  EXPECT_EQ(curve_points["gpu_hours"], 1);
  EXPECT_EQ(curve_points["round"], static_cast<int>(data["strategy"]["by_round"].size()));
}

// Issue #37: the strategy section of the report. This campaign has no
// [strategy] table: grid, one round, and the curve's numbers are the
// store's, per task (the best kernel of any model and sample).
TEST_F(Report, StrategyCurvesAreTheStoresPerTaskNumbers) {
  auto [jrc, jtext] = run_capture({KORCH_BIN, "report", s_toml, "--format", "json"}, dir());
  ASSERT_EQ(jrc, 0) << jtext;
  auto j = nlohmann::json::parse(jtext);
  auto& st = j["strategy"];
  EXPECT_EQ(st["kind"], "grid");
  EXPECT_EQ(st["decisions"], 0);
  ASSERT_EQ(st["by_round"].size(), 1u);
  auto episodes = std::stoi(query(s_db, "SELECT COUNT(*) FROM finals")[0][0]);
  ASSERT_EQ(st["by_episode"].size(), static_cast<std::size_t>(episodes));
  auto& end = st["by_round"][0];
  // The last round ends with the last episode: the same point, to the bit
  // (each curve adds the costs in its own order, through one exact summation).
  EXPECT_EQ(end, st["by_episode"].back());
  EXPECT_EQ(end["episodes"], episodes);
  EXPECT_EQ(end["round"], 0);
  EXPECT_NEAR(end["cost_usd"].get<double>(),
              num(query(s_db, "SELECT SUM(cost_usd) FROM llm_calls")[0][0]), 1e-9);
  const double tasks = 4;
  auto share = [&](const std::string& where) {
    return std::stoi(query(s_db,
                           "SELECT COUNT(DISTINCT e.task_id) FROM finals f JOIN episodes e "
                           "ON e.id = f.episode_id WHERE f.correct = 1" +
                               where)[0][0]) /
           tasks;
  };
  EXPECT_NEAR(end["fast_p"]["fast_0"].get<double>(), share(""), 1e-12);
  EXPECT_NEAR(end["fast_p"]["fast_1"].get<double>(), share(" AND f.speedup > 1"), 1e-12);
  EXPECT_NEAR(end["fast_p"]["fast_2"].get<double>(), share(" AND f.speedup > 2"), 1e-12);
  // Spend and fast_p never fall along the curve.
  double cost = 0, f1 = 0;
  for (auto& p : st["by_episode"]) {
    EXPECT_GE(p["cost_usd"].get<double>(), cost);
    EXPECT_GE(p["fast_p"]["fast_1"].get<double>(), f1);
    cost = p["cost_usd"].get<double>();
    f1 = p["fast_p"]["fast_1"].get<double>();
  }
  // The text report says the same in its strategy block.
  auto [trc, text] = run_capture({KORCH_BIN, "report", s_toml}, dir());
  ASSERT_EQ(trc, 0);
  EXPECT_NE(text.find("strategy grid: 0 decision(s)"), std::string::npos) << text;
  char last_point[32];
  std::snprintf(last_point, sizeof last_point, "fast_1: %.3f\n", f1);
  EXPECT_NE(text.find(last_point), std::string::npos) << text;
  // Every export record of an episode has its round (0) and no seed.
  for (auto& rec : jsonl(run_capture({KORCH_BIN, "export", s_toml}, dir()).second)) {
    if (rec["type"] != "episode") continue;
    EXPECT_EQ(rec["round"], 0);
    EXPECT_TRUE(rec["seed_episode_id"].is_null());
  }
}

// Issue #37: the SFT export, checked by an independent reader against a
// JSON schema written from OpenAI's chat fine-tuning format
// (training/sft_schema.json, python3-jsonschema): messages in order, the
// last one the model's, no code twice, no secret; filters and the card.
TEST_F(Report, SftExportMatchesTheFineTuningSchema) {
  const std::string out = dir() + "/sft.jsonl", card = dir() + "/card.json";
  auto [rc, log] = run_capture(
      {KORCH_BIN, "export", s_toml, "--format", "sft", "--out", out, "--card", card}, dir());
  ASSERT_EQ(rc, 0) << log;
  auto [crc, check] = run_capture({"/usr/bin/python3", KORCH_TRAINING_DIR "/check_sft.py", out,
                                   KORCH_TRAINING_DIR "/sft_schema.json", k_training_secret},
                                  dir());
  ASSERT_EQ(crc, 0) << check;
  const auto recs = jsonl(korch::read_file(out).value_or(""));
  ASSERT_FALSE(recs.empty());
  // One record per episode with a scored final (a fallback's included),
  // none repeating code: the store says how many distinct final codes there are.
  const auto distinct = query(s_db,
                              "SELECT COUNT(DISTINCT ev.code_sha) FROM finals f JOIN evaluations "
                              "ev ON ev.request_id = f.request_id WHERE f.request_id != ''");
  ASSERT_EQ(distinct.size(), 1u);
  EXPECT_EQ(std::to_string(recs.size()), distinct[0][0]);
  for (const auto& r : recs) {
    const auto& m = r["metadata"];
    const auto fin =
        query(s_db, "SELECT verdict, correct, reward FROM finals WHERE episode_id = '" +
                        m["episode_id"].get<std::string>() + "'");
    ASSERT_EQ(fin.size(), 1u);
    EXPECT_EQ(m["verdict"], fin[0][0]);
    EXPECT_EQ(m["correct"].get<bool>(), fin[0][1] == "1");
    EXPECT_NEAR(m["reward"].get<double>(), num(fin[0][2]), 1e-9);
    EXPECT_EQ(r["messages"][0]["role"], "system");
  }
  const auto c = nlohmann::json::parse(korch::read_file(card).value_or(""));
  EXPECT_EQ(c["counts"]["records"].get<std::size_t>(), recs.size());
  EXPECT_EQ(c["evaluator_modes"], nlohmann::json::array({"mock"}));
  EXPECT_EQ(c["config"]["name"], "reported");
  EXPECT_EQ(korch::read_file(card).value_or("").find(k_training_secret), std::string::npos);

  // --correct-only --model m1 --openai-only: a subset, pure OpenAI shape.
  const std::string sub = dir() + "/sft-m1.jsonl";
  auto [src, slog] = run_capture({KORCH_BIN, "export", s_toml, "--format", "sft", "--correct-only",
                                  "--model", "m1", "--openai-only", "--out", sub},
                                 dir());
  ASSERT_EQ(src, 0) << slog;
  const auto subset = jsonl(korch::read_file(sub).value_or(""));
  std::size_t want = 0;
  for (const auto& r : recs)
    want += r["metadata"]["correct"].get<bool>() && r["metadata"]["model_id"] == "m1";
  EXPECT_EQ(subset.size(), want);
  for (const auto& r : subset) EXPECT_EQ(r.size(), 1u) << r.dump().substr(0, 200);  // messages only
  auto [vrc, vcheck] = run_capture({"/usr/bin/python3", KORCH_TRAINING_DIR "/check_sft.py", sub,
                                    KORCH_TRAINING_DIR "/sft_schema.json"},
                                   dir());
  EXPECT_EQ(vrc, 0) << vcheck;
}

// The RL export: one record per scored action (every turn with code, CHECK
// or SUBMIT, and each fallback SUBMIT), the evaluation's verdict and its
// class, a reward only for a SUBMIT. The store's own count: turns with code
// plus finals that no turn names. (check_training.py, test_training_export,
// checks every field against the store.)
TEST_F(Report, RlExportHasOneRecordPerScoredAction) {
  auto [rc, text] = run_capture({KORCH_BIN, "export", s_toml, "--format", "rl"}, dir());
  ASSERT_EQ(rc, 0) << text;
  std::vector<nlohmann::json> recs;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') recs.push_back(nlohmann::json::parse(line));
  const auto turns = query(s_db, "SELECT COUNT(*) FROM turns WHERE parse_status = 'code'");
  const auto fallbacks =
      query(s_db,
            "SELECT COUNT(*) FROM finals f WHERE f.request_id != '' AND NOT EXISTS (SELECT 1 "
            "FROM turns t WHERE t.eval_request_id = f.request_id)");
  EXPECT_EQ(recs.size(), std::stoul(turns[0][0]) + std::stoul(fallbacks[0][0]));
  int submits = 0;
  for (const auto& r : recs) {
    ASSERT_TRUE(r["action"] == "check" || r["action"] == "submit") << r.dump().substr(0, 300);
    EXPECT_TRUE(r["verdict_class"].is_string()) << r.dump().substr(0, 300);
    if (r["action"] == "submit") {
      ++submits;
      EXPECT_TRUE(r["scored"].get<bool>());
    } else {
      EXPECT_EQ(r["reward"], 0.0) << r.dump().substr(0, 300);
    }
    EXPECT_FALSE(r["code"].get<std::string>().empty());
  }
  EXPECT_EQ(std::to_string(submits),
            query(s_db, "SELECT COUNT(*) FROM finals WHERE request_id != ''")[0][0]);
  EXPECT_EQ(text.find(k_training_secret), std::string::npos);
}

TEST_F(Report, RejectsAnUnknownFormat) {
  auto [rc, out] = run_capture({KORCH_BIN, "report", s_toml, "--format", "pdf"}, dir());
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--format takes text, json, html, not 'pdf'"), std::string::npos) << out;
}

}  // namespace
}  // namespace korch::testing

namespace korch::testing {
namespace {

// Writes with the SQLite C API (the test's own writer, not korch's store).
void exec_sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << "\n" << sql;
  sqlite3_free(err);
  sqlite3_close(h);
}

// The 95% Wilson interval, the test's own arithmetic.
std::pair<double, double> wilson(int x, int n) {
  const double z = 1.96, p = static_cast<double>(x) / n, d = 1 + z * z / n;
  const double c = (p + z * z / (2.0 * n)) / d;
  const double h = z * std::sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
  return {std::max(0.0, c - h), std::min(1.0, c + h)};
}

}  // namespace

// Issue 51: the verdict card of the evaluator version that scored a campaign
// is in every report format and in the export's dataset card; without one,
// each says "no card measured for evaluator version X" and shows no number.
// The versions come from the test's own SQL; the card is written into
// verdict_cards with the test's own SQL (as `korch audit --store` would),
// beside a decoy card of another version that must not show.
TEST_F(Report, TheVerdictCardOfTheScoringEvaluatorIsShownOrSaidToBeMissing) {
  auto versions = query(s_db,
                        "SELECT DISTINCT evaluator_version FROM evaluations WHERE state = 'done' "
                        "ORDER BY 1");
  ASSERT_EQ(versions.size(), 1u);
  const std::string v = versions[0][0];
  ASSERT_FALSE(v.empty());
  auto rules_rows = query(s_db,
                          "SELECT DISTINCT json_extract(report_json, '$.evidence.rules.rules_version') "
                          "FROM evaluations WHERE state = 'done'");
  std::string rules;
  for (auto& r : rules_rows)
    if (!r[0].empty()) rules = r[0];
  const std::string missing = "no card measured for evaluator version " + v;
  auto reports = [&](const std::string& tag) {
    std::map<std::string, std::string> out;
    auto [trc, text] = run_capture({KORCH_BIN, "report", s_toml}, dir());
    EXPECT_EQ(trc, 0) << text;
    out["text"] = text;
    auto [jrc, json] = run_capture({KORCH_BIN, "report", s_toml, "--format", "json"}, dir());
    EXPECT_EQ(jrc, 0) << json;
    out["json"] = json;
    const std::string page = dir() + "/card-" + tag + ".html";
    auto [hrc, hout] =
        run_capture({KORCH_BIN, "report", s_toml, "--format", "html", "--out", page}, dir());
    EXPECT_EQ(hrc, 0) << hout;
    out["html"] = slurp(page);
    const std::string card = dir() + "/dataset-card-" + tag + ".json";
    auto [erc, eout] = run_capture({KORCH_BIN, "export", s_toml, "--format", "sft", "--out",
                                    dir() + "/card-" + tag + ".jsonl", "--card", card},
                                   dir());
    EXPECT_EQ(erc, 0) << eout;
    out["card"] = korch::read_file(card).value_or("{}");
    return out;
  };

  // No card: said plainly, no rate shown.
  auto none = reports("none");
  EXPECT_NE(none["text"].find(missing), std::string::npos) << none["text"];
  EXPECT_EQ(none["text"].find("attack success"), std::string::npos) << none["text"];
  EXPECT_NE(none["html"].find(missing), std::string::npos);
  for (const char* key : {"json", "card"}) {
    auto j = nlohmann::json::parse(none[key]);
    ASSERT_EQ(j["verdict_cards"].size(), 1u) << key << ": " << j["verdict_cards"].dump();
    EXPECT_EQ(j["verdict_cards"][0]["evaluator_version"], v) << key;
    EXPECT_EQ(j["verdict_cards"][0]["measured"], false) << key;
    EXPECT_TRUE(j["verdict_cards"][0]["cards"].empty()) << key;
    EXPECT_NE(j["verdict_cards"][0]["text"].get<std::string>().find(missing), std::string::npos);
  }

  // The card of this version (and a decoy of another), written with SQL.
  const int ax = 0, an = 73, hx = 1, hn = 174;
  auto [alo, ahi] = wilson(ax, an);
  auto [hlo, hhi] = wilson(hx, hn);
  nlohmann::json card = {
      {"attack_success", {{"x", ax}, {"n", an}, {"ci95", {alo, ahi}}}},
      {"false_rejection", {{"x", hx}, {"n", hn}, {"ci95", {hlo, hhi}}}}};
  auto insert = [&](const std::string& version, int n_attacks) {
    exec_sql(s_db,
             "INSERT INTO verdict_cards VALUES ('" + version + "', '" + rules +
                 "', 'test device', 'cpu', " + std::to_string(ax) + ", " +
                 std::to_string(n_attacks) + ", " + std::to_string(hx) + ", " +
                 std::to_string(hn) + ", '" + card.dump() + "', 1796000000)");
  };
  insert(v, an);
  insert(v + "-decoy", 999);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "attack success %d/%d (%.1f%%, 95%% CI %.1f-%.1f%%), false rejection %d/%d (%.1f%%, "
                "95%% CI %.1f-%.1f%%)",
                ax, an, 100.0 * ax / an, 100 * alo, 100 * ahi, hx, hn, 100.0 * hx / hn, 100 * hlo,
                100 * hhi);
  const std::string rates = buf;
  auto shown = reports("card");
  EXPECT_NE(shown["text"].find("verdict card of " + v + " (rules "), std::string::npos)
      << shown["text"];
  EXPECT_NE(shown["text"].find(rates), std::string::npos) << rates << "\n" << shown["text"];
  EXPECT_EQ(shown["text"].find(missing), std::string::npos);
  EXPECT_EQ(shown["text"].find("999"), std::string::npos) << "the decoy's card shows";
  EXPECT_NE(shown["html"].find(rates), std::string::npos);
  for (const char* key : {"json", "card"}) {
    auto j = nlohmann::json::parse(shown[key]);
    ASSERT_EQ(j["verdict_cards"].size(), 1u) << key;
    const auto& line = j["verdict_cards"][0];
    EXPECT_EQ(line["measured"], true) << key;
    ASSERT_EQ(line["cards"].size(), 1u) << key << ": " << line.dump();
    const auto& c = line["cards"][0];
    EXPECT_EQ(c["evaluator_version"], v);
    EXPECT_EQ(c["device"], "test device");
    EXPECT_EQ(c["attack_success"], (nlohmann::json{{"x", ax}, {"n", an}})) << key;
    EXPECT_EQ(c["false_rejection"], (nlohmann::json{{"x", hx}, {"n", hn}})) << key;
    EXPECT_EQ(c["card"], card) << key;
    EXPECT_NE(line["text"].get<std::string>().find(rates), std::string::npos) << key;
  }
  exec_sql(s_db, "DELETE FROM verdict_cards");
}

}  // namespace korch::testing
