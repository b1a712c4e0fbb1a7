#include "daemon/daemon.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <regex>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>

#include "agent/episode.hpp"
#include "agent/runner.hpp"
#include "config/loader.hpp"
#include "config/tasks.hpp"
#include "store/work_queue.hpp"
#include "util/fs.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace korch::daemon {

struct Daemon::Campaign {
  std::string id;
  std::string name;
  std::string toml_path;
  config::CampaignConfig cfg;
  CampaignState state = CampaignState::active;  // wanted (persisted)
  DrivePhase phase = DrivePhase::queued;        // now
  std::string message;
  double submitted_at = 0;
  agent::Progress progress;          // the runner's, this run; counts come from `stored`
  store::CampaignCounts stored;      // the store's counts, re-read at most every k_counts_every_s
  double stored_at = -1;             // now_mono() of that read; -1 = never
  std::uint64_t stored_version = 0;  // m_version at that read
  double driven_before_s = 0;        // seconds driven by earlier runs (persisted)
  double run_started = -1;           // now_mono() at the start of this run; -1 = not running
  double persisted_at = 0;           // now_mono() of the last periodic persist
  std::atomic<bool> stop{false};
  std::thread thread;
  bool thread_done = true;
};

namespace {

std::string random_owner() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host, ::getpid(), rd());
}

agent::Progress progress_of(const store::CampaignCounts& c) {
  agent::Progress p;
  p.episodes = c.episodes;
  p.final = c.final;
  p.failed = c.final - c.correct;
  p.turns = c.turns;
  p.tokens = c.prompt_tokens + c.completion_tokens;
  p.cost_usd = c.cost_usd;
  return p;
}

// An episode and, once it ended, its final: what the campaign's listing and
// the episode route show of it.
nlohmann::json episode_json(const store::EpisodeSummary& e, const store::FinalRow* f) {
  nlohmann::json j = {{"id", e.id},
                      {"campaign_id", e.campaign_id},
                      {"task_id", e.task_id},
                      {"model_id", e.model_id},
                      {"sample", e.sample_index},
                      {"status", std::string(to_string(e.status))},
                      {"tokens", e.tokens_used},
                      {"cost_usd", e.cost_usd},
                      {"active_s", e.active_s}};
  if (f) {
    j["final"] = {{"reason", std::string(to_string(f->reason))},
                  {"verdict", f->verdict},
                  {"correct", f->correct},
                  {"reward", f->reward}};
    if (f->speedup) j["final"]["speedup"] = *f->speedup;
  }
  return j;
}

// Stored counts are re-read at most this often (on a change).
constexpr double k_counts_every_s = 0.5;
// A running campaign's driven time is persisted this often (kill -9 loses at most this much).
constexpr double k_persist_every_s = 2;

nlohmann::json progress_json(const agent::Progress& p) {
  return {{"episodes", p.episodes}, {"final", p.final},       {"correct", p.final - p.failed},
          {"running", p.running},   {"failed", p.failed},     {"turns", p.turns},
          {"tokens", p.tokens},     {"cost_usd", p.cost_usd}, {"elapsed_s", p.elapsed_s},
          {"eta_s", p.eta_s}};
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// TOML text of a JSON scalar or array of scalars.
Result<std::string> toml_value(const nlohmann::json& v, const std::string& key) {
  if (v.is_string() || v.is_boolean() || v.is_number_integer() || v.is_number_unsigned())
    return v.dump();
  if (v.is_number_float()) {
    auto s = v.dump();
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
  }
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      auto e = toml_value(v[i], key);
      if (!e) return e;
      out += (i ? ", " : "") + *e;
    }
    return out + "]";
  }
  return fail(ErrorKind::invalid, "'" + key + "': unsupported JSON value (null or nested object)");
}

bool is_table_array(const nlohmann::json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (auto& e : v) {
    if (!e.is_object()) return false;
  }
  return true;
}

Result<void> emit_table(const nlohmann::json& obj, const std::string& path, std::string& out) {
  std::vector<std::pair<std::string, const nlohmann::json*>> tables, arrays;
  for (auto& [k, v] : obj.items()) {
    auto name = path.empty() ? k : path + "." + k;
    auto quoted = nlohmann::json(k).dump();
    if (v.is_object()) {
      tables.emplace_back(name, &v);
    } else if (is_table_array(v)) {
      arrays.emplace_back(name, &v);
    } else {
      auto t = toml_value(v, name);
      if (!t) return std::unexpected(t.error());
      out += quoted + " = " + *t + "\n";
    }
  }
  for (auto& [name, v] : tables) {
    out += "[" + name + "]\n";
    if (auto r = emit_table(*v, name, out); !r) return r;
  }
  for (auto& [name, v] : arrays) {
    for (auto& e : *v) {
      out += "[[" + name + "]]\n";
      if (auto r = emit_table(e, name, out); !r) return r;
    }
  }
  return {};
}

}  // namespace

Result<std::string> json_to_toml(const nlohmann::json& j) {
  if (!j.is_object()) return fail(ErrorKind::invalid, "a JSON campaign must be an object");
  std::string out;
  if (auto r = emit_table(j, "", out); !r) return std::unexpected(r.error());
  return out;
}

Result<std::unique_ptr<Daemon>> Daemon::open(const ServeConfig& cfg_in) {
  ServeConfig cfg = cfg_in;
  std::error_code ec;
  auto location = store::parse_location(cfg.db);
  if (!location) return std::unexpected(location.error());
  bool sqlite = location->backend == store::Backend::sqlite;
  if (sqlite) cfg.db = fs::absolute(location->target, ec).string();  // a URL stays as written
  cfg.state_dir = fs::absolute(cfg.state_dir, ec).string();
  std::unique_ptr<Daemon> d(new Daemon(cfg));
  if (sqlite) {
    auto lock = FileLock::acquire(FileLock::path_for_db(cfg.db));
    if (!lock) return std::unexpected(lock.error());
    d->m_lock.emplace(std::move(*lock));
  }
  store::Options so;
  so.path = cfg.db;
  auto st = store::Store::open(so);
  if (!st) return std::unexpected(st.error());
  d->m_store = std::move(*st);
  config::CampaignConfig ecfg;
  ecfg.db_path = cfg.db;
  ecfg.evaluator = cfg.evaluator;
  auto ev = evaluator::make_evaluator(cfg.evaluator, agent::default_cache_dir(ecfg), {cfg.db, ""});
  if (!ev) return fail(ev.error().kind, "evaluator: " + ev.error().message);
  d->m_evaluator = d->m_metrics.wrap(std::move(*ev));
  d->m_owner = random_owner();
  fs::create_directories(fs::path(cfg.state_dir) / "campaigns", ec);
  if (ec) return fail(cfg.state_dir + ": " + ec.message());
  return d;
}

Daemon::Daemon(ServeConfig cfg) : m_cfg(std::move(cfg)) {}
Daemon::~Daemon() { stop(); }

Result<void> Daemon::persist(const Campaign& c) {
  nlohmann::json j = {
      {"id", c.id},
      {"name", c.name},
      {"state", to_string(c.state)},
      {"submitted_at", c.submitted_at},
      {"driven_s", c.driven_before_s + (c.run_started >= 0 ? now_mono() - c.run_started : 0)}};
  return write_file_atomic(fs::path(m_cfg.state_dir) / "campaigns" / (c.id + ".json"),
                           j.dump(2) + "\n");
}

void Daemon::resume_all() {
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(fs::path(m_cfg.state_dir) / "campaigns", ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::lock_guard lock(m_mutex);
  for (auto& f : files) {
    auto text = read_file(f);
    if (!text) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.contains("id")) {
      KLOG_WARN("serve: {} is not a campaign state file; skipped", f.string());
      continue;
    }
    auto c = std::make_unique<Campaign>();
    c->id = j.value("id", "");
    c->name = j.value("name", "");
    // An unknown word (a newer korch's state, a hand edit) pauses it: listed,
    // resumable, and never driven -- never spending -- on a guess.
    const std::string word = j.value("state", "active");
    if (auto state = enum_from_name<CampaignState>(word)) {
      c->state = *state;
    } else {
      KLOG_WARN("serve: {}: unknown campaign state '{}'; the campaign stays paused", f.string(),
                word);
      c->state = CampaignState::paused;
    }
    c->submitted_at = j.value("submitted_at", 0.0);
    c->driven_before_s = j.value("driven_s", 0.0);
    c->toml_path = (f.parent_path() / (c->id + ".toml")).string();
    auto loaded =
        config::load_campaign(c->toml_path, {}, {"db_path=" + m_cfg.db, "store.url=" + m_cfg.db});
    if (!loaded) {
      c->phase = DrivePhase::invalid;
      c->message = loaded.error().message;
    } else {
      c->cfg = loaded->config;
    }
    if (auto counts = m_store->counts(c->id)) c->progress = progress_of(*counts);
    auto& ref = *c;
    m_campaigns[c->id] = std::move(c);
    if (ref.phase != DrivePhase::invalid && ref.state == CampaignState::active) {
      KLOG_INFO("serve: resuming campaign '{}'", ref.name);
      start_thread(ref);
    } else {
      if (ref.phase != DrivePhase::invalid) ref.phase = DrivePhase::idle;
    }
  }
}

void Daemon::start_thread(Campaign& c) {
  if (c.thread.joinable()) c.thread.join();  // only called once the old one finished
  c.thread_done = false;
  c.phase = DrivePhase::queued;
  c.thread = std::thread([this, &c] { drive(c); });
}

void Daemon::drive(Campaign& c) {
  for (;;) {
    {
      std::unique_lock lock(m_mutex);
      // (a pause before this thread first ran already made it idle: stop_driving)
      m_cv.wait(lock, [&] { return m_stopping.load() || c.state != CampaignState::paused; });
      if (m_stopping.load() || c.state != CampaignState::active) {
        c.phase = DrivePhase::idle;
        c.thread_done = true;
        ++m_version;
        return;
      }
      c.stop.store(false);
      c.phase = DrivePhase::running;
      c.message.clear();
      c.run_started = now_mono();
      c.persisted_at = c.run_started;
    }
    ++m_version;
    agent::RunOptions opts;
    opts.owner = m_owner;
    opts.holds_db_lock = m_lock.has_value();  // no file lock on a PostgreSQL store
    opts.stop = &c.stop;
    opts.progress_interval_s = 0.5;
    opts.on_progress = [this, &c](const agent::Progress& p) {
      std::lock_guard lock(m_mutex);
      c.progress = p;
      ++m_version;
      if (now_mono() - c.persisted_at >= k_persist_every_s) {
        c.persisted_at = now_mono();
        (void)persist(c);  // the driven time survives a kill -9
      }
    };
    agent::RunnerHooks hooks;
    hooks.wrap_client = [this](std::unique_ptr<llm::ChatClient> inner) {
      return m_metrics.wrap(std::move(inner));
    };
    hooks.wrap_evaluator = [this](std::unique_ptr<evaluator::Evaluator> inner) {
      return m_metrics.wrap(std::move(inner));
    };
    auto r = agent::run_campaign_wired(c.cfg, *m_store, opts, hooks);
    std::lock_guard lock(m_mutex);
    ++m_version;
    c.driven_before_s += now_mono() - c.run_started;
    c.run_started = -1;
    (void)persist(c);
    if (!r || r->status == agent::RunStatus::aborted) {
      c.phase = DrivePhase::aborted;
      c.message = r ? r->message : r.error().message;
      if (r) c.progress = r->progress;
      KLOG_WARN("serve: campaign '{}' aborted: {}", c.name, c.message);
      c.thread_done = true;
      return;
    }
    c.progress = r->progress;
    c.progress.running = 0;
    if (r->status == agent::RunStatus::completed) {
      c.state = CampaignState::completed;
      c.phase = DrivePhase::idle;
      (void)persist(c);
      KLOG_INFO("serve: campaign '{}' complete", c.name);
      c.thread_done = true;
      return;
    }
    // stopped: paused, cancelled, resumed meanwhile, or the daemon stops.
    c.phase = DrivePhase::idle;
  }
}

void Daemon::stop() {
  if (m_stopping.exchange(true)) return;
  std::vector<Campaign*> all;
  {
    std::lock_guard lock(m_mutex);
    for (auto& [id, c] : m_campaigns) {
      c->stop.store(true);
      if (c->phase == DrivePhase::running) c->phase = DrivePhase::stopping;
      all.push_back(c.get());
    }
  }
  m_cv.notify_all();
  for (auto* c : all) {
    if (c->thread.joinable()) c->thread.join();
  }
  if (m_evaluator) m_evaluator->shutdown();
  if (m_store) m_store->close();
}

Daemon::Campaign* Daemon::find(const std::string& id_or_name) {
  if (auto it = m_campaigns.find(id_or_name); it != m_campaigns.end()) return it->second.get();
  for (auto& [id, c] : m_campaigns) {
    if (c->name == id_or_name) return c.get();
  }
  return nullptr;
}

nlohmann::json Daemon::describe(Campaign& c) {
  return {{"id", c.id},
          {"name", c.name},
          {"state", to_string(c.state)},
          {"phase", to_string(c.phase)},
          {"message", c.message},
          {"submitted_at", c.submitted_at},
          {"evaluator", std::string(config::to_string(c.cfg.evaluator.mode))},
          {"progress", progress_json(merged_progress(c))}};
}

agent::Progress Daemon::merged_progress(const Campaign& c) const {
  // The store's counts once read (they hold every process's work); what only
  // this process knows (episodes in flight, the estimate) from its own.
  agent::Progress p = c.stored_at >= 0 ? progress_of(c.stored) : c.progress;
  p.running = c.progress.running;
  p.eta_s = agent::eta_of(p, c.progress.eta_s);
  p.elapsed_s = c.driven_before_s + (c.run_started >= 0 ? now_mono() - c.run_started : 0);
  return p;
}

void Daemon::refresh_counts() {
  std::vector<std::string> stale;
  {
    std::lock_guard lock(m_mutex);
    double now = now_mono();
    for (auto& [id, c] : m_campaigns) {
      // A running campaign's counts are re-read at most every
      // k_counts_every_s; any other change (a run ended) at once.
      const bool changed = c->stored_version != m_version.load();
      if (c->stored_at < 0 ||
          (changed && (c->phase != DrivePhase::running || now - c->stored_at >= k_counts_every_s)))
        stale.push_back(id);
    }
  }
  for (auto& id : stale) {
    auto version = m_version.load();
    auto counts = m_store->counts(id);  // outside the lock: a read of the store
    if (!counts) continue;
    std::lock_guard lock(m_mutex);
    if (auto it = m_campaigns.find(id); it != m_campaigns.end()) {
      it->second->stored = *counts;
      it->second->stored_at = now_mono();
      it->second->stored_version = version;
    }
  }
}

Reply Daemon::submit(const std::string& body, bool json) {
  if (m_stopping.load()) return Reply::error(503, "the daemon is stopping");
  std::string toml = body;
  if (json) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) return Reply::error(400, "malformed JSON");
    auto t = json_to_toml(j);
    if (!t) return Reply::error(400, t.error().message);
    toml = *t;
  }
  static std::atomic<int> counter{0};
  auto dir = fs::path(m_cfg.state_dir) / "campaigns";
  auto incoming = dir / fmt::format(".incoming-{}-{}.toml", ::getpid(), counter++);
  if (auto w = write_file_atomic(incoming, toml); !w) return Reply::error(w.error());
  std::error_code ec;
  auto discard = [&](Reply r) {
    fs::remove(incoming, ec);
    return r;
  };
  auto loaded = config::load_campaign(incoming.string(), {},
                                      {"db_path=" + m_cfg.db, "store.url=" + m_cfg.db});
  if (!loaded)
    return discard(
        Reply::error(400, replace_all(loaded.error().message, incoming.string(), "campaign")));
  auto& cfg = loaded->config;
  auto tasks = config::load_tasks(cfg.tasks);
  if (!tasks) return discard(Reply::error(400, tasks.error().message));
  if (tasks->empty()) return discard(Reply::error(400, "the task selection is empty"));
  for (auto& m : cfg.models) {
    if (!m.api_key_env.empty() && !std::getenv(m.api_key_env.c_str())) {
      return discard(Reply::error(
          400, fmt::format("model {}: api_key_env {} is not set in the daemon's environment", m.id,
                           m.api_key_env)));
    }
  }
  auto id = ids::campaign_id(cfg.name);
  std::lock_guard lock(m_mutex);
  if (auto* existing = find(id)) {
    return discard(Reply::error(409, fmt::format("campaign '{}' exists ({}); pick another name",
                                                 cfg.name, to_string(existing->state))));
  }
  auto c = std::make_unique<Campaign>();
  c->id = id;
  c->name = cfg.name;
  c->cfg = cfg;
  c->toml_path = (dir / (id + ".toml")).string();
  c->submitted_at = now_unix();
  fs::rename(incoming, c->toml_path, ec);
  if (ec) return discard(Reply::error(500, "cannot keep the campaign file: " + ec.message()));
  if (auto p = persist(*c); !p) return Reply::error(p.error());
  if (auto counts = m_store->counts(id)) c->progress = progress_of(*counts);
  auto& ref = *c;
  m_campaigns[id] = std::move(c);
  for (auto& w : loaded->warnings) KLOG_WARN("serve: campaign '{}': {}", ref.name, w);
  KLOG_INFO("serve: campaign '{}' submitted ({} tasks)", ref.name, tasks->size());
  start_thread(ref);
  ++m_version;
  auto d = describe(ref);
  d["tasks"] = tasks->size();
  return {201, d};
}

Reply Daemon::list() {
  refresh_counts();
  std::lock_guard lock(m_mutex);
  nlohmann::json arr = nlohmann::json::array();
  for (auto& [id, c] : m_campaigns) arr.push_back(describe(*c));
  return {200, {{"campaigns", arr}}};
}

Reply Daemon::workers() {
  nlohmann::json arr = nlohmann::json::array();
  if (store::is_postgres_url(m_cfg.db)) {
    auto q = store::WorkQueue::open(m_cfg.db, false);
    if (!q) return Reply::error(q.error());
    auto rows = (*q)->list_workers();
    if (!rows) return Reply::error(rows.error());
    for (const auto& w : *rows) {
      arr.push_back({{"id", w.id},
                     {"host", w.host},
                     {"pid", w.pid},
                     {"gpus", w.gpus},
                     {"slots", w.slots},
                     {"korch_version", w.korch_version},
                     {"evaluator_version", w.evaluator_version},
                     {"mode", w.mode},
                     {"state", w.state},
                     {"note", w.note},
                     {"started_at", w.started_at},
                     {"heartbeat_at", w.heartbeat_at},
                     {"evaluations_done", w.evaluations_done}});
    }
  }
  return {200, {{"workers", arr}}};
}

Reply Daemon::get(const std::string& id) {
  refresh_counts();
  nlohmann::json d;
  {
    std::lock_guard lock(m_mutex);
    auto* c = find(id);
    if (!c) return Reply::error(404, "no campaign '" + id + "'");
    d = describe(*c);
  }
  if (auto counts = m_store->counts(d["id"].get<std::string>())) {
    d["counts"] = {{"episodes", counts->episodes},
                   {"pending", counts->pending},
                   {"running", counts->running},
                   {"final", counts->final},
                   {"turns", counts->turns},
                   {"llm_calls", counts->llm_calls},
                   {"prompt_tokens", counts->prompt_tokens},
                   {"completion_tokens", counts->completion_tokens},
                   {"cost_usd", counts->cost_usd},
                   {"submitted", counts->submitted},
                   {"correct", counts->correct}};
  }
  return {200, d};
}

Reply Daemon::pause(const std::string& id) {
  std::lock_guard lock(m_mutex);
  auto* c = find(id);
  if (!c) return Reply::error(404, "no campaign '" + id + "'");
  if (c->state != CampaignState::active) {
    return Reply::error(
        409, "campaign '" + c->name + "' is " + std::string(to_string(c->state)) + ", not active");
  }
  return stop_driving(*c, CampaignState::paused);
}

Reply Daemon::resume(const std::string& id) {
  std::lock_guard lock(m_mutex);
  if (m_stopping.load()) return Reply::error(503, "the daemon is stopping");
  auto* c = find(id);
  if (!c) return Reply::error(404, "no campaign '" + id + "'");
  if (c->phase == DrivePhase::invalid)
    return Reply::error(409, "campaign '" + c->name + "' has an invalid config: " + c->message);
  if (c->state == CampaignState::completed || c->state == CampaignState::cancelled) {
    return Reply::error(409, "campaign '" + c->name + "' is " + std::string(to_string(c->state)));
  }
  if (c->state == CampaignState::active && !c->thread_done) return {200, describe(*c)};
  c->state = CampaignState::active;
  if (auto p = persist(*c); !p) return Reply::error(p.error());
  if (c->thread_done) start_thread(*c);
  m_cv.notify_all();
  ++m_version;
  return {200, describe(*c)};
}

Reply Daemon::cancel(const std::string& id) {
  std::lock_guard lock(m_mutex);
  auto* c = find(id);
  if (!c) return Reply::error(404, "no campaign '" + id + "'");
  if (c->state == CampaignState::completed || c->state == CampaignState::cancelled) {
    return Reply::error(409, "campaign '" + c->name + "' is " + std::string(to_string(c->state)));
  }
  return stop_driving(*c, CampaignState::cancelled);
}

// Pause and cancel alike: the new state is stored, the campaign's thread is
// told to stop (in-flight work commits or is abandoned), watchers wake.
Reply Daemon::stop_driving(Campaign& c, CampaignState state) {
  c.state = state;
  c.stop.store(true);
  if (c.phase == DrivePhase::running) c.phase = DrivePhase::stopping;
  // Its thread has not run yet (a pause right after the create): when it
  // does, it only waits, so the campaign is idle from now on -- the reply
  // and every later read say so, whichever thread runs first.
  if (c.phase == DrivePhase::queued) c.phase = DrivePhase::idle;
  if (auto p = persist(c); !p) return Reply::error(p.error());
  m_cv.notify_all();
  ++m_version;
  return {200, describe(c)};
}

Reply Daemon::episodes(const std::string& id_or_name) {
  std::string id = id_or_name;
  {
    std::lock_guard lock(m_mutex);
    if (auto* c = find(id_or_name)) id = c->id;
  }
  auto camp = m_store->get_campaign(id);
  if (!camp) return Reply::error(camp.error());
  if (!*camp) return Reply::error(404, "no campaign '" + id_or_name + "'");
  auto eps = m_store->list_episodes(id);
  auto finals = m_store->list_finals(id);
  if (!eps || !finals) return Reply::error(!eps ? eps.error() : finals.error());
  std::map<std::string, const store::FinalRow*> by_ep;
  for (auto& f : *finals) by_ep[f.episode_id] = &f;
  nlohmann::json arr = nlohmann::json::array();
  for (auto& e : *eps) {
    auto it = by_ep.find(e.id);
    arr.push_back(episode_json(e, it == by_ep.end() ? nullptr : it->second));
  }
  return {200, {{"campaign_id", id}, {"episodes", arr}}};
}

std::optional<std::string> Daemon::campaign_id_of(const std::string& id_or_name) {
  {
    std::lock_guard lock(m_mutex);
    if (auto* c = find(id_or_name)) return c->id;
  }
  for (auto& id : {id_or_name, ids::campaign_id(id_or_name)}) {
    if (auto c = m_store->get_campaign(id); c && *c) return id;
  }
  return std::nullopt;
}

Reply Daemon::episode(const std::string& episode_id) {
  auto snap = m_store->load_episode(episode_id);
  if (!snap) return Reply::error(snap.error());
  if (!*snap) return Reply::error(404, "no episode '" + episode_id + "'");
  auto& s = **snap;
  nlohmann::json turns = nlohmann::json::array();
  for (auto& t : s.turns) {
    std::string feedback, reply;
    for (auto& m : s.messages) {
      if (m.turn == t.turn && m.role == store::Role::user && m.kind != store::MessageKind::task &&
          m.kind != store::MessageKind::context) {
        feedback = m.content;
      }
      if (m.turn == t.turn && m.role == store::Role::assistant) reply = m.content;
    }
    turns.push_back({{"turn", t.turn},
                     {"model_id", t.model_id},
                     {"action", t.action},
                     {"parse_status", t.parse_status},
                     {"code", t.code},
                     {"reply", reply},
                     {"verdict", t.eval_status},
                     {"feedback", feedback},
                     {"finish_reason", t.finish_reason},
                     {"prompt_tokens", t.prompt_tokens},
                     {"completion_tokens", t.completion_tokens},
                     {"llm_latency_s", t.llm_latency_s},
                     {"at", t.at}});
  }
  auto j = episode_json(s.episode, s.final ? &*s.final : nullptr);
  j["turns"] = std::move(turns);
  return {200, j};
}

Result<config::Task> Daemon::resolve_task(const nlohmann::json& spec) {
  std::string path;
  int level = 0, number = 0;
  std::string id;  // "L1/19_ReLU", the id an observation names: the task must be that one
  if (spec.is_string()) {
    auto s = spec.get<std::string>();
    static const std::regex k_level_number(R"(L?(\d+)/(\d+)(_[^/]*)?)");
    std::smatch m;
    if (std::regex_match(s, m, k_level_number)) {
      level = std::atoi(m[1].str().c_str());
      number = std::atoi(m[2].str().c_str());
      if (m[3].matched) id = s;
    } else if (!std::filesystem::exists(s) && !m_cfg.env_tasks_dir.empty()) {
      // A task id of the pool's folder without a level ("1_ReLU_small").
      config::TaskSelection sel;
      sel.kernelbench_dir = m_cfg.env_tasks_dir;
      sel.levels = m_cfg.env_levels;
      if (auto tasks = config::load_tasks(sel)) {
        for (auto& t : *tasks)
          if (t.id == s) return t;
      }
      path = s;
    } else {
      path = s;
    }
  } else if (spec.is_object()) {
    if (spec.contains("path") && spec["path"].is_string()) {
      path = spec["path"].get<std::string>();
    } else if (spec.contains("level") && spec.contains("number") &&
               spec["level"].is_number_integer() && spec["number"].is_number_integer()) {
      level = spec["level"].get<int>();
      number = spec["number"].get<int>();
    }
  }
  if (!path.empty()) return config::load_task_file(path);
  if (level <= 0 || number <= 0) {
    return fail(ErrorKind::invalid,
                "task: give {\"path\": FILE}, {\"level\": L, \"number\": N}, \"L/N\" or a task "
                "id (\"L1/19_ReLU\")");
  }
  if (m_cfg.env_tasks_dir.empty()) {
    return fail(ErrorKind::invalid,
                "task: level/number needs env.tasks_dir (--env-tasks-dir) in the daemon's config");
  }
  config::TaskSelection sel;
  sel.kernelbench_dir = m_cfg.env_tasks_dir;
  sel.levels = {level};
  sel.ids = std::to_string(number);
  auto tasks = config::load_tasks(sel);
  if (!tasks) return std::unexpected(with_kind(tasks.error(), ErrorKind::invalid));
  if (tasks->empty())
    return fail(ErrorKind::invalid,
                fmt::format("task: no task {}/{} in {}", level, number, sel.kernelbench_dir));
  auto stem = [](const std::string& x) { return x.substr(x.rfind('/') + 1); };
  if (!id.empty() && stem(tasks->front().id) != stem(id)) {
    return fail(ErrorKind::invalid,
                fmt::format("task: no task {} in {} ({}/{} is {})", id, sel.kernelbench_dir, level,
                            number, tasks->front().id));
  }
  return tasks->front();
}

Reply Daemon::evaluate(const nlohmann::json& req) {
  if (m_stopping.load()) return Reply::error(503, "the daemon is stopping");
  if (!req.is_object()) return Reply::error(400, "expected a JSON object");
  if (!req.contains("code") || !req["code"].is_string())
    return Reply::error(400, "'code' (a string) is required");
  if (!req.contains("task")) return Reply::error(400, "'task' is required");
  auto mode = req.value("mode", std::string("check"));
  const auto eval_mode = evaluator::mode_from_string(mode);
  if (!eval_mode) return Reply::error(400, "'mode' must be check or submit");
  auto task = resolve_task(req["task"]);
  if (!task) return Reply::error(400, task.error().message);
  // An event of the engine's one-off evaluation (agent/episode.hpp): its
  // `running` row commits before the evaluator sees the code.
  agent::Env env;
  env.now = now_unix();
  env.owner = m_owner;
  agent::OneOffEval eval;
  auto step = agent::start_one_off(eval, *task, req["code"].get<std::string>(), *eval_mode, env);
  auto reply_of = [&](const std::string& report_json) -> Reply {
    auto j = nlohmann::json::parse(report_json, nullptr, false);
    return {200, {{"request_id", eval.request.request_id}, {"task_id", task->id}, {"report", j}}};
  };
  // A repeated request is answered from its stored row.
  auto stored = m_store->get_evaluation(eval.request.request_id);
  if (!stored) return Reply::error(stored.error());
  if (*stored && (*stored)->state == store::EvalState::done)
    return reply_of((*stored)->report_json);
  if (auto c = m_store->commit_sync(std::move(step.batch)); !c) return Reply::error(c.error());
  auto promise = std::make_shared<std::promise<evaluator::Report>>();
  auto future = promise->get_future();
  m_evaluator->evaluate(eval.request,
                        [promise](evaluator::Report rep) { promise->set_value(std::move(rep)); });
  if (future.wait_for(std::chrono::duration<double>(m_cfg.eval_timeout_s)) !=
      std::future_status::ready) {
    return Reply::error(504, "the evaluation did not finish within eval_timeout_s");
  }
  auto rep = future.get();
  env.now = now_unix();
  auto done = agent::on_one_off_result(eval, rep, env);
  if (std::holds_alternative<agent::AbortCampaign>(done.next))
    return Reply::error(503, "the evaluation was interrupted (the daemon is stopping)");
  if (auto c = m_store->commit_sync(std::move(done.batch)); !c) return Reply::error(c.error());
  return reply_of(rep.to_json());
}

nlohmann::json Daemon::progress_snapshot() {
  refresh_counts();
  std::lock_guard lock(m_mutex);
  nlohmann::json arr = nlohmann::json::array();
  for (auto& [id, c] : m_campaigns) {
    auto p = merged_progress(*c);
    arr.push_back({{"id", c->id},
                   {"name", c->name},
                   {"state", to_string(c->state)},
                   {"phase", to_string(c->phase)},
                   {"evaluator", std::string(config::to_string(c->cfg.evaluator.mode))},
                   {"progress", progress_json(p)}});
    m_metrics.set_campaign(c->name, c->state, p);
  }
  return {{"campaigns", arr}, {"version", m_version.load()}};
}

}  // namespace korch::daemon
