#include "agent/campaign_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "agent/episode.hpp"
#include "agent/strategy.hpp"
#include "config/loader.hpp"
#include "evaluator/validate_report.hpp"
#include "prompts/prompts.hpp"
#include "util/fs.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace korch::agent {
namespace {

constexpr std::size_t k_episode_insert_batch = 1000;

std::uint64_t fresh_secret_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// The [strategy] table (and, for a non-grid kind, samples_per_task) in
// words, for the error that refuses a changed one.
std::string describe_strategy(const config::CampaignConfig& cfg) {
  const auto& s = cfg.strategy;
  if (s.kind == config::StrategyKind::grid) return "grid";
  return fmt::format(
      "{} (k = {}, target_speedup = {}, parallel = {}, rounds = {}, budget_usd = {}, "
      "budget_gpu_hours = {}, bandit = {}, batch = {}, seed = {}; samples_per_task = {})",
      config::to_string(s.kind), s.k, s.target_speedup, s.parallel, s.rounds, s.budget_usd,
      s.budget_gpu_hours, config::to_string(s.bandit), s.batch, s.seed, cfg.samples_per_task);
}

class Runner {
 public:
  Runner(const config::CampaignConfig& cfg, const CampaignPlan& plan, store::Store& store,
         llm::ChatClient& client, evaluator::Evaluator& evaluator, const RunOptions& options)
      : m_cfg(cfg),
        m_plan(plan),
        m_store(store),
        m_client(client),
        m_evaluator(evaluator),
        m_options(options),
        m_system_prompt(std::make_shared<const std::string>(plan.system_prompt)) {
    for (auto& t : plan.tasks) m_tasks[t->id] = t;
  }

  Result<RunResult> run() {
    if (auto r = register_campaign(); !r) return std::unexpected(r.error());
    auto holder = m_store.acquire_lease(m_plan.campaign_id, m_options.owner, m_options.lease_ttl_s);
    if (!holder) return std::unexpected(holder.error());
    if (*holder && stale_on_this_host((*holder)->owner)) {
      KLOG_WARN("campaign {}: taking over the lease of {} (that process is gone)", m_cfg.name,
                (*holder)->owner);
      if (auto r = m_store.release_lease(m_plan.campaign_id, (*holder)->owner); !r)
        return std::unexpected(r.error());
      holder = m_store.acquire_lease(m_plan.campaign_id, m_options.owner, m_options.lease_ttl_s);
      if (!holder) return std::unexpected(holder.error());
    }
    if (*holder) {
      return fail(fmt::format(
          "campaign '{}' is being driven by another korch process ({}); not starting a second",
          m_cfg.name, (*holder)->owner));
    }
    auto result = drive();
    (void)m_store.release_lease(m_plan.campaign_id, m_options.owner);
    return result;
  }

 private:
  // A lease of another owner "<host>:<pid>:<nonce>" on this host whose
  // process is gone (or that cannot be alive, since we hold the DB lock).
  bool stale_on_this_host(const std::string& owner) const {
    auto first = owner.find(':');
    auto second = owner.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) return false;
    if (owner.substr(0, first) != m_options.owner.substr(0, m_options.owner.find(':')))
      return false;
    if (m_options.holds_db_lock) return true;
    auto pid = std::atoi(owner.substr(first + 1, second - first - 1).c_str());
    return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
  }

  struct Slot {
    EpisodeState state;
    double last_mark = 0;
  };

  // A resumed campaign keeps the strategy it was started with: its decisions
  // (episode ids, rounds, budget spent) were taken under that table and that
  // samples_per_task, and a changed table would start final episodes again
  // (new LLM spend) or count their cost twice. A campaign stored before
  // strategies existed was a grid.
  Result<void> same_strategy(const std::string& stored_config_json) const {
    // A stored config this build cannot read (another version's vocabulary)
    // cannot be compared: the campaign resumes as before this check existed.
    const auto stored = config::config_from_json(stored_config_json);
    if (!stored) {
      KLOG_WARN(
          "campaign '{}': its stored config is not readable ({}); its [strategy] is not "
          "compared with this config's",
          m_cfg.name, stored.error().message);
      return {};
    }
    const auto& was = stored->strategy;
    const auto& is = m_cfg.strategy;
    if (was.kind == config::StrategyKind::grid && is.kind == config::StrategyKind::grid) return {};
    // A non-grid strategy's decisions also depend on samples_per_task.
    if (was == is && stored->samples_per_task == m_cfg.samples_per_task) return {};
    return fail(ErrorKind::invalid,
                fmt::format("campaign '{}' was started with strategy {}; this config says {}. A "
                            "campaign keeps its strategy when resumed (its decisions were taken "
                            "under it): restore the [strategy] table, or give the new one a new "
                            "campaign name",
                            m_cfg.name, describe_strategy(*stored), describe_strategy(m_cfg)));
  }

  // A resumed campaign leaves out the tasks it left out at its start: its
  // episodes and its report rest on that set.
  Result<void> same_exclusions(const std::string& stored_config_json) const {
    std::set<std::string> before, now;
    for (const auto& f : config::excluded_tasks(stored_config_json)) before.insert(f.task_id);
    for (const auto& f : m_plan.excluded) now.insert(f.task_id);
    if (before == now) return {};
    auto list = [](const std::set<std::string>& s) {
      return s.empty() ? std::string("none") : fmt::format("{}", fmt::join(s, ", "));
    };
    return fail(ErrorKind::invalid,
                fmt::format("campaign '{}' was started leaving out the flagged tasks {}; this "
                            "config leaves out {}. Restore tasks.exclude_flagged's report, or "
                            "give the new selection a new campaign name",
                            m_cfg.name, list(before), list(now)));
  }

  Result<void> register_campaign() {
    auto existing = m_store.get_campaign(m_plan.campaign_id);
    if (!existing) return std::unexpected(existing.error());
    if (*existing) {
      m_secret_seed = (*existing)->secret_seed;
      if (auto r = same_strategy((*existing)->config_json); !r) return r;
      if (auto r = same_exclusions((*existing)->config_json); !r) return r;
    } else {
      m_secret_seed = fresh_secret_seed();
    }
    store::WriteBatch batch;
    store::CampaignRow c;
    c.id = m_plan.campaign_id;
    c.name = m_cfg.name;
    // The whole resolved config, from the key tables; never holds a secret.
    // With the tasks the plan left out (tasks.exclude_flagged), for korch report.
    c.config_json = config::with_excluded_tasks(config::config_to_json(m_cfg), m_plan.excluded);
    c.secret_seed = m_secret_seed;
    c.created_at = now_unix();
    batch.put(std::move(c));
    for (auto& t : m_plan.tasks) {
      store::TaskRow row;
      row.campaign_id = m_plan.campaign_id;
      row.task_id = t->id;
      row.level = t->level;
      row.number = t->number;
      row.name = t->name;
      row.path = t->path;
      row.source = t->source;
      batch.put(std::move(row));
    }
    if (auto r = m_store.commit_sync(std::move(batch)); !r) return std::unexpected(r.error());
    // A strategy other than grid starts its episodes itself, decision by
    // decision (strategy_step).
    if (m_strategy) return {};
    // Episodes, in insertion batches (insert-if-absent: re-running creates none).
    batch = store::WriteBatch{};
    double now = now_unix();
    for (auto& t : m_plan.tasks) {
      for (auto& m : m_cfg.models) {
        for (int sample = 0; sample < m_cfg.samples_per_task; ++sample) {
          store::EpisodeRow e;
          e.id = ids::episode_id(m_plan.campaign_id, t->id, m.id, sample);
          e.campaign_id = m_plan.campaign_id;
          e.task_id = t->id;
          e.model_id = m.id;
          e.sample_index = sample;
          e.system_prompt = m_plan.system_prompt;
          e.status = store::EpisodeStatus::pending;
          e.created_at = now;
          e.updated_at = now;
          batch.put(std::move(e));
          if (batch.size() >= k_episode_insert_batch) {
            if (auto r = m_store.commit_sync(std::move(batch)); !r)
              return std::unexpected(r.error());
            batch = store::WriteBatch{};
          }
        }
      }
    }
    if (!batch.empty()) {
      if (auto r = m_store.commit_sync(std::move(batch)); !r) return std::unexpected(r.error());
    }
    return {};
  }

  std::shared_ptr<const EpisodeSpec> spec_for(const store::EpisodeRow& row) {
    auto spec = std::make_shared<EpisodeSpec>();
    spec->campaign_id = m_plan.campaign_id;
    spec->episode_id = row.id;
    auto it = m_tasks.find(row.task_id);
    if (it == m_tasks.end()) return nullptr;
    spec->task = it->second;
    spec->model_id = row.model_id;
    spec->sample_index = row.sample_index;
    spec->max_turns = m_cfg.max_turns;
    spec->context = m_cfg.context;
    // A refine episode's seed (its best verified kernel so far) opens the
    // first user message; the text is the one recorded with the decision.
    if (auto it = m_seed_prompts.find(row.id); it != m_seed_prompts.end() && !it->second.empty()) {
      spec->context = spec->context.empty() ? it->second : spec->context + "\n\n" + it->second;
    }
    for (auto& e : m_cfg.events) {
      if (e.samples.empty() ||
          std::find(e.samples.begin(), e.samples.end(), row.sample_index) != e.samples.end()) {
        spec->events.push_back(e);
      }
    }
    spec->resume = m_cfg.resume;
    spec->wall_clock_budget_s = m_cfg.episode_wall_clock_s;
    spec->token_budget = m_cfg.episode_token_budget;
    spec->system_prompt = row.system_prompt.empty() || row.system_prompt == *m_system_prompt
                              ? m_system_prompt
                              : std::make_shared<const std::string>(row.system_prompt);
    return spec;
  }

  Env env_for(Slot& slot) {
    Env env;
    env.now = now_unix();
    double mono = now_mono();
    env.active_delta_s = slot.last_mark > 0 ? mono - slot.last_mark : 0;
    slot.last_mark = mono;
    env.spend_cap_reached = m_cfg.spend_cap_usd > 0 && m_cost_usd >= m_cfg.spend_cap_usd;
    env.owner = m_options.owner;
    env.secret_seed = m_secret_seed;
    return env;
  }

  bool stopping() const {
    return m_abort || (m_options.stop && m_options.stop->load(std::memory_order_relaxed));
  }

  // --- the orchestrator's queue --------------------------------------------
  // Completions from other threads arrive through a mailbox that outlives
  // the runner: once the run is over it is closed, and late completions
  // (LLM calls or evaluations abandoned by a stop) are dropped.
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool closed = false;
  };

  std::function<void(std::function<void()>)> poster() {
    return [box = m_box](std::function<void()> fn) {
      {
        std::lock_guard lock(box->mutex);
        if (box->closed) return;
        box->queue.push_back(std::move(fn));
      }
      box->cv.notify_one();
    };
  }

  Result<RunResult> drive() {
    RunResult result;
    double t0 = now_mono();
    auto snapshots = m_store.load_unfinished(m_plan.campaign_id);
    if (!snapshots) return std::unexpected(snapshots.error());
    result.episodes_resumed = 0;
    for (auto& snap : *snapshots) {
      if (!snap.messages.empty()) ++result.episodes_resumed;
      m_waiting.push_back(std::move(snap));
    }
    result.resume_load_s = now_mono() - t0;
    auto counts = m_store.counts(m_plan.campaign_id);
    if (!counts) return std::unexpected(counts.error());
    m_progress.episodes = counts->episodes;
    m_progress.final = counts->final;
    m_progress.turns = counts->turns;
    m_progress.tokens = counts->prompt_tokens + counts->completion_tokens;
    m_cost_usd = counts->cost_usd;
    m_progress.failed = counts->final - counts->correct;
    m_final_at_start = counts->final;
    if (!snapshots->empty()) {
      KLOG_INFO(
          "campaign {}: {} unfinished episode(s), {} already in progress (loaded in {:.2f} s)",
          m_cfg.name, m_waiting.size(), result.episodes_resumed, result.resume_load_s);
    }
    m_start_mono = now_mono();
    if (m_strategy) {
      if (auto r = load_strategy_facts(); !r) return std::unexpected(r.error());
      strategy_step();
    }
    fill_slots();
    double next_progress = now_mono();
    double next_heartbeat = now_mono() + m_options.lease_ttl_s / 3;
    std::unique_lock lock(m_box->mutex);
    while (true) {
      // Commits are always awaited (they are what "durable" means); LLM calls
      // and evaluations are abandoned on a stop and redone on resume.
      if (m_commits_in_flight == 0 &&
          (stopping() || (m_ops_in_flight == 0 && m_slots.empty() && m_waiting.empty()))) {
        m_box->closed = true;
        break;
      }
      if (m_box->queue.empty()) {
        m_box->cv.wait_for(lock, std::chrono::milliseconds(200));
      }
      std::deque<std::function<void()>> work;
      work.swap(m_box->queue);
      lock.unlock();
      for (auto& fn : work) fn();
      double mono = now_mono();
      if (mono >= next_progress) {
        emit_progress();
        next_progress = mono + m_options.progress_interval_s;
      }
      if (mono >= next_heartbeat) {
        if (auto r =
                m_store.heartbeat_lease(m_plan.campaign_id, m_options.owner, m_options.lease_ttl_s);
            !r) {
          KLOG_WARN("lease heartbeat failed: {}", r.error().message);
        }
        next_heartbeat = mono + m_options.lease_ttl_s / 3;
      }
      if (stopping() && !m_cancelled) {
        m_cancelled = true;
        if (!m_abort)
          KLOG_INFO("stopping: waiting for {} in-flight commit(s)", m_commits_in_flight);
      }
      lock.lock();
    }
    lock.unlock();
    emit_progress();
    result.progress = m_progress;
    if (m_abort) {
      result.status = RunStatus::aborted;
      result.message = m_abort_reason;
    } else if (m_options.stop && m_options.stop->load()) {
      result.status = RunStatus::stopped;
      result.message = "stopped; run again to resume";
    } else {
      result.status = RunStatus::completed;
    }
    return result;
  }

  void emit_progress() {
    m_progress.running = static_cast<std::int64_t>(m_slots.size());
    m_progress.cost_usd = m_cost_usd;
    m_progress.elapsed_s = now_mono() - m_start_mono;
    auto done_now = m_progress.final - m_final_at_start;
    auto remaining = m_progress.episodes - m_progress.final;
    m_progress.eta_s = eta_of(
        m_progress,
        done_now > 0 ? m_progress.elapsed_s / static_cast<double>(done_now) * remaining : -1);
    if (m_options.on_progress) m_options.on_progress(m_progress);
  }

  void fill_slots() {
    while (!stopping() && !m_waiting.empty() &&
           static_cast<int>(m_slots.size()) < std::max(1, m_cfg.max_inflight_episodes)) {
      auto snap = std::move(m_waiting.front());
      m_waiting.pop_front();
      auto spec = spec_for(snap.episode);
      if (!spec) {
        KLOG_ERROR("[ep {}] task {} is not in the task source any more; skipping", snap.episode.id,
                   snap.episode.task_id);
        continue;
      }
      auto& slot = m_slots[snap.episode.id];
      auto env = env_for(slot);
      auto step = resume(slot.state, spec, snap, env);
      execute(snap.episode.id, std::move(step));
    }
  }

  // Commits a step's batch, then (and only then) starts its next action.
  void execute(const std::string& id, Step step) {
    if (step.batch.empty()) {
      perform(id, std::move(step.next));
      return;
    }
    ++m_commits_in_flight;
    auto next = std::make_shared<Next>(std::move(step.next));
    m_store.commit(std::move(step.batch),
                   [this, post = poster(), id, next](Result<store::CommitInfo> r) {
                     post([this, id, next, r = std::move(r)]() mutable {
                       --m_commits_in_flight;
                       if (!r) {
                         abort_run("store: " + r.error().message);
                         return;
                       }
                       for (auto& c : r->conflicts) KLOG_WARN("[ep {}] stored row wins: {}", id, c);
                       perform(id, std::move(*next));
                     });
                   });
  }

  void perform(const std::string& id, Next next) {
    auto it = m_slots.find(id);
    if (it == m_slots.end()) return;
    if (auto* call = std::get_if<CallLlm>(&next)) {
      if (stopping()) return;
      ++m_ops_in_flight;
      m_client.submit(std::move(call->request), [this, post = poster(), id](llm::ChatResult r) {
        post([this, id, r = std::move(r)]() mutable {
          --m_ops_in_flight;
          on_llm(id, std::move(r));
        });
      });
    } else if (auto* run = std::get_if<RunEval>(&next)) {
      if (stopping()) return;
      ++m_ops_in_flight;
      m_evaluator.evaluate(std::move(run->request),
                           [this, post = poster(), id](evaluator::Report r) {
                             post([this, id, r = std::move(r)]() mutable {
                               --m_ops_in_flight;
                               on_eval(id, std::move(r));
                             });
                           });
    } else if (std::holds_alternative<SimulateCrash>(next)) {
      // Drop everything held in memory and rebuild from the store, exactly as
      // after a real kill.
      m_slots.erase(it);
      auto snap = m_store.load_episode(id);
      if (!snap || !*snap) {
        abort_run(fmt::format("episode {} could not be reloaded after a simulated crash", id));
        return;
      }
      auto spec = spec_for((*snap)->episode);
      auto& slot = m_slots[id];
      auto env = env_for(slot);
      execute(id, resume(slot.state, spec, **snap, env));
    } else if (std::holds_alternative<Finished>(next)) {
      ++m_progress.final;
      m_slots.erase(it);
      if (m_strategy) {
        on_strategy_final(id);
        strategy_step();
      }
      fill_slots();
    } else if (auto* abort = std::get_if<AbortCampaign>(&next)) {
      abort_run(abort->reason);
    }
  }

  void on_llm(const std::string& id, llm::ChatResult r) {
    if (stopping()) return;  // not recorded: resume re-sends it
    auto it = m_slots.find(id);
    if (it == m_slots.end()) return;
    m_cost_usd += r.cost_usd;
    if (r.outcome == llm::Outcome::ok) {
      ++m_progress.turns;
      m_progress.tokens += r.usage.prompt_tokens + r.usage.completion_tokens;
    }
    auto env = env_for(it->second);
    execute(id, on_llm_result(it->second.state, r, env));
  }

  void on_eval(const std::string& id, evaluator::Report r) {
    // Stopping: not recorded and not counted as a failure (whatever the
    // report says, e.g. a worker killed by the evaluator's shutdown); resume
    // re-runs the evaluation.
    if (stopping()) return;
    auto it = m_slots.find(id);
    if (it == m_slots.end()) return;
    auto env = env_for(it->second);
    auto step = on_eval_result(it->second.state, r, env);
    if (std::holds_alternative<Finished>(step.next) && !r.correct) ++m_progress.failed;
    execute(id, std::move(step));
  }

  // --- strategies (agent/strategy.hpp) ---------------------------------------
  // The facts decide() reads, loaded once from the store and kept up to date
  // as episodes end: only stored facts, never arrival order or times.

  static double eval_seconds(const store::EvaluationRow& row) {
    auto r = evaluator::Report::from_json(row.report_json);
    return r ? r->wall_s : 0.0;
  }

  Result<void> load_strategy_facts() {
    m_facts = StrategyFacts{};
    m_facts.campaign_id = m_plan.campaign_id;
    for (auto& t : m_plan.tasks) m_facts.tasks.push_back(t->id);
    auto episodes = m_store.list_episodes(m_plan.campaign_id);
    if (!episodes) return std::unexpected(episodes.error());
    auto finals = m_store.list_finals(m_plan.campaign_id);
    if (!finals) return std::unexpected(finals.error());
    auto events = m_store.list_events(m_plan.campaign_id);
    if (!events) return std::unexpected(events.error());
    std::map<std::string, const store::FinalRow*> final_of;
    for (auto& f : *finals) final_of[f.episode_id] = &f;
    // Per episode: (request id, value) of its calls' cost and its evaluations'
    // time, summed in request-id order (canonical_sum).
    std::map<std::string, std::vector<std::pair<std::string, double>>> costs_of, eval_s_of;
    if (m_cfg.strategy.kind == config::StrategyKind::budget) {
      auto calls = m_store.list_llm_calls(m_plan.campaign_id);
      if (!calls) return std::unexpected(calls.error());
      for (auto& c : *calls) costs_of[c.episode_id].emplace_back(c.request_id, c.cost_usd);
      if (m_cfg.strategy.budget_gpu_hours > 0) {
        auto evals = m_store.list_evaluations(m_plan.campaign_id);
        if (!evals) return std::unexpected(evals.error());
        for (auto& e : *evals)
          if (e.state == store::EvalState::done)
            eval_s_of[e.episode_id].emplace_back(e.request_id, eval_seconds(e));
      }
    }
    for (auto& e : *episodes) {
      StrategyEpisode se;
      se.id = e.id;
      se.task_id = e.task_id;
      se.model_id = e.model_id;
      se.sample = e.sample_index;
      if (auto it = final_of.find(e.id); it != final_of.end()) {
        se.final = true;
        se.correct = it->second->correct;
        se.speedup = it->second->speedup;
      }
      se.cost_usd = canonical_sum(costs_of[e.id]);
      se.eval_s = canonical_sum(eval_s_of[e.id]);
      m_fact_index[se.id] = m_facts.episodes.size();
      m_facts.episodes.push_back(std::move(se));
    }
    for (auto& ev : *events) {
      if (ev.kind != k_strategy_event_kind) continue;
      auto parsed = parse_strategy_event(ev.detail);
      if (!parsed) continue;
      m_facts.decided.insert(parsed->key);
      if (!parsed->seed_prompt.empty()) m_seed_prompts[ev.episode_id] = parsed->seed_prompt;
    }
    return {};
  }

  // An episode became final: its result, spend and evaluation time, as stored.
  void on_strategy_final(const std::string& id) {
    auto it = m_fact_index.find(id);
    if (it == m_fact_index.end()) return;
    auto snap = m_store.load_episode(id);
    if (!snap || !*snap || !(*snap)->final) {
      abort_run(fmt::format("episode {} could not be read back after it ended", id));
      return;
    }
    auto& se = m_facts.episodes[it->second];
    se.final = true;
    se.correct = (*snap)->final->correct;
    se.speedup = (*snap)->final->speedup;
    std::vector<std::pair<std::string, double>> costs, eval_s;
    for (auto& c : (*snap)->llm_calls) costs.emplace_back(c.request_id, c.cost_usd);
    if (m_cfg.strategy.budget_gpu_hours > 0) {
      for (auto& e : (*snap)->evaluations)
        if (e.state == store::EvalState::done) eval_s.emplace_back(e.request_id, eval_seconds(e));
    }
    se.cost_usd = canonical_sum(std::move(costs));
    se.eval_s = canonical_sum(std::move(eval_s));
  }

  // The seed's first-message block: its submitted code and measured result.
  // The seed's first-message text: the code its final SUBMIT scored and that
  // evaluation's report. An error when the store cannot say (then no
  // decision is recorded: an empty seed written into an event would be
  // reused by every resume).
  Result<std::string> render_seed(const SeedOrigin& seed) {
    if (auto it = m_rendered_seeds.find(seed.episode_id); it != m_rendered_seeds.end())
      return it->second;
    auto snap = m_store.load_episode(seed.episode_id);
    if (!snap) return std::unexpected(snap.error());
    if (!*snap || !(*snap)->final)
      return fail(fmt::format("seed episode {} has no final", seed.episode_id));
    const std::string& request_id = (*snap)->final->request_id;
    const store::EvaluationRow* eval = nullptr;
    for (auto& e : (*snap)->evaluations)
      if (e.request_id == request_id) eval = &e;
    if (eval == nullptr)
      return fail(fmt::format("seed episode {}: no evaluation {}", seed.episode_id, request_id));
    std::string code;
    bool found = false;
    for (auto& t : (*snap)->turns) {
      if (t.code_sha == eval->code_sha) {
        code = t.code;
        found = true;
        break;
      }
    }
    if (!found)
      return fail(fmt::format("seed episode {}: no turn holds the scored code {}", seed.episode_id,
                              eval->code_sha));
    std::string result;
    if (auto r = evaluator::Report::from_json(eval->report_json))
      result = prompts::render_report(*r, evaluator::Mode::submit);
    auto text = seed_prompt(seed, code, result);
    m_rendered_seeds[seed.episode_id] = text;
    return text;
  }

  // Takes every decision that is ready and starts its episodes: the
  // decision's events and its episode rows commit together, before any of
  // them runs, so a kill leaves either both or neither.
  void strategy_step() {
    if (!m_strategy || stopping()) return;
    auto decisions = decide(m_cfg, m_facts);
    if (decisions.empty()) return;
    store::WriteBatch batch;
    const double now = now_unix();
    std::vector<store::EpisodeSnapshot> fresh;
    for (auto& d : decisions) {
      KLOG_INFO("campaign {}: strategy {} decides {} ({}; {} episode(s))", m_cfg.name,
                config::to_string(m_cfg.strategy.kind), d.key, d.action, d.start.size());
      if (d.start.empty() && !d.anchor_episode.empty()) {
        batch.put(store::EventRow{d.anchor_episode, 0, std::string(k_strategy_event_kind),
                                  strategy_event_detail(d, nullptr, ""), now});
      }
      for (auto& ne : d.start) {
        std::string prompt;
        if (ne.seed) {
          auto seeded = render_seed(*ne.seed);
          if (!seeded) {
            // Nothing of this step is committed: a resume decides again.
            abort_run("strategy " + d.key + ": " + seeded.error().message);
            return;
          }
          prompt = std::move(*seeded);
        }
        store::EpisodeRow e;
        e.id = ne.id;
        e.campaign_id = m_plan.campaign_id;
        e.task_id = ne.task_id;
        e.model_id = ne.model_id;
        e.sample_index = ne.sample;
        e.system_prompt = m_plan.system_prompt;
        e.status = store::EpisodeStatus::pending;
        e.created_at = now;
        e.updated_at = now;
        store::EpisodeSnapshot snap;
        snap.episode = e;
        fresh.push_back(std::move(snap));
        batch.put(std::move(e));
        batch.put(store::EventRow{ne.id, 0, std::string(k_strategy_event_kind),
                                  strategy_event_detail(d, &ne, prompt), now});
        m_seed_prompts[ne.id] = prompt;
        StrategyEpisode se;
        se.id = ne.id;
        se.task_id = ne.task_id;
        se.model_id = ne.model_id;
        se.sample = ne.sample;
        m_fact_index[se.id] = m_facts.episodes.size();
        m_facts.episodes.push_back(std::move(se));
      }
      m_facts.decided.insert(d.key);
    }
    if (auto r = m_store.commit_sync(std::move(batch)); !r) {
      abort_run("store: " + r.error().message);
      return;
    }
    m_progress.episodes += static_cast<std::int64_t>(fresh.size());
    for (auto& snap : fresh) m_waiting.push_back(std::move(snap));
  }

  void abort_run(std::string reason) {
    if (!m_abort) {
      KLOG_ERROR("aborting the run: {}", reason);
      m_abort = true;
      m_abort_reason = std::move(reason);
    }
  }

  const config::CampaignConfig& m_cfg;
  const CampaignPlan& m_plan;
  store::Store& m_store;
  llm::ChatClient& m_client;
  evaluator::Evaluator& m_evaluator;
  const RunOptions& m_options;
  std::map<std::string, std::shared_ptr<const config::Task>> m_tasks;
  // The plan's system prompt, shared by every episode's spec that uses it.
  std::shared_ptr<const std::string> m_system_prompt;
  std::uint64_t m_secret_seed = 0;
  const bool m_strategy = m_cfg.strategy.kind != config::StrategyKind::grid;

  // Orchestrator-thread state (touched only by the orchestrator thread).
  std::unordered_map<std::string, Slot> m_slots;
  std::deque<store::EpisodeSnapshot> m_waiting;
  std::int64_t m_commits_in_flight = 0;
  std::int64_t m_ops_in_flight = 0;
  bool m_abort = false;
  bool m_cancelled = false;
  std::string m_abort_reason;
  double m_cost_usd = 0;
  double m_start_mono = 0;
  std::int64_t m_final_at_start = 0;
  Progress m_progress;
  // Strategies (orchestrator thread).
  StrategyFacts m_facts;
  std::unordered_map<std::string, std::size_t> m_fact_index;      // episode id -> m_facts.episodes
  std::unordered_map<std::string, std::string> m_seed_prompts;    // episode id -> seed block
  std::unordered_map<std::string, std::string> m_rendered_seeds;  // seed episode id -> block

  std::shared_ptr<Mailbox> m_box = std::make_shared<Mailbox>();
};

}  // namespace

Result<CampaignPlan> plan_campaign(const config::CampaignConfig& cfg,
                                   const evaluator::Evaluator& evaluator) {
  if (cfg.models.empty()) return fail("the campaign has no models");
  CampaignPlan plan;
  plan.campaign_id = ids::campaign_id(cfg.name);
  auto tasks = config::load_tasks(cfg.tasks);
  if (!tasks) return std::unexpected(tasks.error());
  if (!cfg.tasks.exclude_flagged.empty()) {
    auto flagged = evaluator::flagged_tasks(cfg.tasks.exclude_flagged, *tasks);
    if (!flagged) return std::unexpected(flagged.error());
    plan.excluded = std::move(*flagged);
    if (plan.excluded.size() == tasks->size())
      return fail(ErrorKind::invalid,
                  fmt::format("tasks.exclude_flagged {} flags every selected task ({})",
                              cfg.tasks.exclude_flagged, tasks->size()));
  }
  std::set<std::string> excluded;
  for (const auto& f : plan.excluded) excluded.insert(f.task_id);
  for (auto& t : *tasks)
    if (!excluded.contains(t.id))
      plan.tasks.push_back(std::make_shared<const config::Task>(std::move(t)));
  prompts::SystemFacts facts;
  facts.device = evaluator.device_description();
  facts.tolerance = cfg.evaluator.tolerance;
  facts.reward = cfg.evaluator.reward;
  facts.torch_ops = cfg.evaluator.torch_ops;
  facts.max_turns = cfg.max_turns;
  facts.rules = evaluator::rule_docs();
  plan.system_prompt = prompts::system_prompt(facts);
  return plan;
}

Result<RunResult> run_campaign(const config::CampaignConfig& cfg, const CampaignPlan& plan,
                               store::Store& store, llm::ChatClient& client,
                               evaluator::Evaluator& evaluator, const RunOptions& options) {
  Runner runner(cfg, plan, store, client, evaluator, options);
  return runner.run();
}

}  // namespace korch::agent
