#include "daemon/openenv.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "agent/episode.hpp"
#include "prompts/prompts.hpp"
#include "util/fs.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace korch::daemon {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

std::string redact_token(const std::string& target) {
  std::string out = target;
  for (auto pos = out.find("token="); pos != std::string::npos; pos = out.find("token=", pos + 1)) {
    if (pos > 0 && out[pos - 1] != '?' && out[pos - 1] != '&') continue;
    auto end = out.find('&', pos);
    out.replace(pos + 6, (end == std::string::npos ? out.size() : end) - (pos + 6), "[redacted]");
  }
  return out;
}

const std::vector<Route>& env_routes() {
  static const std::vector<Route> routes = {
      {"GET", "/ws", true},     {"POST", "/reset", true},  {"POST", "/step", true},
      {"GET", "/state", true},  {"GET", "/health", false}, {"GET", "/metadata", true},
      {"GET", "/schema", true},
  };
  return routes;
}

namespace {

// OpenEnv's error codes (the wire spells them as below).
enum class EnvCode {
  invalid_json,
  unknown_type,
  validation_error,
  execution_error,
  capacity_reached,
  session_error,
  episode_busy  // korch's own: a step of the episode is in flight (docs/api.md)
};

}  // namespace
}  // namespace korch::daemon

namespace korch {
template <>
struct EnumNames<daemon::EnvCode> {
  using C = daemon::EnvCode;
  static constexpr std::pair<C, std::string_view> k_names[] = {
      {C::invalid_json, "INVALID_JSON"},         {C::unknown_type, "UNKNOWN_TYPE"},
      {C::validation_error, "VALIDATION_ERROR"}, {C::execution_error, "EXECUTION_ERROR"},
      {C::capacity_reached, "CAPACITY_REACHED"}, {C::session_error, "SESSION_ERROR"},
      {C::episode_busy, "EPISODE_BUSY"}};
};
}  // namespace korch

namespace korch::daemon {
namespace {

std::string env_code(EnvCode c) { return std::string(enum_name(c)); }

struct EnvError {
  EnvCode code;
  std::string message;
  std::string code_name() const { return env_code(code); }
};

json error_frame(const EnvError& e) {
  return {{"type", "error"}, {"data", {{"message", e.message}, {"code", e.code_name()}}}};
}

// One environment episode in memory: the engine's state (agent/episode.hpp,
// an external episode) and the sessions waiting on it. Shared by every
// session attached to the episode, and held by its step in flight; `mutex`
// guards every field.
struct LiveEpisode {
  std::mutex mutex;
  agent::EpisodeState state;
  nlohmann::json pick;  // how reset chose the task (the observation's metadata says it)
  bool busy = false;    // a step is in flight: its evaluation runs or commits
  bool stale = false;   // dropped after a failure: the store is the truth, attach again
  // Resets that attached while a step was in flight: answered with its result.
  std::vector<std::function<void()>> waiters;
  // The last step's outcome, for observations.
  std::string verdict;
  std::optional<double> speedup;
  double reward = 0;
  std::string feedback;
};
using LivePtr = std::shared_ptr<LiveEpisode>;

// "%2F" -> "/", "+" -> " " (a query value); with plus_is_space false a "+"
// stays "+" (a token: base64 has "+" and never a space).
std::string url_decode(const std::string& s, bool plus_is_space = true) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' && plus_is_space ? ' ' : s[i];
    }
  }
  return out;
}

// A request target split into what the server uses: the path, the query's
// parameters, and the token of `?token=`. OpenEnv's EnvClient appends "/ws"
// to its base URL, so base_url "http://host:port/?token=T" reaches us as
// "/?token=T/ws": read as "/ws?token=T".
struct Target {
  std::string path;
  std::map<std::string, std::string> params;
  std::optional<std::string> token;
};

Target parse_target(const std::string& target) {
  Target t;
  auto q = target.find('?');
  t.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::string query = target.substr(q + 1);
    std::size_t pos = 0;
    while (pos <= query.size()) {
      auto amp = query.find('&', pos);
      auto part = query.substr(pos, amp == std::string::npos ? query.npos : amp - pos);
      auto eq = part.find('=');
      // The token as people write it: a base64 token's "+" is itself, not a
      // space ("%2B" reads as "+" too), its "/" and "=" pass as they are.
      if (!part.empty()) {
        std::string name = url_decode(part.substr(0, eq));
        t.params[name] =
            eq == std::string::npos ? "" : url_decode(part.substr(eq + 1), name != "token");
      }
      if (amp == std::string::npos) break;
      pos = amp + 1;
    }
  }
  if (auto it = t.params.find("token"); it != t.params.end()) {
    std::string v = it->second;
    if ((t.path.empty() || t.path == "/") && v.size() > 3 && v.ends_with("/ws")) {
      v.resize(v.size() - 3);
      t.path = "/ws";
    }
    t.token = v;
  }
  if (t.path.empty()) t.path = "/";
  return t;
}

bool valid_episode_id(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  }
  return true;
}

}  // namespace

struct EnvServer::Impl {
  Daemon& daemon;
  std::string token;
  std::string campaign_id;
  std::uint64_t secret_seed = 0;
  int max_turns;
  std::atomic<int> sessions{0};
  std::atomic<bool> stopping{false};
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::mutex mutex;  // live sessions, for stop()
  std::set<std::shared_ptr<void>> live;
  int port = 0;
  std::mutex pool_mutex;  // pool, picks
  std::optional<std::vector<config::Task>> pool;
  std::uint64_t picks = 0;  // resets that picked from the pool (starts at the stored episodes)
  // One LiveEpisode per episode id while a session or a step holds it: a
  // second session attaching to an episode gets the same one (issue 46).
  std::mutex episodes_mutex;
  std::map<std::string, std::weak_ptr<LiveEpisode>> episodes;
  std::size_t remembered = 0;  // entries added to `episodes`

  explicit Impl(Daemon& d) : daemon(d), max_turns(d.config().env_max_turns) {
    campaign_id = ids::campaign_id(d.config().env_name);
    secret_seed = ids::stable_hash64("openenv|" + d.config().env_name);
  }

  Result<void> ensure_campaign() {
    store::WriteBatch b;
    store::CampaignRow c;
    c.id = campaign_id;
    c.name = daemon.config().env_name;
    c.config_json = json{{"openenv", true},
                         {"max_turns", max_turns},
                         {"evaluator", std::string(config::to_string(daemon.evaluator().mode()))}}
                        .dump();
    c.secret_seed = secret_seed;
    c.created_at = now_unix();
    b.put(c);
    auto r = daemon.store().commit_sync(std::move(b));
    if (!r) return std::unexpected(r.error());
    return {};
  }

  // What the engine is told with each event.
  agent::Env engine_env() const {
    agent::Env env;
    env.now = now_unix();
    env.owner = daemon.owner();
    env.secret_seed = secret_seed;
    return env;
  }

  std::shared_ptr<const agent::EpisodeSpec> spec_for(const std::string& id,
                                                     const config::Task& task) const {
    auto spec = std::make_shared<agent::EpisodeSpec>();
    spec->campaign_id = campaign_id;
    spec->episode_id = id;
    spec->task = std::make_shared<const config::Task>(task);
    spec->model_id = "env";
    spec->max_turns = max_turns;
    spec->external = true;
    return spec;
  }

  // The observation of `ep` (its lock held).
  json observation(const LiveEpisode& ep, const std::string& prompt, const std::string& feedback,
                   double reward) const {
    const auto& task = *ep.state.spec->task;
    json obs = {{"episode_id", ep.state.spec->episode_id},
                {"task_id", task.id},
                {"turn", agent::turns_done(ep.state)},
                {"max_turns", max_turns},
                {"prompt", prompt},
                {"feedback", feedback},
                {"verdict", ep.verdict.empty() ? json() : json(ep.verdict)},
                {"speedup", ep.speedup ? json(*ep.speedup) : json()},
                {"metadata", metadata_of(ep)}};
    return {
        {"observation", obs}, {"reward", reward}, {"done", ep.state.phase == agent::Phase::final}};
  }

  // The observation a reset answers with: the task's prompt, and the last
  // step's outcome (a reconnecting client learns what its step did).
  json reset_observation(const LiveEpisode& ep) const {
    const int left = std::max(1, max_turns - agent::turns_done(ep.state));
    return observation(ep, prompts::task_prompt(*ep.state.spec->task, left), ep.feedback,
                       ep.reward);
  }

  // The observation's metadata: the task, and how reset chose it.
  static json metadata_of(const LiveEpisode& ep) {
    const auto& task = *ep.state.spec->task;
    json m = {{"task_id", task.id},
              {"task_name", task.name},
              {"level", task.level},
              {"number", task.number}};
    m["pick"] = ep.pick.is_null() ? json{{"picked_by", "episode_id"}} : ep.pick;
    return m;
  }

  // The task of a reset: `task_id` when given; else the pool of
  // env.tasks_dir (env.levels, env.ids): the task at `seed` (modulo the
  // pool's size) when a seed is given, else the next one in env.order.
  std::expected<std::pair<config::Task, json>, EnvError> pick_task(
      const json& d, std::optional<std::uint64_t> seed) {
    if (d.contains("task_id") && !d["task_id"].is_null()) {
      auto task = daemon.resolve_task(d["task_id"]);
      if (!task) return std::unexpected(EnvError{EnvCode::validation_error, task.error().message});
      return std::pair{*task, json{{"picked_by", "task_id"}}};
    }
    auto& cfg = daemon.config();
    if (cfg.env_tasks_dir.empty()) {
      return std::unexpected(
          EnvError{EnvCode::validation_error,
                   "no task pool: give 'task_id' (a task file), or start the daemon with "
                   "env.tasks_dir (and env.levels, env.ids, env.order)"});
    }
    std::lock_guard lock(pool_mutex);
    if (!pool) {
      config::TaskSelection sel;
      sel.kernelbench_dir = cfg.env_tasks_dir;
      sel.levels = cfg.env_levels;
      sel.ids = cfg.env_ids;
      auto all = config::load_tasks(sel);
      if (!all) return std::unexpected(EnvError{EnvCode::execution_error, all.error().message});
      if (all->empty())
        return std::unexpected(EnvError{EnvCode::execution_error,
                                        "the task pool (env.tasks_dir, env.levels, "
                                        "env.ids) has no tasks"});
      pool = std::move(*all);
    }
    const auto size = pool->size();
    std::size_t index = 0;
    json pick = {{"pool_size", size}, {"order", cfg.env_order}};
    if (seed) {
      index = static_cast<std::size_t>(*seed % size);
      pick["picked_by"] = "seed";
      pick["seed"] = *seed;
    } else if (cfg.env_order == "random") {
      index = static_cast<std::size_t>(
          ids::stable_hash64(fmt::format("openenv-pool|{}|{}", cfg.env_seed, picks)) % size);
      pick["picked_by"] = "random";
      pick["env_seed"] = cfg.env_seed;
      pick["draw"] = picks++;
    } else {
      index = static_cast<std::size_t>(picks++ % size);
      pick["picked_by"] = "sequential";
    }
    pick["pool_index"] = index;
    return std::pair{(*pool)[index], pick};
  }

  json state(const LivePtr& ep) {
    if (!ep) return {{"episode_id", nullptr}, {"step_count", 0}};
    std::lock_guard lock(ep->mutex);
    return {{"episode_id", ep->state.spec->episode_id},
            {"step_count", agent::turns_done(ep->state)},
            {"task_id", ep->state.spec->task->id},
            {"done", ep->state.phase == agent::Phase::final},
            {"max_turns", max_turns},
            {"last_verdict", ep->verdict}};
  }

  // Enters `ep` as the episode `id` in memory (episodes_mutex held); the
  // entries of episodes no session or step holds any more go, a pass per
  // k_prune_every entries added.
  void remember(const std::string& id, const LivePtr& ep) {
    static constexpr std::size_t k_prune_every = 256;
    episodes[id] = ep;
    if (++remembered % k_prune_every != 0) return;
    std::erase_if(episodes, [](const auto& e) { return e.second.expired(); });
  }

  // The episode `id` in memory: the one sessions share, else rebuilt from the
  // store by the engine (agent::resume). A step that was in flight when the
  // daemon stopped or died runs again under its request id. Null when the
  // store has no such episode.
  std::expected<LivePtr, EnvError> attach(const std::string& id) {
    std::lock_guard lock(episodes_mutex);
    if (auto it = episodes.find(id); it != episodes.end()) {
      if (auto ep = it->second.lock()) {
        std::lock_guard ep_lock(ep->mutex);
        if (!ep->stale) return ep;
      }
    }
    auto snap = daemon.store().load_episode(id);
    if (!snap) return std::unexpected(EnvError{EnvCode::execution_error, snap.error().message});
    if (!*snap) return LivePtr();
    auto& s = **snap;
    if (s.episode.campaign_id != campaign_id) {
      return std::unexpected(
          EnvError{EnvCode::validation_error,
                   "episode '" + id + "' belongs to a campaign, not the environment"});
    }
    auto tasks = daemon.store().list_tasks(campaign_id);
    if (!tasks) return std::unexpected(EnvError{EnvCode::execution_error, tasks.error().message});
    std::optional<config::Task> task;
    for (auto& t : *tasks) {
      if (t.task_id == s.episode.task_id)
        task = config::Task{t.task_id, t.level, t.number, t.name, t.path, t.source};
    }
    if (!task)
      return std::unexpected(
          EnvError{EnvCode::execution_error, "episode '" + id + "': its task is not stored"});
    auto ep = std::make_shared<LiveEpisode>();
    auto step = agent::resume(ep->state, spec_for(id, *task), s, engine_env());
    if (!s.turns.empty()) ep->verdict = s.turns.back().eval_status;
    const auto& conv = ep->state.conversation;
    if (!s.turns.empty() && !conv.empty() && conv.back().role == "user")
      ep->feedback = conv.back().content;  // the last CHECK's
    if (s.final) {
      ep->speedup = s.final->speedup;
      ep->reward = s.final->reward;
    }
    remember(id, ep);
    if (std::holds_alternative<agent::RunEval>(step.next) || !step.batch.empty()) {
      ep->busy = true;
      drive(ep, std::move(step), nullptr);
    }
    return ep;
  }

  // What a step's caller gets: the observation data, or an error.
  using StepDone = std::function<void(std::expected<json, EnvError>)>;

  // Runs a step of the engine: commits its rows, then starts what it asks
  // for (the write-ahead rule: the evaluation's `running` row is durable
  // before the evaluator sees the code) and feeds the result back to the
  // engine, until the engine waits for the next action or the episode ends.
  // `ep->busy` is set by the caller; `done` (may be null) and the waiting
  // resets are answered at the end, on the store's or the evaluator's thread.
  void drive(LivePtr ep, agent::Step step, StepDone done) {
    auto next = std::move(step.next);
    daemon.store().commit(std::move(step.batch), [this, ep, next = std::move(next),
                                                  done = std::move(done)](
                                                     Result<store::CommitInfo> r) mutable {
      if (!r)
        return give_up(ep, EnvError{EnvCode::execution_error, "store: " + r.error().message}, done);
      auto* run = std::get_if<agent::RunEval>(&next);
      if (!run) return finish(ep, done);
      auto mode = run->request.mode;
      daemon.evaluator().evaluate(
          run->request, [this, ep, mode, done = std::move(done)](evaluator::Report rep) mutable {
            agent::Step after;
            {
              std::lock_guard lock(ep->mutex);
              after = agent::on_eval_result(ep->state, rep, engine_env());
              if (std::holds_alternative<agent::AbortCampaign>(after.next)) {
                // The evaluator stopped under it: nothing recorded; the
                // step runs again when the episode is attached next.
                after.next = std::monostate{};
              } else if (!std::holds_alternative<agent::RunEval>(after.next)) {
                ep->verdict = evaluator::to_string(rep.status);
                ep->speedup = rep.speedup;
                ep->reward = mode == evaluator::Mode::submit ? rep.reward : 0.0;
                const auto& conv = ep->state.conversation;
                ep->feedback =
                    mode == evaluator::Mode::check && !conv.empty() && conv.back().role == "user"
                        ? conv.back().content
                        : prompts::render_report(rep, evaluator::Mode::submit);
              }
            }
            if (rep.interrupted)
              return give_up(ep,
                             EnvError{EnvCode::execution_error,
                                      "the evaluation was interrupted (the daemon is stopping)"},
                             done);
            drive(ep, std::move(after), std::move(done));
          });
    });
  }

  // The step is over: the episode waits for its next action (or is final).
  void finish(const LivePtr& ep, const StepDone& done) {
    json obs;
    std::vector<std::function<void()>> waiters;
    {
      std::lock_guard lock(ep->mutex);
      ep->busy = false;
      obs = observation(*ep, "", ep->feedback, ep->reward);
      waiters.swap(ep->waiters);
    }
    if (done) done(obs);
    for (auto& w : waiters) w();
  }

  // The step failed outside the engine (the store, a stopping evaluator):
  // this copy of the episode is dropped; the next attach rebuilds it from
  // the store, which holds every step that committed.
  void give_up(const LivePtr& ep, const EnvError& e, const StepDone& done) {
    std::vector<std::function<void()>> waiters;
    {
      std::lock_guard lock(ep->mutex);
      ep->busy = false;
      ep->stale = true;
      waiters.swap(ep->waiters);
    }
    KLOG_WARN("openenv: episode {}: {}", ep->state.spec->episode_id, e.message);
    if (done) done(std::unexpected(e));
    for (auto& w : waiters) w();
  }

  using ResetDone = std::function<void(std::expected<std::pair<LivePtr, json>, EnvError>)>;

  // reset: {"seed"?, "task_id"?, "episode_id"?}. An existing episode is
  // attached (one per id, shared by its sessions); while one of its steps is
  // in flight, `done` is called once that step's result is in (docs/api.md).
  void reset(const json& data, ResetDone done) {
    if (!data.is_null() && !data.is_object())
      return done(
          std::unexpected(EnvError{EnvCode::validation_error, "reset data must be an object"}));
    json d = data.is_object() ? data : json::object();
    std::optional<std::uint64_t> seed;
    if (d.contains("seed") && !d["seed"].is_null()) {
      if (!d["seed"].is_number_integer() || d["seed"].get<std::int64_t>() < 0)
        return done(
            std::unexpected(EnvError{EnvCode::validation_error, "'seed' must be an integer >= 0"}));
      seed = d["seed"].get<std::uint64_t>();
    }
    std::string id;
    if (d.contains("episode_id") && !d["episode_id"].is_null()) {
      if (!d["episode_id"].is_string() || !valid_episode_id(d["episode_id"].get<std::string>())) {
        return done(std::unexpected(
            EnvError{EnvCode::validation_error, "'episode_id' must be 1-100 of [A-Za-z0-9._-]"}));
      }
      id = d["episode_id"].get<std::string>();
      auto existing = attach(id);
      if (!existing) return done(std::unexpected(existing.error()));
      if (auto ep = *existing) {
        std::unique_lock lock(ep->mutex);
        if (ep->busy) {
          ep->waiters.push_back([this, ep, done] {
            std::unique_lock l(ep->mutex);
            if (ep->stale) {
              l.unlock();
              return done(std::unexpected(
                  EnvError{EnvCode::execution_error,
                           "the step in flight did not finish; send reset(episode_id) again"}));
            }
            auto obs = reset_observation(*ep);
            l.unlock();
            done(std::pair{ep, std::move(obs)});
          });
          return;
        }
        auto obs = reset_observation(*ep);
        lock.unlock();
        return done(std::pair{ep, std::move(obs)});
      }
    } else {
      id = fmt::format("env-{:016x}", (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                                          std::random_device{}());
    }
    auto picked = pick_task(d, seed);
    if (!picked) return done(std::unexpected(picked.error()));
    auto ep = std::make_shared<LiveEpisode>();
    ep->pick = picked->second;
    const config::Task& task = picked->first;
    store::WriteBatch b;
    store::TaskRow t;
    t.campaign_id = campaign_id;
    t.task_id = task.id;
    t.level = task.level;
    t.number = task.number;
    t.name = task.name;
    t.path = task.path;
    t.source = task.source;
    b.put(t);
    auto step = agent::start(ep->state, spec_for(id, task), engine_env());
    b.append(std::move(step.batch));
    if (auto r = daemon.store().commit_sync(std::move(b)); !r) {
      return done(std::unexpected(EnvError{EnvCode::execution_error, r.error().message}));
    }
    {
      std::lock_guard lock(episodes_mutex);
      remember(id, ep);
    }
    daemon.metrics().count_env_step("reset");
    json obs;
    {
      std::lock_guard lock(ep->mutex);
      obs = observation(*ep, prompts::task_prompt(task, max_turns), "", 0);
    }
    done(std::pair{ep, std::move(obs)});
  }

  // step: {"code": "...", "action": "CHECK"|"SUBMIT"} (or the same inside
  // "action"): an action event of the engine. `done` gets the observation
  // data or an error; on any thread.
  void step(const LivePtr& ep, const json& data, StepDone done) {
    json a = data;
    if (a.is_object() && a.contains("action") && a["action"].is_object()) a = a["action"];
    if (!a.is_object() || !a.contains("code") || !a["code"].is_string()) {
      return done(std::unexpected(
          EnvError{EnvCode::validation_error,
                   "step needs {\"code\": string, \"action\": \"CHECK\"|\"SUBMIT\"}"}));
    }
    std::string word = a.value("action", a.value("mode", std::string("CHECK")));
    for (auto& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto asked = evaluator::mode_from_string(word);  // CHECK | SUBMIT, any case
    if (!asked) {
      return done(
          std::unexpected(EnvError{EnvCode::validation_error, "'action' must be CHECK or SUBMIT"}));
    }
    agent::Step step;
    {
      std::lock_guard lock(ep->mutex);
      if (ep->stale)
        return done(
            std::unexpected(EnvError{EnvCode::session_error,
                                     "the episode was reloaded after a failure; send reset with "
                                     "its episode_id"}));
      if (ep->busy)
        return done(std::unexpected(EnvError{
            EnvCode::episode_busy,
            "a step of episode '" + ep->state.spec->episode_id +
                "' is in flight (from another session); reset with its episode_id waits for "
                "its result"}));
      if (ep->state.phase == agent::Phase::final)
        return done(std::unexpected(
            EnvError{EnvCode::validation_error, "the episode is done; send reset"}));
      auto r = agent::on_action(
          ep->state, a["code"].get<std::string>(),
          *asked == evaluator::Mode::submit ? agent::Action::submit : agent::Action::check,
          engine_env());
      if (!r) return done(std::unexpected(EnvError{EnvCode::validation_error, r.error().message}));
      step = std::move(*r);
      ep->busy = true;
      const auto* run = std::get_if<agent::RunEval>(&step.next);
      daemon.metrics().count_env_step(
          run && run->request.mode == evaluator::Mode::submit ? "submit" : "check");
    }
    drive(ep, std::move(step), std::move(done));
  }

  static json metadata() {
    return {{"name", "korch"},
            {"description",
             "Write a faster PyTorch module (ModelNew) for a KernelBench task; CHECK runs it "
             "unprotected for feedback, SUBMIT is scored and ends the episode."},
            {"version", "0.1.0"}};
  }

  static json schema() {
    json action = {
        {"type", "object"},
        {"properties",
         {{"code", {{"type", "string"}, {"description", "Python module defining ModelNew"}}},
          {"action", {{"type", "string"}, {"enum", {"CHECK", "SUBMIT"}}}}}},
        {"required", {"code"}}};
    json observation = {{"type", "object"},
                        {"properties",
                         {{"episode_id", {{"type", "string"}}},
                          {"task_id", {{"type", "string"}}},
                          {"turn", {{"type", "integer"}}},
                          {"max_turns", {{"type", "integer"}}},
                          {"prompt", {{"type", "string"}}},
                          {"feedback", {{"type", "string"}}},
                          {"verdict", {{"type", {"string", "null"}}}},
                          {"speedup", {{"type", {"number", "null"}}}}}}};
    json state = {{"type", "object"},
                  {"properties",
                   {{"episode_id", {{"type", {"string", "null"}}}},
                    {"step_count", {{"type", "integer"}}},
                    {"task_id", {{"type", "string"}}},
                    {"done", {{"type", "boolean"}}}}}};
    return {{"action", action}, {"observation", observation}, {"state", state}};
  }

  // The token may come as `Authorization: Bearer T`, as `?token=T` in the
  // URL (OpenEnv's client cannot add headers), or as a WebSocket subprotocol
  // `bearer.T`. Compared in constant time.
  bool authorized(const http::request<http::string_body>& req, const Target& t) const {
    if (token.empty()) return true;
    auto h = std::string(req[http::field::authorization]);
    if (auto given = bearer_credentials(h); given && same(*given)) return true;
    if (t.token && same(*t.token)) return true;
    if (auto p = bearer_subprotocol(req); p && same(p->substr(7))) return true;
    return false;
  }

  // The offered subprotocol that carries a token ("bearer.T"), if any.
  static std::optional<std::string> bearer_subprotocol(
      const http::request<http::string_body>& req) {
    std::string offered(req[http::field::sec_websocket_protocol]);
    std::size_t pos = 0;
    while (pos < offered.size()) {
      auto comma = offered.find(',', pos);
      auto item = offered.substr(pos, comma == std::string::npos ? offered.npos : comma - pos);
      while (!item.empty() && item.front() == ' ') item.erase(0, 1);
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (item.rfind("bearer.", 0) == 0) return item;
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    return std::nullopt;
  }

  bool same(const std::string& t) const { return token_equal(t, token); }

  void accept();
};

namespace {

// One WebSocket session: one environment. Reads continuously (so pings are
// answered while a step evaluates) and handles one message at a time.
class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(tcp::socket&& socket, EnvServer::Impl& env)
      : m_ws(std::move(socket)), m_env(env), m_idle(m_ws.get_executor()) {}

  void run(http::request<http::string_body> req) {
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(30);
    t.idle_timeout = std::chrono::seconds(60);  // pings every 30 s; a dead peer is dropped
    t.keep_alive_pings = true;
    m_ws.set_option(t);
    m_ws.read_message_max(static_cast<std::size_t>(m_env.daemon.config().max_body_bytes));
    // A client that offered subprotocols needs one back (browsers fail the
    // connection otherwise): the token's own entry.
    if (auto p = EnvServer::Impl::bearer_subprotocol(req)) {
      m_ws.set_option(websocket::stream_base::decorator([p = *p](websocket::response_type& res) {
        res.set(http::field::sec_websocket_protocol, p);
      }));
    }
    m_ws.async_accept(req, beast::bind_front_handler(&WsSession::on_accept, shared_from_this()));
  }

  void close(const std::string& why) {
    net::post(m_ws.get_executor(), [self = shared_from_this(), why] {
      if (self->m_closing) return;
      self->m_closing = true;
      self->send(error_frame({EnvCode::session_error, why}));
      self->m_close_after_write = true;
    });
  }

  ~WsSession() {
    if (m_counted) {
      int n = --m_env.sessions;
      m_env.daemon.metrics().set_env_sessions(n);
    }
  }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return;
    if (m_env.sessions.fetch_add(1) >= m_env.daemon.config().env_max_sessions) {
      m_env.sessions.fetch_sub(1);
      send(error_frame(
          {EnvCode::capacity_reached, fmt::format("the server holds its maximum of {} sessions",
                                                  m_env.daemon.config().env_max_sessions)}));
      m_close_after_write = true;
      m_closing = true;
      return;
    }
    m_counted = true;
    m_env.daemon.metrics().set_env_sessions(m_env.sessions.load());
    {
      std::lock_guard lock(m_env.mutex);
      m_env.live.insert(shared_from_this());
    }
    m_last = now_mono();
    arm_idle();
    read();
  }

  void arm_idle() {
    m_idle.expires_after(std::chrono::seconds(1));
    m_idle.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->m_closing) return;
      if (!self->m_busy &&
          now_mono() - self->m_last > self->m_env.daemon.config().env_idle_timeout_s) {
        self->m_closing = true;
        self->send(error_frame({EnvCode::session_error, "idle timeout: session closed"}));
        self->m_close_after_write = true;
        return;
      }
      self->arm_idle();
    });
  }

  void read() {
    m_ws.async_read(m_buffer, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->finish();
      std::string text = beast::buffers_to_string(self->m_buffer.data());
      self->m_buffer.consume(self->m_buffer.size());
      self->m_last = now_mono();
      self->m_inbox.push_back(std::move(text));
      self->pump();
      self->read();  // always: pings, and the peer's close frame, are read here
    });
  }

  void finish() {
    m_closing = true;
    m_idle.cancel();
    std::lock_guard lock(m_env.mutex);
    m_env.live.erase(shared_from_this());
  }

  void pump() {
    while (!m_busy && !m_inbox.empty() && !m_closing) {
      auto text = std::move(m_inbox.front());
      m_inbox.pop_front();
      handle(text);
    }
  }

  void handle(const std::string& text) {
    auto msg = json::parse(text, nullptr, false);
    if (msg.is_discarded() || !msg.is_object())
      return send(error_frame({EnvCode::invalid_json, "the frame is not a JSON object"}));
    auto type = msg.value("type", std::string());
    json data = msg.contains("data") ? msg["data"] : json::object();
    if (type == "reset") {
      // May wait for a step in flight of the episode it attaches to.
      m_busy = true;
      auto self = shared_from_this();
      m_env.reset(data, [self](std::expected<std::pair<LivePtr, json>, EnvError> r) {
        net::post(self->m_ws.get_executor(), [self, r = std::move(r)] {
          self->m_busy = false;
          self->m_last = now_mono();
          if (!r) {
            self->send(error_frame(r.error()));
          } else {
            self->m_ep = r->first;
            self->send({{"type", "observation"}, {"data", r->second}});
          }
          self->pump();
        });
      });
      return;
    }
    if (type == "state") return send({{"type", "state"}, {"data", m_env.state(m_ep)}});
    if (type == "close") {
      m_closing = true;
      m_close_after_write = true;
      return flush_or_close();
    }
    if (type == "step") {
      if (!m_ep) return send(error_frame({EnvCode::validation_error, "send reset before step"}));
      m_busy = true;
      auto self = shared_from_this();
      m_env.step(m_ep, data, [self](std::expected<json, EnvError> r) {
        net::post(self->m_ws.get_executor(), [self, r = std::move(r)] {
          self->m_busy = false;
          self->m_last = now_mono();
          if (!r) {
            self->send(error_frame(r.error()));
          } else {
            self->send({{"type", "observation"}, {"data", *r}});
          }
          self->pump();
        });
      });
      return;
    }
    if (type.empty()) return send(error_frame({EnvCode::validation_error, "missing 'type'"}));
    send(error_frame({EnvCode::unknown_type,
                      "unknown message type '" + type + "' (reset, step, state, close)"}));
  }

  void send(const json& j) {
    m_outbox.push_back(j.dump());
    if (!m_writing) write_next();
  }

  void write_next() {
    if (m_outbox.empty()) {
      m_writing = false;
      return flush_or_close();
    }
    m_writing = true;
    m_ws.text(true);
    m_ws.async_write(net::buffer(m_outbox.front()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->m_outbox.pop_front();
                       if (ec) {
                         self->m_outbox.clear();
                         self->m_writing = false;
                         return;
                       }
                       self->write_next();
                     });
  }

  void flush_or_close() {
    if (m_writing || !m_close_after_write || m_closed) return;
    m_closed = true;
    m_idle.cancel();
    m_ws.async_close(websocket::close_code::normal,
                     [self = shared_from_this()](beast::error_code) {});
  }

  websocket::stream<beast::tcp_stream> m_ws;
  EnvServer::Impl& m_env;
  net::steady_timer m_idle;
  beast::flat_buffer m_buffer;
  std::deque<std::string> m_inbox;
  std::deque<std::string> m_outbox;
  LivePtr m_ep;  // the episode this session attached to
  double m_last = 0;
  bool m_busy = false, m_writing = false, m_closing = false, m_close_after_write = false,
       m_closed = false;
  bool m_counted = false;
};

// One HTTP connection of the environment port; upgrades /ws to a WsSession.
class HttpConn : public std::enable_shared_from_this<HttpConn> {
 public:
  HttpConn(tcp::socket&& socket, EnvServer::Impl& env) : m_stream(std::move(socket)), m_env(env) {}

  void read() {
    m_parser.emplace();
    m_parser->body_limit(static_cast<std::uint64_t>(m_env.daemon.config().max_body_bytes));
    m_stream.expires_after(std::chrono::seconds(m_env.daemon.config().read_timeout_s));
    http::async_read(m_stream, m_buffer, *m_parser,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec == http::error::body_limit)
                         return self->reply(413, {{"error", "request body too large"}}, false);
                       if (ec) return;
                       self->on_request(self->m_parser->release());
                     });
  }

 private:
  void on_request(http::request<http::string_body> req) {
    m_keep_alive = req.keep_alive();
    std::string target(req.target());
    auto t = parse_target(target);
    const std::string& path = t.path;
    const bool upgrade = websocket::is_upgrade(req);
    // Tokens in URLs never reach the log.
    KLOG_DEBUG("openenv: {} {}{}", std::string(req.method_string()), redact_token(target),
               upgrade ? " (WebSocket upgrade)" : "");
    if (path != "/health" && !m_env.authorized(req, t)) {
      bool offered = !req[http::field::authorization].empty() || t.token ||
                     EnvServer::Impl::bearer_subprotocol(req);
      KLOG_INFO("openenv: refused {} {}: {} token", std::string(req.method_string()),
                redact_token(target), offered ? "wrong" : "no");
      return reply(401, {{"error", offered ? "wrong bearer token" : "missing bearer token"}});
    }
    if (upgrade) {
      if (path != "/ws") return reply(404, {{"error", "WebSocket is served on /ws"}});
      KLOG_INFO("openenv: session opened ({})", redact_token(target));
      m_stream.expires_never();
      std::make_shared<WsSession>(m_stream.release_socket(), m_env)->run(std::move(req));
      return;
    }
    auto method = req.method();
    if (path == "/health" && method == http::verb::get) return reply(200, {{"status", "healthy"}});
    if (path == "/metadata" && method == http::verb::get)
      return reply(200, EnvServer::Impl::metadata());
    if (path == "/schema" && method == http::verb::get)
      return reply(200, EnvServer::Impl::schema());
    if (path == "/ws") return reply(400, {{"error", "/ws needs a WebSocket upgrade"}});
    json body = json::object();
    if (method == http::verb::post && !req.body().empty()) {
      body = json::parse(req.body(), nullptr, false);
      if (body.is_discarded())
        return reply(400, {{"error", "malformed JSON"}, {"code", env_code(EnvCode::invalid_json)}});
    }
    if (path == "/reset" && method == http::verb::post) {
      auto self = shared_from_this();
      m_env.reset(body, [self](std::expected<std::pair<LivePtr, json>, EnvError> r) {
        net::post(self->m_stream.get_executor(), [self, r = std::move(r)] {
          if (!r)
            return self->reply(400,
                               {{"error", r.error().message}, {"code", r.error().code_name()}});
          self->reply(200, r->second);
        });
      });
      return;
    }
    if (path == "/state" && method == http::verb::get) {
      std::string id = t.params.count("episode_id") ? t.params["episode_id"] : "";
      if (id.empty()) return reply(200, m_env.state(nullptr));
      auto ep = m_env.attach(id);
      if (!ep) return reply(400, {{"error", ep.error().message}, {"code", ep.error().code_name()}});
      if (!*ep) return reply(404, {{"error", "no episode '" + id + "'"}});
      return reply(200, m_env.state(*ep));
    }
    if (path == "/step" && method == http::verb::post) {
      // OpenEnv's StepRequest: {"action": {...}, "timeout_s"?, "request_id"?}.
      // Its HTTP server is stateless (a fresh environment per request), and
      // so is this one: without `episode_id` (an extra field, which
      // StepRequest allows) the action runs on a fresh episode of the pool,
      // as a reset without a task would pick; with it, on that stored episode.
      if (!body.is_object() || !body.contains("action") || !body["action"].is_object()) {
        return reply(422, {{"error",
                            "POST /step needs {\"action\": {\"code\": string, "
                            "\"action\": \"CHECK\"|\"SUBMIT\"}}"},
                           {"code", env_code(EnvCode::validation_error)}});
      }
      if (body.contains("episode_id") && !body["episode_id"].is_null()) {
        if (!body["episode_id"].is_string())
          return reply(422, {{"error", "'episode_id' must be a string"},
                             {"code", env_code(EnvCode::validation_error)}});
        auto ep = m_env.attach(body["episode_id"].get<std::string>());
        if (!ep)
          return reply(400, {{"error", ep.error().message}, {"code", ep.error().code_name()}});
        if (!*ep)
          return reply(404,
                       {{"error", "no episode '" + body["episode_id"].get<std::string>() + "'"}});
        return step_on(*ep, body["action"]);
      }
      // A fresh episode: a reset without a task or an id answers at once.
      auto self = shared_from_this();
      m_env.reset(json::object(), [self, action = body["action"]](
                                      std::expected<std::pair<LivePtr, json>, EnvError> r) {
        net::post(self->m_stream.get_executor(), [self, action, r = std::move(r)] {
          if (!r)
            return self->reply(r.error().code == EnvCode::validation_error ? 422 : 500,
                               {{"error", r.error().message}, {"code", r.error().code_name()}});
          self->step_on(r->first, action);
        });
      });
      return;
    }
    reply(404, {{"error", "no route " + std::string(req.method_string()) + " " + path}});
  }

  // Runs `action` on `ep` and replies with its observation.
  void step_on(const LivePtr& ep, const json& action) {
    auto self = shared_from_this();
    m_env.step(ep, action, [self](std::expected<json, EnvError> r) {
      net::post(self->m_stream.get_executor(), [self, r = std::move(r)] {
        if (!r)
          return self->reply(r.error().code == EnvCode::validation_error ? 422
                             : r.error().code == EnvCode::episode_busy   ? 409
                                                                         : 500,
                             {{"error", r.error().message}, {"code", r.error().code_name()}});
        self->reply(200, *r);
      });
    });
  }

  void reply(int status, const json& body, bool keep = true) {
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, "application/json");
    res->keep_alive(keep && m_keep_alive);
    res->body() = body.dump();
    res->prepare_payload();
    m_stream.expires_after(std::chrono::seconds(m_env.daemon.config().write_timeout_s));
    http::async_write(m_stream, *res,
                      [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
                        if (ec || !res->keep_alive()) {
                          beast::error_code ignored;
                          self->m_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
                          return;
                        }
                        self->read();
                      });
  }

  beast::tcp_stream m_stream;
  EnvServer::Impl& m_env;
  beast::flat_buffer m_buffer;
  std::optional<http::request_parser<http::string_body>> m_parser;
  bool m_keep_alive = false;
};

}  // namespace

void EnvServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec || stopping.load()) return;
    std::make_shared<HttpConn>(std::move(socket), *this)->read();
    accept();
  });
}

Result<std::unique_ptr<EnvServer>> EnvServer::bind(Daemon& daemon, const std::string& token) {
  if (!daemon.config().env_address)
    return fail(ErrorKind::invalid, "env_listen is off: no OpenEnv endpoint to bind");
  const HostPort& at = *daemon.config().env_address;
  auto s = std::unique_ptr<EnvServer>(new EnvServer());
  s->m = std::make_unique<Impl>(daemon);
  auto& m = *s->m;
  m.token = token;
  if (auto r = m.ensure_campaign(); !r) return std::unexpected(r.error());
  // The pool's sequence goes on across restarts: one pick per stored episode.
  if (auto eps = daemon.store().list_episodes(m.campaign_id))
    m.picks = static_cast<std::uint64_t>(eps->size());
  beast::error_code ec;
  auto addr = net::ip::make_address(at.host == "localhost" ? "127.0.0.1" : at.host, ec);
  if (ec) return fail(ErrorKind::invalid, "env_listen: bad address '" + at.host + "'");
  tcp::endpoint ep(addr, static_cast<unsigned short>(at.port));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(daemon.config().listen_backlog, ec);
  if (ec)
    return fail(ErrorKind::unavailable,
                "cannot listen on " + daemon.config().env_listen + ": " + ec.message());
  m.port = m.acceptor.local_endpoint().port();
  return s;
}

EnvServer::~EnvServer() { stop(); }
int EnvServer::port() const { return m->port; }

void EnvServer::start() {
  m->accept();
  for (int i = 0; i < 2; ++i) m->threads.emplace_back([this] { m->ioc.run(); });
}

void EnvServer::stop() {
  if (!m || m->stopping.exchange(true)) return;
  net::post(m->ioc, [this] {
    beast::error_code ec;
    m->acceptor.close(ec);
  });
  {
    std::lock_guard lock(m->mutex);
    for (auto& s : m->live) std::static_pointer_cast<WsSession>(s)->close("the server is stopping");
  }
  // Give sessions a moment to send their last frame, then stop the loop.
  auto deadline = now_mono() + 2;
  while (now_mono() < deadline) {
    {
      std::lock_guard lock(m->mutex);
      if (m->live.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  m->ioc.stop();
  for (auto& t : m->threads) t.join();
  m->threads.clear();
}

}  // namespace korch::daemon
