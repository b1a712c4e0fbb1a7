// `korch serve` against real processes on loopback (issue 11): every route of
// the API, the OpenAPI file against the registered routes, bad input (each a
// clear 4xx, the daemon keeps running, nothing stored changes), SIGTERM with
// an open progress stream, and kill -9 of the daemon mid-campaign followed by
// a restart whose export equals an uninterrupted `korch run`'s.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "tests/integration/export_fixture.hpp"
#include "tests/integration/serve_fixture.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr const char* k_token = "test-token-0123456789abcdef";

std::string campaign_toml(const std::string& name, const std::string& base_url, int samples,
                          int max_turns, double eval_latency_s, const std::string& db = "") {
  std::ostringstream s;
  s << "name = \"" << name << "\"\n";
  if (!db.empty()) s << "db_path = \"" << db << "\"\n";
  s << "samples_per_task = " << samples << "\nmax_turns = " << max_turns
    << "\nmax_inflight_episodes = 8\n"
    << "log_level = \"warn\"\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = " << eval_latency_s << "\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\nprice_prompt_per_mtok = "
       "1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-2\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\n"
    << "[[events]]\nkind = \"compaction\"\nturn = 3\nsamples = [1]\n";
  return s.str();
}

// `korch serve` on `db` (SQLite path or PostgreSQL URL) with the API token k_token.
bool start_with_token(ServeProcess& serve, const std::string& d, const std::string& db,
                      const std::vector<std::string>& extra = {}) {
  return serve.start(d, db, extra, {{"KORCH_API_TOKEN", k_token}});
}

// Polls GET /api/campaigns/{id} until its state is `state`.
bool wait_state(ServeProcess& serve, const std::string& id, const std::string& state,
                std::chrono::seconds timeout = std::chrono::seconds(120)) {
  auto cli = serve.client(k_token);
  return wait_until(
      serve.process(),
      [&] {
        auto j = body_json(cli.Get(("/api/campaigns/" + id).c_str()));
        return j.is_object() && j.value("state", "") == state;
      },
      timeout);
}

std::string rows(const std::string& db, const std::string& table) {
  return poll_value(db, "SELECT COUNT(*) FROM " + table).value_or("-");
}

std::vector<nlohmann::json> export_db(const std::string& dir, const std::string& db,
                                      const std::string& name) {
  auto [rc, out] =
      run_capture({KORCH_BIN, "export", "--db", db, "--campaign", name, "--format", "jsonl"}, dir);
  EXPECT_EQ(rc, 0) << out;
  std::vector<nlohmann::json> records;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    for (auto& f : reports::run_describing_fields()) j.erase(f);
    records.push_back(std::move(j));
  }
  return records;
}

// POSTs `toml` as a new campaign; `id` is the id the daemon gives it.
void post_campaign(httplib::Client& cli, const std::string& toml, std::string& id) {
  auto r = cli.Post("/api/campaigns", toml, "application/toml");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  id = body_json(r)["id"];
}

// `korch run` of `toml` (campaign `name` on d/ref.db), uninterrupted: its
// export is the reference a killed daemon's run must end with.
void run_reference(const std::string& d, const std::string& name, const std::string& toml,
                   std::vector<nlohmann::json>& reference) {
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, toml);
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  reference = export_db(d, d + "/ref.db", name);
}

// kill -9 of the daemon: it dies of the signal.
void sigkill(ServeProcess& serve) {
  serve.process().signal(SIGKILL);
  ASSERT_EQ(serve.process().wait(), 128 + SIGKILL);
}

// The campaign runs to "completed", then SIGTERM stops the daemon cleanly.
void complete_and_stop(ServeProcess& serve, const std::string& id) {
  ASSERT_TRUE(wait_state(serve, id, "completed")) << serve.err();
  ASSERT_EQ(serve.terminate(), 0) << serve.err();
}

// A temp dir (m_dir) for each test, and in it the fake LLM server (m_llm) the
// campaigns call and the daemon (m_serve) on m_db with the token k_token, for
// the tests that start them.
class ServeApi : public ::testing::Test {
 protected:
  // Starts m_llm: `script` replies, each after `latency_ms`.
  void start_llm(const std::string& script, int latency_ms) {
    ASSERT_TRUE(
        m_llm.start(m_dir, {"--script", script, "--latency-ms", std::to_string(latency_ms)}));
  }

  // Starts m_serve with the flags `extra`.
  void start_serve(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(start_with_token(m_serve, m_dir, m_db, extra)) << m_serve.err();
  }

  TempDir m_temp;
  const std::string m_dir = m_temp.path().string();
  const std::string m_db = m_dir + "/serve.db";
  FakeLlmProcess m_llm;
  ServeProcess m_serve;
};

// kill -9 of the daemon mid-campaign and restarts.
class ServeKill : public ServeApi {
 protected:
  // Starts `korch serve` on `db` (SQLite path or PostgreSQL URL) with the
  // flags `extra` again and again; the first daemon is posted the campaign
  // `toml` (its id: m_id). While fewer than `max_kills` were killed, a daemon
  // that `kill_point` (waiting in it) lets go before the campaign completed
  // is killed with SIGKILL (counted in m_kills); the next daemon runs the
  // campaign to "completed" and is stopped with SIGTERM.
  void kill_and_restart(const std::string& db, const std::vector<std::string>& extra,
                        const std::string& toml, int max_kills,
                        const std::function<bool(ServeProcess&)>& kill_point) {
    for (;;) {
      ServeProcess serve;
      ASSERT_TRUE(start_with_token(serve, m_dir, db, extra)) << serve.err();
      auto cli = serve.client(k_token);
      if (m_id.empty()) {
        ASSERT_NO_FATAL_FAILURE(post_campaign(cli, toml, m_id));
      }
      if (m_kills < max_kills && kill_point(serve)) {
        auto state = body_json(cli.Get(("/api/campaigns/" + m_id).c_str()));
        if (state.value("state", "") != "completed") {
          ASSERT_NO_FATAL_FAILURE(sigkill(serve));
          ++m_kills;
          continue;
        }
      }
      ASSERT_NO_FATAL_FAILURE(complete_and_stop(serve, m_id));
      return;
    }
  }

  std::string m_id;
  int m_kills = 0;
};

// Waits while `serve` runs until `turns()` has grown by 5.
bool five_more_turns(ServeProcess& serve, const std::function<int()>& turns) {
  const int start_turns = turns();
  return wait_until(serve.process(), [&] { return turns() >= start_turns + 5; });
}

TEST_F(ServeApi, OpenApiFileListsExactlyTheRegisteredRoutes) {
  TempDir dir;
  auto [rc, out] = run_capture({KORCH_BIN, "serve", "--print-routes"}, dir.path().string());
  ASSERT_EQ(rc, 0) << out;
  std::set<std::string> registered;
  std::istringstream in(out);
  std::string port, method, path;
  while (in >> port >> method >> path) {
    if (port == "api") registered.insert(method + " " + path);
  }
  ASSERT_GE(registered.size(), 10u);
  std::ifstream f(KORCH_SOURCE_DIR "/docs/openapi.json");
  ASSERT_TRUE(f) << "docs/openapi.json is missing";
  auto spec = nlohmann::json::parse(f);
  std::set<std::string> documented;
  for (auto& [p, ops] : spec.at("paths").items()) {
    for (auto& [m, op] : ops.items()) {
      std::string upper = m;
      for (auto& ch : upper) ch = static_cast<char>(std::toupper(ch));
      documented.insert(upper + " " + p);
      EXPECT_TRUE(op.contains("responses")) << upper << " " << p;
    }
  }
  EXPECT_EQ(documented, registered);
  // docs/api.md names every route too.
  auto md = slurp(KORCH_SOURCE_DIR "/docs/api.md");
  for (auto& r : registered) EXPECT_NE(md.find(r), std::string::npos) << "docs/api.md lacks " << r;
}

// docs/config.md's table of serve keys lists every key with its flag.
TEST_F(ServeApi, ConfigDocListsEveryServeKey) {
  TempDir dir;
  auto [rc, out] = run_capture({KORCH_BIN, "serve", "--print-keys"}, dir.path().string());
  ASSERT_EQ(rc, 0) << out;
  auto md = slurp(KORCH_SOURCE_DIR "/docs/config.md");
  std::istringstream in(out);
  int keys = 0;
  for (std::string line; std::getline(in, line); ++keys) {
    auto name = line.substr(0, line.find('\t'));
    auto flag = line.substr(line.find('\t') + 1);
    flag = flag.substr(0, flag.find('\t'));
    EXPECT_NE(md.find("| `" + name + "` | `" + flag + "` |"), std::string::npos)
        << "docs/config.md lacks serve key " << name;
  }
  EXPECT_GE(keys, 30);
}

TEST_F(ServeApi, RefusesANonLoopbackAddressWithoutAToken) {
  TempDir dir;
  auto d = dir.path().string();
  auto [rc, out] = run_capture({KORCH_BIN, "serve", "--db", d + "/x.db", "--listen", "0.0.0.0:0"},
                               d, {{"KORCH_API_TOKEN", ""}});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("without a token"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(d + "/x.db"));
}

// Issue 48: `korch serve` makes its db's folder, and a port it cannot take
// is refused with the reason (exit 3: the address may be right, later).
TEST_F(ServeApi, MakesTheDbFolderAndSaysWhyItCannotListen) {
  TempDir dir;
  auto d = dir.path().string();
  const auto db = d + "/runs/today/k.db";
  auto out = d + "/serve.out", err = d + "/serve.err";
  // --set takes a serve key as every other command takes a config key.
  auto p = Process::start({KORCH_BIN, "serve", "--db", db, "--listen", "127.0.0.1:0", "--set",
                           "env_listen=127.0.0.1:0"},
                          out, err, {{"KORCH_API_TOKEN", ""}});
  ASSERT_TRUE(wait_until(
      p, [&] { return slurp(out).find("LISTEN env ") != std::string::npos; },
      std::chrono::seconds(30)))
      << slurp(err);
  EXPECT_TRUE(std::filesystem::exists(db));
  // A second daemon on that port (another db): the reason, not just "cannot listen".
  const auto text = slurp(out);
  const auto port = text.substr(text.find("LISTEN api ") + 11, text.find('\n') - 11);
  auto [rc, second] =
      run_capture({KORCH_BIN, "serve", "--db", d + "/other.db", "--listen", "127.0.0.1:" + port}, d,
                  {{"KORCH_API_TOKEN", ""}});
  EXPECT_EQ(rc, 3) << second;
  EXPECT_NE(second.find("cannot listen on 127.0.0.1:" + port + ": Address already in use"),
            std::string::npos)
      << second;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << slurp(err);
}

// One token rule wherever the token comes from (issue 34): beyond loopback
// at least 16 characters, from KORCH_API_TOKEN as from --token-file; on
// loopback a short token is the user's business.
TEST_F(ServeApi, OneTokenRuleWhereverTheTokenComesFrom) {
  TempDir dir;
  auto d = dir.path().string();
  write_text(d + "/short.token", "abc\n");
  write_text(d + "/long.token", std::string(k_token) + "\n");
  struct Case {
    std::vector<std::string> flags;
    std::map<std::string, std::string> env;
    bool starts;
  };
  const std::vector<Case> cases = {
      {{"--listen", "0.0.0.0:0"}, {{"KORCH_API_TOKEN", "abc"}}, false},
      {{"--listen", "0.0.0.0:0", "--token-file", d + "/short.token"},
       {{"KORCH_API_TOKEN", ""}},
       false},
      {{"--env-listen", "0.0.0.0:0"}, {{"KORCH_API_TOKEN", "abc"}}, false},
      {{"--listen", "127.0.0.1:0", "--token-file", d + "/short.token"},
       {{"KORCH_API_TOKEN", ""}},
       true},
      {{"--listen", "127.0.0.1:0"}, {{"KORCH_API_TOKEN", "abc"}}, true},
      {{"--listen", "0.0.0.0:0", "--token-file", d + "/long.token"},
       {{"KORCH_API_TOKEN", ""}},
       true},
      {{"--listen", "0.0.0.0:0"}, {{"KORCH_API_TOKEN", k_token}}, true},
  };
  int i = 0;
  for (auto& c : cases) {
    auto db = d + "/t" + std::to_string(i++) + ".db";
    std::vector<std::string> argv = {KORCH_BIN, "serve", "--db", db};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    if (std::find(c.flags.begin(), c.flags.end(), "--listen") == c.flags.end()) {
      argv.insert(argv.end(), {"--listen", "127.0.0.1:0"});
    }
    std::string what;
    for (auto& a : argv) what += a + " ";
    auto out = db + ".out", err = db + ".err";
    auto p = Process::start(argv, out, err, c.env);
    bool listening = wait_until(
        p, [&] { return slurp(out).find("LISTEN api ") != std::string::npos; },
        std::chrono::seconds(30));
    if (c.starts) {
      EXPECT_TRUE(listening) << what << slurp(err);
      p.signal(SIGTERM);
      EXPECT_EQ(p.wait(), 0) << what << slurp(err);
    } else {
      EXPECT_FALSE(listening) << what;
      if (listening) p.signal(SIGTERM);  // a daemon that should not have started
      EXPECT_EQ(p.wait(), 2) << what << slurp(err);
      EXPECT_NE(slurp(err).find("16"), std::string::npos) << what << slurp(err);
      EXPECT_FALSE(std::filesystem::exists(db)) << what;
    }
  }
}

// curl's habits (issue 34): `curl -X POST URL` sends no body and no
// Content-Length, `curl --data-binary @big.toml` sends curl's default
// Content-Type (application/x-www-form-urlencoded); both are answered at
// once by the documented rules, and every request, rejected or not, is
// counted in korch_http_requests_total by route and status.
TEST_F(ServeApi, CurlHabitsBodiesAndCounting) {
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 300));
  ASSERT_NO_FATAL_FAILURE(start_serve({"--max-body-bytes", "65536"}));
  const std::string auth = std::string("Authorization: Bearer ") + k_token + "\r\n";
  auto post = [&](const std::string& path, const std::string& headers, const std::string& body) {
    return raw_http(m_serve.port(), "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                                        "Connection: close\r\n" + headers + "\r\n" + body);
  };
  // A campaign TOML of ~12 KB with curl's default Content-Type: accepted (was 413 past 8 KB).
  auto toml = campaign_toml("curl", m_llm.base_url(), 2, 3, 0.5);
  toml += "# " + std::string(12000, 'x') + "\n";
  auto r = post("/api/campaigns",
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                    std::to_string(toml.size()) + "\r\n",
                toml);
  ASSERT_EQ(r.status, 201) << r.head << r.body;
  auto id = nlohmann::json::parse(r.body)["id"].get<std::string>();
  // POST without a body or a Content-Length: answered at once (was 10 s, then 400).
  r = post("/api/campaigns/" + id + "/pause", "", "");
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_TRUE(r.status == 200 || r.status == 409) << r.head << r.body;
  EXPECT_TRUE(nlohmann::json::parse(r.body, nullptr, false).is_object()) << r.body;
  r = post("/api/campaigns/no-such/resume", "", "");
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_EQ(r.status, 404) << r.head << r.body;
  // Over max_body_bytes: 413 with a JSON error, by Content-Length and chunked.
  std::string big(70000, 'y');
  r = post("/api/campaigns", "Content-Length: " + std::to_string(big.size()) + "\r\n", big);
  EXPECT_EQ(r.status, 413) << r.head;
  EXPECT_NE(r.body.find("max_body_bytes"), std::string::npos) << r.body;
  std::string chunked;
  for (int i = 0; i < 5; ++i) chunked += "4e20\r\n" + std::string(20000, 'z') + "\r\n";
  chunked += "0\r\n\r\n";
  r = post("/api/campaigns", "Transfer-Encoding: chunked\r\n", chunked);
  EXPECT_EQ(r.status, 413) << r.head;
  // No route, wrong method, wrong token: each answered and counted.
  EXPECT_EQ(raw_http(m_serve.port(), "GET /api/nothing HTTP/1.1\r\nHost: x\r\n" + auth +
                                         "Connection: close\r\n\r\n")
                .status,
            404);
  auto not_allowed = raw_http(m_serve.port(), "DELETE /api/campaigns HTTP/1.1\r\nHost: x\r\n" +
                                                  auth + "Connection: close\r\n\r\n");
  EXPECT_EQ(not_allowed.status, 405);
  // With the methods the path takes (RFC 9110 §15.5.6).
  EXPECT_NE(not_allowed.head.find("Allow: GET, POST\r\n"), std::string::npos) << not_allowed.head;
  EXPECT_EQ(raw_http(m_serve.port(), "POST /api/campaigns/" + id +
                                         "/resume HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                         "wrong\r\nConnection: close\r\n\r\n")
                .status,
            401);
  EXPECT_EQ(raw_http(m_serve.port(), "NONSENSE\r\n\r\n").status, 400);
  auto cli = m_serve.client(k_token);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  auto count = [&](const std::string& route, int status) {
    return metric_value(m->body, "korch_http_requests_total{route=\"" + route + "\",status=\"" +
                                     std::to_string(status) + "\"}");
  };
  EXPECT_EQ(count("/api/campaigns", 201), 1) << m->body;
  EXPECT_EQ(count("/api/campaigns", 413), 2) << m->body;
  EXPECT_EQ(count("/api/campaigns/{id}/resume", 404), 1) << m->body;
  EXPECT_EQ(count("/api/campaigns/{id}/resume", 401), 1) << m->body;
  EXPECT_EQ(count("unmatched", 404), 1) << m->body;
  EXPECT_EQ(count("unmatched", 405), 1) << m->body;
  EXPECT_EQ(count("unmatched", 400), 1) << m->body;
  EXPECT_EQ(count("/api/campaigns/{id}/pause", 200) + count("/api/campaigns/{id}/pause", 409), 1)
      << m->body;
  EXPECT_EQ(m_serve.terminate(), 0) << m_serve.err();
}

TEST_F(ServeApi, EveryRouteAndBadInput) {
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 20));
  ASSERT_NO_FATAL_FAILURE(start_serve({"--max-body-bytes", "65536", "--sse-interval-s", "0.2"}));
  auto cli = m_serve.client(k_token);

  // /health needs no token; everything else does.
  auto anon = m_serve.client();
  ASSERT_NO_FATAL_FAILURE(expect_health(anon, "ok"));
  auto r = anon.Get("/api/campaigns");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(body_json(r)["error"], "missing bearer token");
  auto wrong = m_serve.client("wrong-token-0123456789");
  r = wrong.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(body_json(r)["error"], "wrong bearer token");
  r = anon.Post("/api/campaigns", campaign_toml("sneaky", m_llm.base_url(), 1, 2, 0),
                "application/toml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  // Submit a TOML campaign; it runs to the end.
  r = cli.Post("/api/campaigns", campaign_toml("alpha", m_llm.base_url(), 2, 3, 0.01),
               "application/toml");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  auto alpha = body_json(r);
  std::string alpha_id = alpha["id"];
  EXPECT_EQ(alpha["name"], "alpha");
  EXPECT_EQ(alpha["tasks"], 4);

  // Bad input: each a clear 4xx; nothing stored changes.
  ASSERT_TRUE(wait_state(m_serve, alpha_id, "completed")) << m_serve.err();
  const auto before = std::vector<std::string>{rows(m_db, "campaigns"), rows(m_db, "episodes"),
                                               rows(m_db, "turns"), rows(m_db, "evaluations")};
  auto expect_4xx = [&](const httplib::Result& res, int status, const std::string& needle) {
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    auto j = body_json(res);
    ASSERT_TRUE(j.is_object()) << res->body;
    EXPECT_NE(j.value("error", "").find(needle), std::string::npos) << res->body;
  };
  expect_4xx(cli.Post("/api/campaigns", "{\"name\": ", "application/json"), 400, "malformed JSON");
  expect_4xx(cli.Post("/api/campaigns", campaign_toml("alpha", m_llm.base_url(), 2, 3, 0.01),
                      "application/toml"),
             409, "exists");
  expect_4xx(cli.Post("/api/campaigns", "name = \"bad\"\nmax_turnz = 3\n", "application/toml"), 400,
             "unknown key 'max_turnz'");
  expect_4xx(cli.Post("/api/campaigns", "name = \"bad\"\nmax_turns = \"x\"\n[[models]]\nid=\"m\"\n",
                      "text/plain"),
             400, "max_turns");
  expect_4xx(cli.Post("/api/campaigns", "name = [broken", "application/toml"), 400, "campaign:1:");
  expect_4xx(cli.Post("/api/campaigns", "", "application/toml"), 400, "empty body");
  expect_4xx(cli.Post("/api/campaigns", std::string(70000, 'x'), "application/toml"), 413,
             "too large");
  expect_4xx(cli.Get("/api/campaigns/c-nope"), 404, "no campaign");
  expect_4xx(cli.Post("/api/campaigns/c-nope/pause", "", "application/json"), 404, "no campaign");
  expect_4xx(cli.Post("/api/campaigns/c-nope/resume", "", "application/json"), 404, "no campaign");
  expect_4xx(cli.Post("/api/campaigns/c-nope/cancel", "", "application/json"), 404, "no campaign");
  expect_4xx(cli.Get("/api/campaigns/c-nope/episodes"), 404, "no campaign");
  expect_4xx(cli.Get("/api/episodes/e-nope"), 404, "no episode");
  expect_4xx(cli.Get("/api/nothing-here"), 404, "no route");
  expect_4xx(cli.Post("/api/evaluations", "[1,", "application/json"), 400, "malformed JSON");
  expect_4xx(cli.Post("/api/evaluations", R"({"task": "/nonexistent/1_X.py", "code": "x"})",
                      "application/json"),
             400, "nonexistent");
  expect_4xx(cli.Post("/api/evaluations", R"({"task": {"path": 3}})", "application/json"), 400,
             "code");
  expect_4xx(cli.Post(("/api/campaigns/" + alpha_id + "/pause").c_str(), "", "application/json"),
             409, "completed");
  const auto after = std::vector<std::string>{rows(m_db, "campaigns"), rows(m_db, "episodes"),
                                              rows(m_db, "turns"), rows(m_db, "evaluations")};
  EXPECT_EQ(before, after);
  EXPECT_FALSE(m_serve.process().wait_for(std::chrono::milliseconds(1)))
      << "the daemon died on bad input";

  // Episodes and their turns.
  r = cli.Get(("/api/campaigns/" + alpha_id + "/episodes").c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto eps = body_json(r)["episodes"];
  ASSERT_EQ(eps.size(), 16u);  // 4 tasks x 2 models x 2 samples
  for (auto& e : eps) EXPECT_EQ(e["status"], "final");
  r = cli.Get(("/api/episodes/" + eps[0]["id"].get<std::string>()).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto ep = body_json(r);
  ASSERT_FALSE(ep["turns"].empty());
  auto t1 = ep["turns"][0];
  EXPECT_EQ(t1["turn"], 1);
  EXPECT_FALSE(t1["code"].get<std::string>().empty());
  EXPECT_TRUE(t1["action"] == "check" || t1["action"] == "submit") << t1;
  EXPECT_FALSE(t1["verdict"].get<std::string>().empty());
  EXPECT_TRUE(ep.contains("final"));
  // Same numbers as the store, read independently.
  EXPECT_EQ(std::to_string(ep["turns"].size()),
            query(m_db, "SELECT COUNT(*) FROM turns WHERE episode_id = '" +
                            ep["id"].get<std::string>() + "'")[0][0]);

  // A JSON campaign; pause, resume, cancel.
  nlohmann::json js = {
      {"name", "beta"},
      {"samples_per_task", 3},
      {"max_turns", 4},
      {"log_level", "warn"},
      {"tasks", {{"kernelbench_dir", KORCH_EXAMPLES_DIR "/tasks"}, {"ids", "1-4"}}},
      {"evaluator", {{"mode", "mock"}, {"mock_latency_s", 0.3}}},
      {"models", {{{"id", "m1"}, {"base_url", m_llm.base_url()}, {"model", "fake-1"}}}}};
  r = cli.Post("/api/campaigns", js.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  std::string beta = body_json(r)["id"];
  r = cli.Post(("/api/campaigns/" + beta + "/pause").c_str(), "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["state"], "paused");
  // Paused before or after its thread first ran: idle, or stopping on the
  // way there -- never left "queued" (it once stayed so, and this waited 120 s).
  EXPECT_NE(body_json(r).value("phase", ""), "queued") << r->body;
  ASSERT_TRUE(wait_until(m_serve.process(), [&] {
    return body_json(cli.Get(("/api/campaigns/" + beta).c_str())).value("phase", "") == "idle";
  }));
  auto turns_paused = rows(m_db, "turns");
  r = cli.Post(("/api/campaigns/" + beta + "/resume").c_str(), "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["state"], "active");
  ASSERT_TRUE(wait_until(m_serve.process(), [&] { return rows(m_db, "turns") != turns_paused; }));
  r = cli.Post(("/api/campaigns/beta/cancel"), "", "application/json");  // by name too
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["state"], "cancelled");
  r = cli.Post(("/api/campaigns/" + beta + "/resume").c_str(), "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409);

  // List.
  auto list = body_json(cli.Get("/api/campaigns"))["campaigns"];
  ASSERT_EQ(list.size(), 2u);
  std::set<std::string> names;
  for (auto& c : list) names.insert(c["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"alpha", "beta"}));

  // One-off evaluation (mock evaluator of the daemon), stored once.
  nlohmann::json ev = {{"task", {{"path", KORCH_EXAMPLES_DIR "/tasks/1_ReLU_small.py"}}},
                       {"code", "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"},
                       {"mode", "check"}};
  r = cli.Post("/api/evaluations", ev.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto report = body_json(r)["report"];
  EXPECT_TRUE(report.contains("status")) << r->body;
  EXPECT_EQ(query(m_db, "SELECT COUNT(*) FROM evaluations WHERE request_id = '" +
                            body_json(r)["request_id"].get<std::string>() + "'")[0][0],
            "1");
  // Issue 46: the engine wrote it (running, then done); a repeated request
  // is answered from the stored row.
  const auto first = body_json(r);
  EXPECT_EQ(query(m_db, "SELECT state FROM evaluations WHERE request_id = '" +
                            first["request_id"].get<std::string>() + "'")[0][0],
            "done");
  r = cli.Post("/api/evaluations", ev.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r), first);

  // Metrics in Prometheus text format.
  r = cli.Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  for (const char* m :
       {"korch_episodes{campaign=\"alpha\",state=\"final\"} 16", "korch_llm_calls_total{",
        "korch_llm_latency_seconds_bucket{", "korch_llm_tokens_total{", "korch_llm_cost_usd_total{",
        "korch_evaluations_total{", "korch_evaluator_queue_depth", "korch_evaluator_busy_fraction",
        "korch_campaign_cost_usd{campaign=\"alpha\"}"}) {
    EXPECT_NE(r->body.find(m), std::string::npos) << m << "\n" << r->body.substr(0, 3000);
  }

  // The progress stream: a progress event first.
  std::string got;
  auto sse = cli.Get("/api/events", [&](const char* data, size_t n) {
    got.append(data, n);
    return got.find("\n\n") == std::string::npos;  // stop after the first event
  });
  EXPECT_NE(got.find("event: progress\ndata: {"), std::string::npos) << got;
  EXPECT_NE(got.find("\"alpha\""), std::string::npos) << got;

  // SIGTERM with a stream open: the daemon ends the stream and exits 0.
  std::atomic<bool> stream_open{false};
  std::string streamed;
  std::thread reader([&] {
    auto c2 = m_serve.client(k_token);
    c2.Get("/api/events", [&](const char* data, size_t n) {
      streamed.append(data, n);
      stream_open = true;
      return true;
    });
  });
  ASSERT_TRUE(wait_until(
      m_serve.process(), [&] { return stream_open.load(); }, std::chrono::seconds(10)));
  m_serve.process().signal(SIGTERM);
  auto rc = m_serve.process().wait_for(std::chrono::seconds(30));
  reader.join();
  ASSERT_TRUE(rc) << "korch serve did not stop after SIGTERM\n" << m_serve.err();
  EXPECT_EQ(*rc, 0) << m_serve.err();
  EXPECT_NE(streamed.find("event: shutdown"), std::string::npos) << streamed;
  EXPECT_EQ(m_serve.err().find(k_token), std::string::npos) << "the token was logged";
}

TEST_F(ServeApi, SecondDaemonOnTheSameDatabaseIsRefused) {
  TempDir dir;
  auto d = dir.path().string();
  ServeProcess a, b;
  ASSERT_TRUE(a.start(d, d + "/one.db")) << a.err();
  EXPECT_FALSE(b.start(d, d + "/one.db"));
  EXPECT_NE(b.process().wait(), 0);
  EXPECT_NE(b.err().find("locked"), std::string::npos) << b.err();
}

// A state file whose state this korch does not know (a newer korch's, a hand
// edit): the campaign is listed as paused and not driven.
TEST_F(ServeApi, AnUnknownStoredCampaignStateStaysPaused) {
  TempDir dir;
  auto d = dir.path().string();
  auto db = d + "/k.db";
  std::filesystem::create_directories(db + ".serve/campaigns");
  // (no LLM listens on port 9: driving it would fail its calls and end episodes)
  write_text(db + ".serve/campaigns/c-new.toml",
             campaign_toml("from-the-future", "http://127.0.0.1:9/v1", 2, 1, 0.0));
  write_text(db + ".serve/campaigns/c-new.json",
             R"({"id":"c-new","name":"from-the-future","state":"archived","submitted_at":1})");
  // A control beside it, active, loaded by the same start: its thread runs
  // (its LLM is unreachable, so the drive ends "aborted"). Campaign threads
  // start only at load and on a resume, so once the control's has run, the
  // unknown one's empty store is a fact, not a guess after a sleep.
  write_text(db + ".serve/campaigns/c-live.toml",
             campaign_toml("control", "http://127.0.0.1:9/v1", 2, 1, 0.0));
  write_text(db + ".serve/campaigns/c-live.json",
             R"({"id":"c-live","name":"control","state":"active","submitted_at":2})");
  ServeProcess serve;
  ASSERT_TRUE(start_with_token(serve, d, db)) << serve.err();
  auto cli = serve.client(k_token);
  auto j = body_json(cli.Get("/api/campaigns/c-new"));
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j.value("state", ""), "paused") << j.dump();
  // (a valid config: an invalid one is never driven whatever its state)
  EXPECT_EQ(j.value("phase", ""), "idle") << j.dump();
  auto episodes_of = [&](const std::string& name) {
    return poll_value(db,
                      "SELECT COUNT(*) FROM episodes e JOIN campaigns c ON c.id = e.campaign_id "
                      "WHERE c.name = '" +
                          name + "'")
        .value_or("-");
  };
  ASSERT_TRUE(wait_until(
      serve.process(),
      [&] { return body_json(cli.Get("/api/campaigns/c-live")).value("phase", "") == "aborted"; }))
      << serve.err() << body_json(cli.Get("/api/campaigns/c-live")).dump();
  EXPECT_NE(body_json(cli.Get("/api/campaigns/c-live")).value("message", "").find("unreachable"),
            std::string::npos);
  // Driven, it would have met the same unreachable LLM and ended "aborted".
  j = body_json(cli.Get("/api/campaigns/c-new"));
  EXPECT_EQ(j.value("phase", ""), "idle") << j.dump();
  EXPECT_EQ(j.value("state", ""), "paused") << j.dump();
  EXPECT_EQ(episodes_of("from-the-future"), "0");
  EXPECT_EQ(
      poll_value(db, "SELECT COUNT(*) FROM campaigns WHERE name = 'from-the-future'").value_or("-"),
      "0");
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
  EXPECT_NE(serve.err().find("unknown campaign state 'archived'"), std::string::npos)
      << serve.err();
}

// kill -9 of the daemon mid-campaign, then a restart: the daemon resumes the
// campaign at start and finishes it exactly as an uninterrupted run does.
TEST_F(ServeKill, SigkillMidCampaignAndRestartEqualsAnUninterruptedRun) {
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 40));
  std::vector<nlohmann::json> reference;
  ASSERT_NO_FATAL_FAILURE(run_reference(
      m_dir, "killed", campaign_toml("killed", m_llm.base_url(), 4, 4, 0.05, m_dir + "/ref.db"),
      reference));
  ASSERT_GT(reference.size(), 30u);

  // Kill each run once it has recorded a few more turns.
  auto turns = [&] {
    return std::stoi(poll_value(m_db, "SELECT COUNT(*) FROM turns").value_or("0"));
  };
  ASSERT_NO_FATAL_FAILURE(
      kill_and_restart(m_db, {}, campaign_toml("killed", m_llm.base_url(), 4, 4, 0.05), 3,
                       [&](ServeProcess& serve) { return five_more_turns(serve, turns); }));
  EXPECT_GE(m_kills, 2) << "the campaign finished before the kills; make it longer";
  ASSERT_NO_FATAL_FAILURE(expect_same_export(export_db(m_dir, m_db, "killed"), reference));
  EXPECT_EQ(query(m_db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  EXPECT_TRUE(
      query(m_db, "SELECT request_id FROM evaluations GROUP BY request_id HAVING COUNT(*) > 1")
          .empty());
}

// Strategies run in `korch serve` as in `korch run` (issue #37): a refine
// campaign posted to the daemon, SIGKILLed mid-campaign and restarted, ends
// with korch run's export and the same strategy decisions.
TEST_F(ServeKill, RefineCampaignUnderServeEqualsKorchRun) {
  ASSERT_NO_FATAL_FAILURE(start_llm("refine", 40));
  const std::string strategy = "[strategy]\nkind = \"refine\"\nrounds = 3\n";
  std::vector<nlohmann::json> reference;
  ASSERT_NO_FATAL_FAILURE(run_reference(
      m_dir, "refined",
      campaign_toml("refined", m_llm.base_url(), 2, 2, 0.05, m_dir + "/ref.db") + strategy,
      reference));
  auto decisions = [](const std::string& db) {
    return query(db,
                 "SELECT episode_id, detail FROM events WHERE kind = 'strategy' "
                 "ORDER BY episode_id, detail");
  };
  const auto ref_decisions = decisions(m_dir + "/ref.db");
  ASSERT_EQ(reference.size(), 4u * 2 * 2 * 3 * 2) << "tasks x models x samples x rounds, "
                                                     "one attempt and one episode record each";
  ASSERT_FALSE(ref_decisions.empty());

  // Kill once a seeded round has started.
  auto seeded = [&](ServeProcess& serve) {
    return wait_until(serve.process(), [&] {
      return poll_value(m_db,
                        "SELECT COUNT(*) FROM events WHERE kind = 'strategy' AND "
                        "detail LIKE '%\"round\":1%'")
                 .value_or("0") != "0";
    });
  };
  ASSERT_NO_FATAL_FAILURE(kill_and_restart(
      m_db, {}, campaign_toml("refined", m_llm.base_url(), 2, 2, 0.05) + strategy, 1, seeded));
  EXPECT_EQ(m_kills, 1) << "the campaign finished before the kill";
  EXPECT_EQ(decisions(m_db), ref_decisions);
  auto resumed = export_db(m_dir, m_db, "refined");
  ASSERT_NO_FATAL_FAILURE(expect_same_export(resumed, reference));
  int seeded_records = 0;
  for (auto& r : resumed)
    seeded_records += r.contains("seed_episode_id") && !r["seed_episode_id"].is_null();
  EXPECT_GT(seeded_records, 0);
}

// The same on PostgreSQL (docs/postgres.md): `korch serve --db postgres://...`
// (no lock file there; the campaign lease decides) killed twice mid-campaign
// and restarted ends with the uninterrupted SQLite run's export.
TEST_F(ServeKill, OnPostgresSigkillMidCampaignAndRestartEqualsAnUninterruptedRun) {
  auto& pg = PostgresServer::shared();
  if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 40));
  std::vector<nlohmann::json> reference;
  ASSERT_NO_FATAL_FAILURE(run_reference(
      m_dir, "pgkilled", campaign_toml("pgkilled", m_llm.base_url(), 4, 4, 0.05, m_dir + "/ref.db"),
      reference));

  const std::string url = pg.fresh_database();
  ASSERT_FALSE(url.empty()) << pg.error();
  auto turns = [&] {
    auto [rc, out] =
        run_capture({"psql", "-X", "-tA", url, "-c", "SELECT count(*) FROM turns"}, m_dir);
    return rc == 0 ? std::atoi(out.c_str()) : 0;
  };
  ASSERT_NO_FATAL_FAILURE(
      kill_and_restart(url, {"--state-dir", m_dir + "/serve-state"},
                       campaign_toml("pgkilled", m_llm.base_url(), 4, 4, 0.05), 2,
                       [&](ServeProcess& serve) { return five_more_turns(serve, turns); }));
  EXPECT_GE(m_kills, 1) << "the campaign finished before the kills; make it longer";
  ASSERT_NO_FATAL_FAILURE(expect_same_export(export_db(m_dir, url, "pgkilled"), reference));
}

// Issue 34: after a kill -9 and a restart, a campaign's counters are the
// store's (turns, tokens, finals), and elapsed_s is the time driven over
// every run, not only since the restart.
TEST_F(ServeKill, CountersAfterARestartReadFromTheStore) {
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 40));
  std::string id;
  double before_kill = 0;
  {
    ServeProcess serve;
    ASSERT_TRUE(start_with_token(serve, m_dir, m_db)) << serve.err();
    auto cli = serve.client(k_token);
    ASSERT_NO_FATAL_FAILURE(
        post_campaign(cli, campaign_toml("counted", m_llm.base_url(), 2, 4, 1.5), id));
    ASSERT_TRUE(wait_until(serve.process(), [&] {
      auto j = body_json(cli.Get(("/api/campaigns/" + id).c_str()));
      before_kill = j["progress"].value("elapsed_s", 0.0);
      return before_kill >= 4.0;
    })) << serve.err();
    ASSERT_NO_FATAL_FAILURE(sigkill(serve));
  }
  ASSERT_NO_FATAL_FAILURE(start_serve());
  auto cli = m_serve.client(k_token);
  auto j = body_json(cli.Get(("/api/campaigns/" + id).c_str()));
  // The driven time is kept every 2 s: a kill loses at most that much.
  EXPECT_GE(j["progress"]["elapsed_s"].get<double>(), before_kill - 2.5) << j;
  ASSERT_TRUE(wait_state(m_serve, id, "completed")) << m_serve.err();
  j = body_json(cli.Get(("/api/campaigns/" + id).c_str()));
  auto& p = j["progress"];
  const std::string of_campaign =
      "episode_id IN (SELECT id FROM episodes WHERE campaign_id = '" + id + "')";
  EXPECT_EQ(std::to_string(p["turns"].get<long>()),
            query(m_db, "SELECT COUNT(*) FROM turns WHERE " + of_campaign)[0][0])
      << j;
  EXPECT_EQ(std::to_string(p["final"].get<long>()),
            query(m_db, "SELECT COUNT(*) FROM finals WHERE " + of_campaign)[0][0])
      << j;
  EXPECT_EQ(p["final"], p["episodes"]) << j;
  EXPECT_EQ(p["correct"].get<long>() + p["failed"].get<long>(), p["final"].get<long>()) << j;
  EXPECT_EQ(p["turns"], j["counts"]["turns"]) << j;
  EXPECT_GE(p["elapsed_s"].get<double>(), before_kill - 2.5) << j;
  EXPECT_EQ(m_serve.terminate(), 0) << m_serve.err();
}

// Issue 34: GET /api/campaigns/{id}/export?format=jsonl|csv streams what
// `korch export` writes for the same database (chunked: never one body in
// the daemon's memory).
TEST_F(ServeApi, ExportStreamsWhatKorchExportWrites) {
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 10));
  ASSERT_NO_FATAL_FAILURE(start_serve());
  auto cli = m_serve.client(k_token);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(
      post_campaign(cli, campaign_toml("exported", m_llm.base_url(), 2, 2, 0.01), id));
  ASSERT_TRUE(wait_state(m_serve, id, "completed")) << m_serve.err();
  for (auto* format : {"jsonl", "csv"}) {
    auto res = cli.Get(("/api/campaigns/exported/export?format=" + std::string(format)).c_str());
    ASSERT_TRUE(res) << httplib::to_string(res.error()) << m_serve.err();
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked") << format;
    EXPECT_NE(res->get_header_value("Content-Disposition").find(id), std::string::npos);
    auto [rc, cli_out] = run_capture(
        {KORCH_BIN, "export", "--db", m_db, "--campaign", "exported", "--format", format}, m_dir);
    ASSERT_EQ(rc, 0) << cli_out;
    EXPECT_EQ(res->body, cli_out) << format;
    EXPECT_GT(std::count(res->body.begin(), res->body.end(), '\n'), 8) << res->body;
  }
  auto r = cli.Get(("/api/campaigns/" + id + "/export").c_str());  // jsonl by default
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  r = cli.Get(("/api/campaigns/" + id + "/export?format=xml").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = cli.Get("/api/campaigns/c-nope/export");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  auto eta = [](httplib::Client& c, const std::string& campaign) {
    return body_json(c.Get(("/api/campaigns/" + campaign).c_str()))["progress"]["eta_s"];
  };
  EXPECT_EQ(eta(cli, id), 0.0);
  EXPECT_EQ(m_serve.terminate(), 0) << m_serve.err();
  // A finished campaign's eta_s is 0 in a daemon that did not run it too
  // (issue 48: it read -1, "unknown", there).
  ServeProcess again;
  ASSERT_TRUE(start_with_token(again, m_dir, m_db, {})) << again.err();
  auto cli2 = again.client(k_token);
  EXPECT_EQ(eta(cli2, id), 0.0);
  EXPECT_EQ(again.terminate(), 0) << again.err();
}

// A JSON Schema check of the subset docs/openapi.json uses: $ref (local),
// type, nullable, enum, properties, required, additionalProperties, items.
// Returns "" when `v` matches, else where and why it does not.
std::string schema_mismatch(const nlohmann::json& spec, const nlohmann::json& schema,
                            const nlohmann::json& v, const std::string& at) {
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];  // "#/components/schemas/Name"
    return schema_mismatch(spec, spec.at(nlohmann::json::json_pointer(ref.substr(1))), v, at);
  }
  if (v.is_null()) {
    return schema.value("nullable", false) || !schema.contains("type") ? "" : at + ": null";
  }
  if (schema.contains("type")) {
    std::string t = schema["type"];
    bool ok = t == "object"    ? v.is_object()
              : t == "array"   ? v.is_array()
              : t == "string"  ? v.is_string()
              : t == "integer" ? v.is_number_integer()
              : t == "number"  ? v.is_number()
              : t == "boolean" ? v.is_boolean()
                               : false;
    if (!ok) return at + ": " + v.dump().substr(0, 80) + " is not " + t;
  }
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end())
    return at + ": " + v.dump() + " is not one of " + schema["enum"].dump();
  if (v.is_object()) {
    for (auto& r : schema.value("required", nlohmann::json::array()))
      if (!v.contains(r.get<std::string>())) return at + ": lacks '" + r.get<std::string>() + "'";
    auto props = schema.value("properties", nlohmann::json::object());
    for (auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto m = schema_mismatch(spec, props[k], x, at + "." + k); !m.empty()) return m;
      } else if (schema.contains("additionalProperties")) {
        auto& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) return at + ": undocumented '" + k + "'";
        if (extra.is_object())
          if (auto m = schema_mismatch(spec, extra, x, at + "." + k); !m.empty()) return m;
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (auto m = schema_mismatch(spec, schema["items"], v[i], at + "[" + std::to_string(i) + "]");
          !m.empty())
        return m;
  }
  return "";
}

// Issue 34: docs/openapi.json describes what the daemon answers. A live
// response of every registered route (and an error of each route with an
// id) is checked against the schema the file gives for its status.
TEST_F(ServeApi, LiveResponsesMatchTheirSchemas) {
  auto spec = nlohmann::json::parse(slurp(KORCH_SOURCE_DIR "/docs/openapi.json"));
  ASSERT_NO_FATAL_FAILURE(start_llm("kernel", 10));
  auto slow_dir = m_dir + "/slow";
  std::filesystem::create_directories(slow_dir);
  FakeLlmProcess slow;  // never answers in time: its campaign stays active
  ASSERT_TRUE(slow.start(slow_dir, {"--script", "kernel", "--latency-ms", "3600000"}));
  ASSERT_NO_FATAL_FAILURE(start_serve());
  auto cli = m_serve.client(k_token);
  std::set<std::string> checked;
  // Checks one response of `method path` (path in OpenAPI form) against the spec.
  auto check = [&](const std::string& method, const std::string& path, const httplib::Result& r) {
    ASSERT_TRUE(r) << method << " " << path;
    std::string m = method;
    for (auto& ch : m) ch = static_cast<char>(std::tolower(ch));
    auto& op = spec["paths"][path][m];
    ASSERT_TRUE(op.is_object()) << method << " " << path << " is not documented";
    auto status = std::to_string(r->status);
    ASSERT_TRUE(op["responses"].contains(status))
        << method << " " << path << " answered " << status << ", undocumented: " << r->body;
    auto resp = op["responses"][status];
    if (resp.contains("$ref"))
      resp = spec.at(nlohmann::json::json_pointer(resp["$ref"].get<std::string>().substr(1)));
    auto type = r->get_header_value("Content-Type");
    ASSERT_TRUE(resp["content"].contains(type))
        << method << " " << path << " " << status << ": Content-Type " << type << " undocumented";
    if (type == "application/json") {
      auto body = nlohmann::json::parse(r->body, nullptr, false);
      auto mismatch = schema_mismatch(spec, resp["content"][type]["schema"], body, "body");
      EXPECT_EQ(mismatch, "") << method << " " << path << " " << status;
    }
    checked.insert(method + " " + path);
  };
  auto post = [&](const std::string& target, const std::string& body, const char* type) {
    return cli.Post(target.c_str(), body, type);
  };
  auto r = post("/api/campaigns", campaign_toml("schemas", m_llm.base_url(), 2, 2, 0.01),
                "application/toml");
  check("POST", "/api/campaigns", r);
  std::string id = body_json(r)["id"];
  r = post("/api/campaigns", campaign_toml("controlled", slow.base_url(), 2, 2, 0.01),
           "application/toml");
  check("POST", "/api/campaigns", r);
  std::string slow_id = body_json(r)["id"];
  check("POST", "/api/campaigns", post("/api/campaigns", "name = 3", "application/toml"));
  ASSERT_TRUE(wait_state(m_serve, id, "completed")) << m_serve.err();
  check("GET", "/health", cli.Get("/health"));
  check("GET", "/metrics", cli.Get("/metrics"));
  check("GET", "/api/campaigns", cli.Get("/api/campaigns"));
  check("GET", "/api/workers", cli.Get("/api/workers"));
  for (auto* c : {id.c_str(), "c-nope"})
    check("GET", "/api/campaigns/{id}", cli.Get(("/api/campaigns/" + std::string(c)).c_str()));
  for (auto* action : {"pause", "resume", "cancel"}) {
    auto path = std::string("/api/campaigns/{id}/") + action;
    check("POST", path, post("/api/campaigns/" + slow_id + "/" + action, "", "text/plain"));
    check("POST", path, post("/api/campaigns/" + id + "/" + action, "", "text/plain"));  // 409
    check("POST", path, post(std::string("/api/campaigns/c-nope/") + action, "", "text/plain"));
  }
  r = cli.Get(("/api/campaigns/" + id + "/episodes").c_str());
  check("GET", "/api/campaigns/{id}/episodes", r);
  check("GET", "/api/campaigns/{id}/episodes", cli.Get("/api/campaigns/c-nope/episodes"));
  std::string ep = body_json(r)["episodes"][0]["id"];
  check("GET", "/api/episodes/{id}", cli.Get(("/api/episodes/" + ep).c_str()));
  check("GET", "/api/episodes/{id}", cli.Get("/api/episodes/e-nope"));
  nlohmann::json eval = {{"task", {{"path", KORCH_EXAMPLES_DIR "/tasks/1_ReLU_small.py"}}},
                         {"code", "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"},
                         {"mode", "check"}};
  check("POST", "/api/evaluations", post("/api/evaluations", eval.dump(), "application/json"));
  check("POST", "/api/evaluations", post("/api/evaluations", "{", "application/json"));
  for (auto* q : {"", "?format=html", "?format=pdf"})
    check("GET", "/api/campaigns/{id}/report",
          cli.Get(("/api/campaigns/" + id + "/report" + q).c_str()));
  check("GET", "/api/campaigns/{id}/report", cli.Get("/api/campaigns/c-nope/report"));
  for (auto* q : {"", "?format=csv", "?format=xml"})
    check("GET", "/api/campaigns/{id}/export",
          cli.Get(("/api/campaigns/" + id + "/export" + q).c_str()));
  check("GET", "/api/campaigns/{id}/export", cli.Get("/api/campaigns/c-nope/export"));
  check("GET", "/", cli.Get("/"));
  for (auto* f : {"index.html", "style.css", "dashboard.js", "nope.js"})
    check("GET", "/dashboard/{file}", cli.Get(("/dashboard/" + std::string(f)).c_str()));
  check("GET", "/api/campaigns", m_serve.client("wrong-token").Get("/api/campaigns"));  // 401
  // The progress stream: its first event's data against ProgressEvent.
  {
    std::string text;
    auto events = m_serve.client(k_token);
    auto res = events.Get("/api/events", [&](const char* data, std::size_t n) {
      text.append(data, n);
      return text.find("\n\n") == std::string::npos;  // stop after the first event
    });
    ASSERT_EQ(text.rfind("event: progress\ndata: ", 0), 0u) << text;
    auto data = nlohmann::json::parse(text.substr(22, text.find("\n\n") - 22));
    auto& content = spec["paths"]["/api/events"]["get"]["responses"]["200"]["content"];
    ASSERT_TRUE(content.contains("text/event-stream"));
    EXPECT_EQ(schema_mismatch(spec, content["text/event-stream"]["x-event-data"], data, "event"),
              "");
    checked.insert("GET /api/events");
  }
  // Every registered route was checked.
  auto [rc, routes] = run_capture({KORCH_BIN, "serve", "--print-routes"}, m_dir);
  ASSERT_EQ(rc, 0);
  std::istringstream in(routes);
  std::string port, method, path;
  while (in >> port >> method >> path) {
    if (port == "api") {
      EXPECT_TRUE(checked.count(method + " " + path)) << method << " " << path;
    }
  }
  EXPECT_EQ(m_serve.terminate(), 0) << m_serve.err();
}

}  // namespace
}  // namespace korch::testing
