// The OpenEnv endpoint of `korch serve` driven by an independent client
// (tests/integration/openenv_client.py on Debian's python3-websockets):
// reset, CHECK and SUBMIT steps, state, close, the session cap, a malformed
// frame; each step stored like a campaign turn. Plus the HTTP routes.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "tests/integration/serve_fixture.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr const char* k_token = "env-token-0123456789abcdef";

bool have_python_websockets() {
  return std::system("/usr/bin/python3 -c 'import websockets' 2>/dev/null") == 0;
}

// `korch serve` with the OpenEnv endpoint on loopback (--env-listen
// 127.0.0.1:0, token k_token), on env.db in a directory of its own.
struct EnvDaemon {
  TempDir dir;
  std::string d = dir.path().string();
  std::string db = d + "/env.db";
  ServeProcess serve;

  bool start(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--env-listen", "127.0.0.1:0"});
    return serve.start(d, db, extra, {{"KORCH_API_TOKEN", k_token}});
  }
};

TEST(ServeOpenEnv, WebSocketSessionWithAnIndependentClient) {
  if (!have_python_websockets())
    KORCH_SKIP_OR_FAIL("python3-websockets is not installed (scripts/install-deps.sh)");
  EnvDaemon env;
  auto& [dir, d, db, serve] = env;
  ASSERT_TRUE(env.start({"--env-max-sessions", "3", "--evaluator-mock-latency-s", "0.2"}))
      << serve.err();
  auto [rc, out] = run_capture(
      {"/usr/bin/python3", KORCH_SOURCE_DIR "/tests/integration/openenv_client.py",
       std::to_string(serve.env_port()), k_token, KORCH_EXAMPLES_DIR "/tasks/1_ReLU_small.py", "3"},
      d);
  ASSERT_EQ(rc, 0) << out << "\n" << serve.err();
  auto seen = nlohmann::json::parse(out.substr(out.rfind('{')));
  std::string ep = seen["episode_id"];
  // Stored like a campaign turn: turns, evaluations, messages, a final.
  auto turns = query(db, "SELECT turn, action, eval_status FROM turns WHERE episode_id = '" + ep +
                             "' ORDER BY turn");
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[0][1], "check");
  EXPECT_EQ(turns[1][1], "check");
  EXPECT_EQ(turns[2][1], "submit");
  EXPECT_EQ(turns[2][2], seen["submit_verdict"].get<std::string>());
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE episode_id = '" + ep +
                          "' AND state = 'done'")[0][0],
            "3");
  EXPECT_EQ(query(db, "SELECT status FROM episodes WHERE id = '" + ep + "'")[0][0], "final");
  EXPECT_EQ(query(db, "SELECT reason FROM finals WHERE episode_id = '" + ep + "'")[0][0],
            "submitted");
  // The same episode over the API.
  auto cli = serve.client(k_token);
  auto r = cli.Get(("/api/episodes/" + ep).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(body_json(r)["turns"].size(), 3u);
  // The daemon still serves; sessions were released.
  r = cli.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("korch_env_sessions 0"), std::string::npos) << r->body.substr(0, 2000);
  EXPECT_NE(r->body.find("korch_env_steps_total{action=\"check\"} 2"), std::string::npos);
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
}

// Issue 34: OpenEnv's own client protocol (meta-pytorch/OpenEnv at
// 685de411e5f77286b0fd94798d42c4467cf8a1bc, followed by
// tests/integration/openenv_protocol_client.py) against a daemon that needs
// a token: the client cannot send headers, so the token rides in the URL
// (and may come as a header or a subprotocol); reset() without a task picks
// the next task of the configured pool and says so in the observation's
// metadata; CHECK, SUBMIT, state, close. The token never reaches the log.
TEST(ServeOpenEnv, OpenEnvClientProtocolFromATokenProtectedDaemon) {
  if (!have_python_websockets())
    KORCH_SKIP_OR_FAIL("python3-websockets is not installed (scripts/install-deps.sh)");
  EnvDaemon env;
  auto& [dir, d, db, serve] = env;
  ASSERT_TRUE(
      env.start({"--env-tasks-dir", KORCH_EXAMPLES_DIR "/tasks", "--env-ids", "1-3", "--env-order",
                 "sequential", "--evaluator-mock-latency-s", "0.05", "--log-level", "debug"}))
      << serve.err();
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.env_port());
  auto [rc, out] =
      run_capture({"/usr/bin/python3",
                   KORCH_SOURCE_DIR "/tests/integration/openenv_protocol_client.py", base, k_token},
                  d);
  ASSERT_EQ(rc, 0) << out << "\n" << serve.err();
  auto seen = nlohmann::json::parse(out.substr(out.rfind("{\"openenv_commit")));
  EXPECT_EQ(seen["openenv_commit"], "685de411e5f77286b0fd94798d42c4467cf8a1bc");
  // The pool (tasks 1-3 of examples/tasks) in order, one task per reset, across sessions.
  const std::vector<std::string> ways = {"query", "ws_query", "header", "subprotocol"};
  for (std::size_t i = 0; i < ways.size(); ++i) {
    auto& s = seen[ways[i]];
    EXPECT_EQ(s["pick"]["picked_by"], "sequential") << s;
    EXPECT_EQ(s["pick"]["pool_size"], 3) << s;
    EXPECT_EQ(s["pick"]["pool_index"], i % 3) << s;
    // Stored like a campaign turn: a CHECK and a SUBMIT, and a final.
    std::string ep = s["episode_id"];
    EXPECT_EQ(query(db,
                    "SELECT GROUP_CONCAT(action) FROM (SELECT action FROM turns WHERE "
                    "episode_id = '" +
                        ep + "' ORDER BY turn)")[0][0],
              "check,submit");
    EXPECT_EQ(query(db, "SELECT status FROM episodes WHERE id = '" + ep + "'")[0][0], "final");
  }
  EXPECT_EQ(seen["query"]["task_id"], seen["subprotocol"]["task_id"]);
  EXPECT_NE(seen["query"]["task_id"], seen["ws_query"]["task_id"]);
  EXPECT_NE(seen["ws_query"]["task_id"], seen["header"]["task_id"]);
  EXPECT_EQ(seen["no_token"], 401);
  EXPECT_EQ(seen["wrong_token"], 401);
  // HTTP /step in OpenEnv's StepRequest shape (no episode_id): a fresh
  // episode of the pool, as OpenEnv's stateless HTTP server runs one.
  httplib::Client c("127.0.0.1", serve.env_port());
  c.set_read_timeout(60, 0);
  c.set_bearer_token_auth(k_token);
  auto r = c.Post("/step",
                  R"({"action": {"code": "x = 1\n", "action": "CHECK"}, "timeout_s": 30,
                      "request_id": "req-1"})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto obs = body_json(r);
  EXPECT_EQ(obs["observation"]["turn"], 1) << obs;
  EXPECT_EQ(obs["observation"]["metadata"]["pick"]["pool_index"], 1) << obs;
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM turns WHERE episode_id = '" +
                          obs["observation"]["episode_id"].get<std::string>() + "'")[0][0],
            "1");
  r = c.Post("/step", R"({"code": "x = 1\n"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
  // The token travelled in URLs: the log shows them redacted, never the token.
  auto log = serve.err();
  EXPECT_EQ(log.find(k_token), std::string::npos) << log;
  EXPECT_NE(log.find("token=[redacted]"), std::string::npos) << log;
}

// Issue 48: a token as `openssl rand -base64` writes it ("+", "/", "=")
// works pasted as it is into OpenEnv's client URL and into curl; a token
// file beats KORCH_API_TOKEN, and the start line names where the token came
// from (never the token); the bearer scheme is case-insensitive.
TEST(ServeOpenEnv, Base64TokenFromAFileWorksInTheClientUrlAndCurl) {
  if (!have_python_websockets())
    KORCH_SKIP_OR_FAIL("python3-websockets is not installed (scripts/install-deps.sh)");
  const std::string token = "kQ+7/xZ9m+Ab/Cd0Ef12==";
  const std::string env_token = "env-token-that-must-lose-0123";
  TempDir dir;
  const auto d = dir.path().string();
  const auto token_file = d + "/token";
  write_text(token_file, token + "\n");
  ServeProcess serve;
  ASSERT_TRUE(serve.start(d, d + "/env.db",
                          {"--env-listen", "127.0.0.1:0", "--token-file", token_file,
                           "--env-tasks-dir", KORCH_EXAMPLES_DIR "/tasks", "--env-ids", "1-3",
                           "--evaluator-mock-latency-s", "0.05", "--log-level", "debug"},
                          {{"KORCH_API_TOKEN", env_token}}))
      << serve.err();
  auto log = serve.err();
  EXPECT_NE(log.find("bearer token required, from " + token_file), std::string::npos) << log;
  EXPECT_NE(log.find("OpenEnv base_url: http://127.0.0.1:" + std::to_string(serve.env_port()) +
                     "/?token=<the token>"),
            std::string::npos)
      << log;
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.env_port());
  auto [rc, out] = run_capture(
      {"/usr/bin/python3", KORCH_SOURCE_DIR "/tests/integration/openenv_protocol_client.py", base,
       token, "query,ws_query,header,header_lower"},
      d);
  ASSERT_EQ(rc, 0) << out << "\n" << serve.err();
  auto seen = nlohmann::json::parse(out.substr(out.rfind("{\"openenv_commit")));
  for (const char* way : {"query", "ws_query", "header", "header_lower"})
    EXPECT_TRUE(seen[way].contains("episode_id")) << way << ": " << seen;
  // The environment's token lost to the file's: refused.
  auto [erc, eout] = run_capture(
      {"/usr/bin/python3", KORCH_SOURCE_DIR "/tests/integration/openenv_protocol_client.py", base,
       env_token, "query"},
      d);
  EXPECT_NE(erc, 0) << eout;
  // curl, the token pasted as it is: the API with a lowercase scheme, the
  // OpenEnv HTTP routes with ?token=.
  auto code = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_capture(argv, d).second;
  };
  const std::string api = "http://127.0.0.1:" + std::to_string(serve.port());
  EXPECT_EQ(code({"-H", "Authorization: bearer " + token, api + "/api/campaigns"}), "200");
  EXPECT_EQ(code({"-H", "Authorization: BEARER " + token, api + "/api/campaigns"}), "200");
  EXPECT_EQ(code({"-H", "Authorization: Bearer " + env_token, api + "/api/campaigns"}), "401");
  EXPECT_EQ(code({base + "/schema?token=" + token}), "200");
  EXPECT_EQ(code({base + "/schema?token=" + env_token}), "401");
  // reset(task_id=...) takes the task_id its own observation names ("L1/2_Add_small").
  httplib::Client c("127.0.0.1", serve.env_port());
  c.set_read_timeout(60, 0);
  c.set_bearer_token_auth(token);
  auto r = c.Post("/reset", "{}", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string task_id = body_json(r)["observation"]["task_id"];
  r = c.Post("/reset", nlohmann::json{{"task_id", task_id}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << task_id << ": " << r->body;
  EXPECT_EQ(body_json(r)["observation"]["task_id"], task_id);
  r = c.Post("/reset", nlohmann::json{{"task_id", task_id + "x"}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
  // Logged at debug, the URLs carry it redacted: no piece of it ("+", "/" included).
  EXPECT_EQ(serve.err().find(token), std::string::npos);
  EXPECT_EQ(serve.err().find("Cd0Ef12"), std::string::npos);
  EXPECT_NE(serve.err().find("token=[redacted]"), std::string::npos);
}

// Issue 46: a client loses its socket while a CHECK evaluates and reconnects
// with reset(episode_id). The reconnecting session waits for the step in
// flight and receives its result (turn 1, its verdict); its SUBMIT is turn 2.
// One turn per step; the SUBMIT's code is in the turns, the final names it,
// and the RL export holds it with its reward. Checked with SQL of its own.
TEST(ServeOpenEnv, ReconnectDuringAnEvaluationWaitsForTheStepInFlight) {
  if (!have_python_websockets())
    KORCH_SKIP_OR_FAIL("python3-websockets is not installed (scripts/install-deps.sh)");
  EnvDaemon env;
  auto& [dir, d, db, serve] = env;
  ASSERT_TRUE(env.start({"--evaluator-mock-latency-s", "2"})) << serve.err();
  const std::string check_code =
      "import torch\nclass ModelNew(torch.nn.Module):\n    pass  # MOCK_VERDICT: compile_error\n";
  const std::string submit_code =
      "import torch\nclass ModelNew(torch.nn.Module):\n    pass  # MOCK_SPEEDUP: 2.5\n";
  const std::string ep = "blip-ep-1";
  auto [rc, out] = run_capture(
      {"/usr/bin/python3", KORCH_SOURCE_DIR "/tests/integration/openenv_reconnect_client.py",
       std::to_string(serve.env_port()), k_token, KORCH_EXAMPLES_DIR "/tasks/1_ReLU_small.py", ep,
       check_code, submit_code},
      d);
  ASSERT_EQ(rc, 0) << out << "\n" << serve.err();
  auto seen = nlohmann::json::parse(out.substr(out.rfind("{\"reset\"")));
  // The reconnect answered with the step in flight's result.
  ASSERT_EQ(seen["reset"]["type"], "observation") << seen;
  EXPECT_EQ(seen["reset"]["data"]["observation"]["turn"], 1) << seen;
  EXPECT_EQ(seen["reset"]["data"]["observation"]["verdict"], "compile_error") << seen;
  ASSERT_EQ(seen["submit"]["type"], "observation") << seen;
  EXPECT_EQ(seen["submit"]["data"]["observation"]["turn"], 2) << seen;
  EXPECT_EQ(seen["submit"]["data"]["done"], true) << seen;
  auto turns = query(db,
                     "SELECT turn, action, eval_status, code, eval_request_id FROM turns "
                     "WHERE episode_id = '" +
                         ep + "' ORDER BY turn");
  ASSERT_EQ(turns.size(), 2u) << serve.err();
  EXPECT_EQ(turns[0][1], "check");
  EXPECT_EQ(turns[0][2], "compile_error");
  EXPECT_EQ(turns[0][3], check_code);
  EXPECT_EQ(turns[1][1], "submit");
  EXPECT_EQ(turns[1][2], "ok");
  EXPECT_EQ(turns[1][3], submit_code);
  auto fin = query(db,
                   "SELECT reason, request_id, speedup, correct FROM finals WHERE "
                   "episode_id = '" +
                       ep + "'");
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0][0], "submitted");
  EXPECT_EQ(fin[0][1], turns[1][4]);
  EXPECT_EQ(std::stod(fin[0][2]), 2.5);
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE episode_id = '" + ep + "'")[0][0],
            "2");
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
  // The RL export holds the SUBMIT, its code and its reward.
  auto [xrc, xout] = run_capture(
      {KORCH_BIN, "export", "--db", db, "--campaign", "korch-openenv", "--format", "rl"}, d);
  ASSERT_EQ(xrc, 0) << xout;
  int submits = 0;
  std::istringstream lines(xout);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("episode_id", "") != ep || j["action"] != "submit") continue;
    ++submits;
    EXPECT_EQ(j["code"], submit_code);
    EXPECT_GT(j["reward"].get<double>(), 0.3);
  }
  EXPECT_EQ(submits, 1) << xout;
}

// Issue 46: kill -9 of `korch serve` while OpenEnv steps evaluate. A client
// (tests/integration/openenv_chaos_client.py) drives k_episodes episodes at
// once and, whenever its connection dies, reconnects with
// reset(episode_id) and sends the step the episode does not hold yet. Every
// episode ends with exactly its steps as turns, and the store's RL and SFT
// exports equal those of a run that was never killed.
TEST(ServeOpenEnv, KillNineWhileStepsEvaluateLosesNoStepAndRepeatsNone) {
  if (!have_python_websockets())
    KORCH_SKIP_OR_FAIL("python3-websockets is not installed (scripts/install-deps.sh)");
  constexpr int k_episodes = 5, k_kills = 8;
  const std::vector<std::string> flags = {"--evaluator-mock-latency-s", "0.8"};
  const std::map<std::string, std::string> token = {{"KORCH_API_TOKEN", k_token}};
  auto exports = [&](const std::string& d, const std::string& db) {
    std::vector<nlohmann::json> out;
    for (const char* format : {"rl", "sft"}) {
      auto [rc, text] = run_capture(
          {KORCH_BIN, "export", "--db", db, "--campaign", "korch-openenv", "--format", format}, d);
      EXPECT_EQ(rc, 0) << text;
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
    }
    return out;
  };
  auto client = [&](const std::string& d) {
    return std::vector<std::string>{"/usr/bin/python3",
                                    KORCH_SOURCE_DIR "/tests/integration/openenv_chaos_client.py",
                                    d + "/port",
                                    k_token,
                                    KORCH_EXAMPLES_DIR "/tasks/1_ReLU_small.py",
                                    std::to_string(k_episodes)};
  };

  // The reference: never killed.
  TempDir ref_dir;
  const std::string rd = ref_dir.path().string(), ref_db = rd + "/env.db";
  {
    ServeProcess serve;
    auto extra = flags;
    extra.insert(extra.end(), {"--env-listen", "127.0.0.1:0"});
    ASSERT_TRUE(serve.start(rd, ref_db, extra, token)) << serve.err();
    write_text(rd + "/port", std::to_string(serve.env_port()));
    auto [rc, out] = run_capture(client(rd), rd);
    ASSERT_EQ(rc, 0) << out << "\n" << serve.err();
    EXPECT_EQ(serve.terminate(), 0) << serve.err();
  }
  const auto reference = exports(rd, ref_db);
  ASSERT_EQ(reference.size(), static_cast<std::size_t>(k_episodes * 3 + k_episodes));

  // The same client while the daemon is SIGKILLed at random moments.
  TempDir dir;
  const std::string d = dir.path().string(), db = d + "/env.db";
  auto serve = std::make_unique<ServeProcess>();
  {
    auto extra = flags;
    extra.insert(extra.end(), {"--env-listen", "127.0.0.1:0"});
    ASSERT_TRUE(serve->start(d, db, extra, token)) << serve->err();
  }
  const int port = serve->env_port();
  write_text(d + "/port", std::to_string(port));
  auto driver = Process::start(client(d), d + "/client.out", d + "/client.err");
  std::mt19937 rng(46);
  std::uniform_int_distribution<int> pause_ms(300, 900);
  int kills = 0;
  for (int k = 0; k < k_kills; ++k) {
    if (driver.wait_for(std::chrono::milliseconds(pause_ms(rng)))) break;
    serve->process().signal(SIGKILL);
    ASSERT_EQ(serve->process().wait(), 128 + SIGKILL);
    ++kills;
    serve = std::make_unique<ServeProcess>();
    auto extra = flags;
    extra.insert(extra.end(), {"--env-listen", "127.0.0.1:" + std::to_string(port)});
    ASSERT_TRUE(serve->start(d, db, extra, token)) << serve->err();
  }
  std::optional<int> rc;
  for (int i = 0; i < 1200 && !rc; ++i) rc = driver.wait_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(rc) << "the client did not finish";
  ASSERT_EQ(*rc, 0) << slurp(d + "/client.err") << "\n" << serve->err();
  EXPECT_EQ(serve->terminate(), 0) << serve->err();
  EXPECT_GT(kills, 0);
  // Own SQL: every episode holds its three steps once each, all evaluated, and is final.
  for (int e = 0; e < k_episodes; ++e) {
    const std::string ep = "chaos-ep-" + std::to_string(e);
    EXPECT_EQ(query(db,
                    "SELECT GROUP_CONCAT(turn || ':' || action) FROM (SELECT turn, action "
                    "FROM turns WHERE episode_id = '" +
                        ep + "' ORDER BY turn)")[0][0],
              "1:check,2:check,3:submit")
        << ep;
    EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE episode_id = '" + ep +
                            "' AND state = 'done'")[0][0],
              "3")
        << ep;
    EXPECT_EQ(query(db, "SELECT reason FROM finals WHERE episode_id = '" + ep + "'")[0][0],
              "submitted")
        << ep;
  }
  const auto chaos = exports(d, db);
  ASSERT_EQ(chaos.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i)
    EXPECT_EQ(chaos[i], reference[i]) << "record " << i;
  std::printf("kills %d, evaluations run again after a kill %s\n", kills,
              query(db, "SELECT COUNT(*) FROM evaluations WHERE attempts > 1")[0][0].c_str());
}

TEST(ServeOpenEnv, HttpRoutes) {
  EnvDaemon env;
  auto& [dir, d, db, serve] = env;
  ASSERT_TRUE(env.start({})) << serve.err();
  httplib::Client c("127.0.0.1", serve.env_port());
  c.set_read_timeout(60, 0);
  ASSERT_NO_FATAL_FAILURE(expect_health(c, "healthy"));
  auto r = c.Get("/metadata");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  c.set_bearer_token_auth(k_token);
  r = c.Get("/metadata");
  ASSERT_TRUE(r);
  EXPECT_EQ(body_json(r)["name"], "korch");
  r = c.Get("/schema");
  ASSERT_TRUE(r);
  EXPECT_TRUE(body_json(r)["action"]["properties"].contains("code"));
  r = c.Post("/reset", "{bad", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Post("/reset",
             R"({"task_id": ")" KORCH_EXAMPLES_DIR
             R"(/tasks/2_Add_small.py", "episode_id": "http-ep-1"})",
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["observation"]["episode_id"], "http-ep-1");
  r = c.Post("/step",
             R"({"episode_id": "http-ep-1", "action": {"code": "x = 1\n", "action": "CHECK"}})",
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["observation"]["turn"], 1);
  r = c.Get("/state?episode_id=http-ep-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(body_json(r)["step_count"], 1);
  r = c.Post("/step", R"({"episode_id": "nope", "action": {"code": "x", "action": "CHECK"}})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Get("/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM turns WHERE episode_id = 'http-ep-1'")[0][0], "1");
  EXPECT_EQ(serve.terminate(), 0) << serve.err();
}

}  // namespace
}  // namespace korch::testing
