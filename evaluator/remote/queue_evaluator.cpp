#include "evaluator/remote/queue_evaluator.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "evaluator/mock_evaluator.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "util/enum_names.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::evaluator::remote {

using nlohmann::json;

namespace {
constexpr std::string_view k_device_key = " device=";
}  // namespace

std::string queue_version(const config::EvaluatorConfig& cfg, std::string_view version,
                          std::string_view device_model) {
  auto out =
      fmt::format("{} {} tolerance={} torch_ops={} reward={} timeout_s={} memory_budget_mb={}",
                  enum_name(cfg.mode), version, enum_name(cfg.tolerance), enum_name(cfg.torch_ops),
                  enum_name(cfg.reward), cfg.timeout_s, cfg.memory_budget_mb);
  if (!device_model.empty()) out += fmt::format("{}{}", k_device_key, device_model);
  return out;
}

std::optional<std::string> device_model_of(std::string_view version, std::string_view base) {
  if (version == base) return std::string();
  if (version.size() > base.size() + k_device_key.size() &&
      version.substr(0, base.size()) == base &&
      version.substr(base.size(), k_device_key.size()) == k_device_key)
    return std::string(version.substr(base.size() + k_device_key.size()));
  return std::nullopt;
}

std::string queue_version_for(const config::EvaluatorConfig& cfg) {
  if (cfg.mode == config::EvalMode::mock) {
    // The mock evaluator is cheap to make (no processes) and knows its own version.
    return queue_version(cfg, evaluator::make_mock_evaluator(cfg)->version());
  }
  return queue_version(cfg, evaluator::schema::k_evaluator_version);
}

std::string encode_request(const evaluator::Request& r) {
  json j = {{"request_id", r.request_id},
            {"mode", evaluator::to_string(r.mode)},
            {"task",
             {{"id", r.task.id},
              {"level", r.task.level},
              {"number", r.task.number},
              {"name", r.task.name},
              {"path", r.task.path},
              {"source", r.task.source}}},
            {"code", r.code},
            {"secret_seed", r.secret_seed},
            {"rules", r.rules}};
  if (r.device) j["device"] = enum_name(*r.device);
  return j.dump();
}

Result<evaluator::Request> decode_request(std::string_view text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("queued request is not a JSON object");
  try {
    evaluator::Request r;
    r.request_id = j.at("request_id").get<std::string>();
    auto mode = evaluator::mode_from_string(j.at("mode").get<std::string>());
    if (!mode) return fail("queued request " + r.request_id + ": unknown mode");
    r.mode = *mode;
    const auto& t = j.at("task");
    r.task.id = t.at("id").get<std::string>();
    r.task.level = t.at("level").get<int>();
    r.task.number = t.at("number").get<int>();
    r.task.name = t.at("name").get<std::string>();
    r.task.path = t.at("path").get<std::string>();
    r.task.source = t.at("source").get<std::string>();
    r.code = j.at("code").get<std::string>();
    r.secret_seed = j.at("secret_seed").get<std::uint64_t>();
    r.rules = j.at("rules").get<bool>();
    if (j.contains("device")) {
      auto device = enum_from_name<config::EvalMode>(j.at("device").get<std::string>());
      if (!device) return fail("queued request " + r.request_id + ": unknown device");
      r.device = *device;
    }
    return r;
  } catch (const std::exception& e) {
    return fail(std::string("queued request: ") + e.what());
  }
}

namespace {

// How long the first start of a campaign waits for a worker of its
// evaluator to report its device (cpu and gpu modes: the system prompt
// describes the workers' device, which the coordinator's host may not have)
// before it says so in its log again; a cpu campaign then names the device
// generically, a gpu one keeps waiting (its queue version names the GPU).
constexpr double k_wait_for_worker_s = 120;

class QueueEvaluator final : public evaluator::Evaluator {
 public:
  QueueEvaluator(config::EvaluatorConfig cfg, std::unique_ptr<store::WorkQueue> queue,
                 std::unique_ptr<store::WorkQueue> listener, std::string campaign_id)
      : m_cfg(std::move(cfg)),
        m_base_version(queue_version_for(m_cfg)),
        m_queue(std::move(queue)),
        m_listener(std::move(listener)),
        m_campaign_id(std::move(campaign_id)) {
    if (m_cfg.mode == config::EvalMode::mock) {
      // Made once (a mock evaluator runs a thread): what it says of itself.
      auto mock = evaluator::make_mock_evaluator(m_cfg);
      m_plain_version = mock->version();
      m_mock_description = mock->device_description();
      mock->shutdown();
      // No device to pin: the mock's timings are no device's.
      m_version = m_base_version;
      m_device = store::CampaignDevice{m_campaign_id, "", m_mock_description, 0};
    } else {
      m_plain_version = std::string(evaluator::schema::k_evaluator_version);
    }
    m_thread = std::thread([this] { waiter(); });
  }

  ~QueueEvaluator() override { shutdown(); }

  void evaluate(evaluator::Request request, evaluator::Callback done) override {
    const std::string id = request.request_id;
    {
      std::unique_lock lock(m_mutex);
      if (m_stopping) {
        lock.unlock();
        done(interrupted(id));
        return;
      }
      // The same request id asked again before its result came (two API
      // calls of one code: the id is the code's digest) waits on the same row.
      if (auto it = m_pending.find(id); it != m_pending.end()) {
        it->second.done.push_back(std::move(done));
        return;
      }
      Pending p;
      p.row.request_id = id;
      p.row.campaign_id = m_campaign_id;
      p.row.request_json = encode_request(request);
      p.row.enqueued_at = now_unix();
      p.done.push_back(std::move(done));
      m_pending[id] = std::move(p);
      m_unsent = true;
    }
    m_cv.notify_all();
  }

  std::string version() const override { return m_plain_version; }
  config::EvalMode mode() const override { return m_cfg.mode; }

  std::string device_description() const override {
    if (!m_mock_description.empty()) return m_mock_description;
    auto pinned = resolve();
    return pinned ? pinned->device_description : std::string();
  }

  void shutdown() override {
    std::map<std::string, Pending> left;
    {
      std::lock_guard lock(m_mutex);
      if (m_stopping && !m_thread.joinable()) return;
      m_stopping = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) m_thread.join();
    {
      std::lock_guard lock(m_mutex);
      left.swap(m_pending);
    }
    // Not results: the rows stay queued (or are finished by a worker), and a
    // resumed campaign picks them up by request id.
    for (auto& [id, p] : left)
      for (auto& done : p.done) done(interrupted(id));
  }

 private:
  struct Pending {
    store::QueueRow row;
    std::vector<evaluator::Callback> done;  // every caller waiting on this id
    bool sent = false;
  };

  // The campaign's device, pinned at its first start (store::CampaignDevice):
  // read back on a resume; else taken from the first worker of its evaluator
  // that registered, and pinned. Sets m_version. nullopt only when stopping.
  std::optional<store::CampaignDevice> resolve() const {
    std::lock_guard resolving(m_resolve_mutex);
    if (m_device) return m_device;
    const bool gpu = m_cfg.mode == config::EvalMode::gpu;
    double next_note = now_unix() + k_wait_for_worker_s;
    bool told = false;
    for (;;) {
      {
        std::lock_guard lock(m_mutex);
        if (m_stopping) return std::nullopt;
      }
      std::optional<store::CampaignDevice> proposed;
      if (auto pinned = m_queue->pinned_device(m_campaign_id); pinned && *pinned) {
        proposed = **pinned;
      } else if (auto workers = m_queue->list_workers(); workers) {
        for (const auto& w : *workers) {
          auto model = device_model_of(w.evaluator_version, m_base_version);
          if (!model || w.device_description.empty() || (gpu && model->empty())) continue;
          proposed = store::CampaignDevice{m_campaign_id, *model, w.device_description, now_unix()};
          break;
        }
      }
      if (!proposed && !gpu && told && now_unix() >= next_note) {
        KLOG_WARN("[queue] no worker of '{}' registered; the prompt names the device generically",
                  m_base_version);
        proposed = store::CampaignDevice{
            m_campaign_id, "",
            fmt::format("{} evaluator on remote korch workers", enum_name(m_cfg.mode)), now_unix()};
      }
      if (proposed) {
        auto stored = m_queue->pin_device(*proposed);
        if (stored) {
          m_device = *stored;
          std::lock_guard lock(m_mutex);
          m_version = queue_version(m_cfg, m_plain_version, m_device->device_model);
          KLOG_INFO("[queue] campaign '{}' evaluates as '{}'", m_campaign_id, m_version);
          return m_device;
        }
      }
      const bool again = gpu && told && now_unix() >= next_note;
      if (!std::exchange(told, true) || again) {
        if (again) next_note = now_unix() + k_wait_for_worker_s;
        KLOG_INFO(
            "[queue] waiting for a worker of '{}' to describe its device{} (the first one is "
            "pinned to the campaign)",
            m_base_version, gpu ? " and GPU model" : "");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  static evaluator::Report interrupted(const std::string& id) {
    evaluator::Report r;
    r.request_id = id;
    r.status = evaluator::Verdict::worker_crash;
    r.error = "the coordinator stopped before a worker delivered the result";
    r.interrupted = true;
    return r;
  }

  // Enqueues what evaluate() handed over, then collects results: after every
  // NOTIFY on korch_eval_done and at least every k_result_sweep_s.
  void waiter() {
    pthread_setname_np(pthread_self(), "korch-queue");
    bool warned = false;
    // Rows carry the version with the pinned device (mock mode: known already).
    if (!resolve()) return;
    std::string version;
    {
      std::lock_guard lock(m_mutex);
      version = m_version;
    }
    while (true) {
      std::vector<store::QueueRow> to_send;
      std::vector<std::string> ids;
      {
        std::unique_lock lock(m_mutex);
        if (m_stopping) return;
        if (m_unsent) {
          for (auto& [id, p] : m_pending) {
            if (p.sent) continue;
            p.row.evaluator_version = version;
            to_send.push_back(p.row);
          }
          m_unsent = false;
        }
        for (auto& [id, p] : m_pending) ids.push_back(id);
      }
      std::vector<std::string> sent;
      bool failed = false;
      for (auto& row : to_send) {
        auto r = m_queue->enqueue(row);
        if (!r) {
          failed = true;
          if (!std::exchange(warned, true))
            KLOG_WARN("[queue] enqueue failed, retrying: {}", r.error().message);
          break;
        }
        sent.push_back(row.request_id);
      }
      {
        std::lock_guard lock(m_mutex);
        for (auto& id : sent) {
          auto it = m_pending.find(id);
          if (it != m_pending.end()) it->second.sent = true;
        }
        if (failed) m_unsent = true;
      }
      if (!ids.empty()) {
        auto results = m_queue->results(ids, version);
        if (!results) {
          if (!std::exchange(warned, true))
            KLOG_WARN("[queue] reading results failed, retrying: {}", results.error().message);
        } else {
          warned = warned && failed;
          deliver(*results);
        }
      }
      // Wait for a result (NOTIFY), new work, a stop, or the sweep interval's end.
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(k_result_sweep_s);
      for (;;) {
        {
          std::lock_guard lock(m_mutex);
          if (m_stopping) return;
          if (m_unsent) break;
        }
        auto woke = m_listener->wait(store::k_channel_done, k_wait_slice_s);
        if (woke && *woke) break;
        if (!woke) {
          // The store is away (a restart): the next sweep reconnects.
          std::unique_lock lock(m_mutex);
          m_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return m_stopping; });
        }
        if (std::chrono::steady_clock::now() >= deadline) break;
      }
    }
  }

  void deliver(const std::vector<std::pair<std::string, std::string>>& results) {
    for (const auto& [id, text] : results) {
      std::vector<evaluator::Callback> waiting;
      {
        std::lock_guard lock(m_mutex);
        auto it = m_pending.find(id);
        if (it == m_pending.end()) continue;
        waiting = std::move(it->second.done);
        m_pending.erase(it);
      }
      auto parsed = evaluator::Report::from_json(text);
      evaluator::Report report;
      if (parsed) {
        report = std::move(*parsed);
      } else {
        report.request_id = id;
        report.status = evaluator::Verdict::worker_crash;
        // Lost on the way from the worker, not the candidate's: the host's
        // fault (Report::host_fault), so the episode runs it again.
        report.error = "infrastructure: the worker's report does not parse: " + parsed.error().message;
      }
      for (auto& done : waiting) done(report);
    }
  }

  // The slice of a wait spent blocked on the NOTIFY connection: evaluate()
  // cannot interrupt it, so it bounds how long a new request waits to be
  // enqueued (and shutdown() to be heard).
  static constexpr double k_wait_slice_s = 0.05;

  config::EvaluatorConfig m_cfg;
  std::string m_base_version;     // queue_version_for: without the device
  mutable std::string m_version;  // the rows' version: with the pinned device (m_mutex)
  mutable std::mutex m_resolve_mutex;
  mutable std::optional<store::CampaignDevice> m_device;  // once pinned (m_resolve_mutex)
  std::string m_plain_version;
  std::string m_mock_description;  // mock mode only
  std::unique_ptr<store::WorkQueue> m_queue;
  std::unique_ptr<store::WorkQueue> m_listener;
  std::string m_campaign_id;

  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::map<std::string, Pending> m_pending;
  bool m_unsent = false;
  bool m_stopping = false;
  std::thread m_thread;
};

}  // namespace

Result<std::unique_ptr<evaluator::Evaluator>> make_queue_evaluator(
    const config::EvaluatorConfig& cfg, const std::string& store_url,
    const std::string& campaign_id) {
  auto queue = store::WorkQueue::open(store_url);
  if (!queue) {
    return fail(queue.error().kind, "evaluator.remote: " + queue.error().message);
  }
  auto listener = store::WorkQueue::open(store_url);
  if (!listener) return std::unexpected(listener.error());
  KLOG_INFO("[queue] evaluations go to korch workers through {} as '{}'{}",
            store::redact_url(store_url), queue_version_for(cfg),
            cfg.mode == config::EvalMode::gpu ? " and the GPU model pinned to the campaign" : "");
  return std::unique_ptr<evaluator::Evaluator>(
      std::make_unique<QueueEvaluator>(cfg, std::move(*queue), std::move(*listener), campaign_id));
}

}  // namespace korch::evaluator::remote
