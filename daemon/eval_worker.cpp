#include "daemon/eval_worker.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/queue_evaluator.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "util/enum_names.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::daemon {
namespace {

// A slot whose store call failed waits this long before the next try.
constexpr auto k_retry_pause = std::chrono::seconds(1);
// Tries to write one result while the store is away (a restart) before the
// evaluation is given up (its lease expires and another worker runs it).
constexpr int k_complete_tries = 60;
// An idle slot checks `stop` at least this often while it waits for NOTIFY.
constexpr double k_idle_slice_s = 0.5;

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

class Worker {
 public:
  Worker(const WorkerOptions& options, evaluator::Evaluator& evaluator,
         const std::atomic<bool>& stop)
      : m_options(options), m_evaluator(evaluator), m_stop(stop) {}

  Result<WorkerSummary> run() {
    auto admin = store::WorkQueue::open(m_options.store_url, /*migrate=*/false);
    if (!admin) return std::unexpected(admin.error());
    m_row.id = m_options.worker_id.empty() ? host_name() + ":" + std::to_string(::getpid())
                                           : m_options.worker_id;
    m_row.host = host_name();
    m_row.pid = ::getpid();
    m_row.gpus = m_options.gpus;
    m_row.slots = m_options.slots;
    m_row.korch_version = m_options.korch_version;
    m_row.evaluator_version = m_options.queue_version;
    m_row.mode = enum_name(m_evaluator.mode());
    m_row.device_description = m_evaluator.device_description();
    m_row.state = "running";
    m_row.started_at = now_unix();
    if (auto r = (*admin)->put_worker(m_row); !r) return std::unexpected(r.error());
    KLOG_INFO("[worker {}] serving '{}' with {} slot(s) on {}", m_row.id, m_row.evaluator_version,
              m_row.slots, store::redact_url(m_options.store_url));

    std::vector<std::thread> slots;
    m_slots_left.store(m_options.slots);
    for (int i = 0; i < m_options.slots; ++i) {
      slots.emplace_back([this, i] {
        pthread_setname_np(pthread_self(), "korch-slot");
        try {
          slot(i);
        } catch (const std::exception& e) {
          KLOG_ERROR("[worker {}] slot {}: {}", m_row.id, i, e.what());
        }
        m_slots_left.fetch_sub(1);
      });
    }
    // The worker's row: renewed while the slots work; says why queued work is refused.
    const auto beat = std::chrono::duration<double>(m_options.lease_s / 4);
    std::string last_note;
    while (m_slots_left.load() > 0) {
      auto next = std::chrono::steady_clock::now() + beat;
      m_row.state = m_stop.load() ? "draining" : "running";
      m_row.note = refusal_note(**admin);
      if (m_row.note != last_note && !m_row.note.empty())
        KLOG_WARN("[worker {}] {}", m_row.id, m_row.note);
      last_note = m_row.note;
      if (auto r = (*admin)->put_worker(m_row); !r)
        KLOG_WARN("[worker {}] heartbeat: {}", m_row.id, r.error().message);
      while (m_slots_left.load() > 0 && std::chrono::steady_clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : slots) t.join();
    m_row.state = "stopped";
    m_row.note.clear();
    if (auto r = (*admin)->put_worker(m_row); !r)
      KLOG_WARN("[worker {}] final heartbeat: {}", m_row.id, r.error().message);
    KLOG_INFO("[worker {}] stopped: {} done, {} refused, {} handed back", m_row.id,
              m_summary.done.load(), m_summary.refused.load(), m_summary.released.load());
    return WorkerSummary{m_summary.done.load(), m_summary.refused.load(),
                         m_summary.released.load()};
  }

 private:
  struct Counters {
    std::atomic<std::int64_t> done{0}, refused{0}, released{0};
  };

  // "" when no queued work waits for another version; else why it is not taken.
  std::string refusal_note(store::WorkQueue& q) {
    auto foreign = q.foreign_work(m_options.queue_version);
    if (!foreign || foreign->empty()) return {};
    std::string note;
    for (const auto& f : *foreign) {
      if (!note.empty()) note += "; ";
      note += "refusing " + std::to_string(f.queued) + " evaluation(s) of campaign " +
              (f.campaign_id.empty() ? "(serve)" : f.campaign_id) + ": they need evaluator '" +
              f.evaluator_version + "', this worker runs '" + m_options.queue_version + "'";
    }
    return note;
  }

  bool take_budget() {
    if (m_options.max_evaluations <= 0) return true;
    if (m_claimed.fetch_add(1) < m_options.max_evaluations) return true;
    m_claimed.fetch_sub(1);
    return false;
  }

  void slot(int index) {
    auto opened = store::WorkQueue::open(m_options.store_url, /*migrate=*/false);
    if (!opened) {
      KLOG_ERROR("[worker {}] slot {}: {}", m_row.id, index, opened.error().message);
      return;
    }
    store::WorkQueue& q = **opened;
    while (!m_stop.load()) {
      if (!take_budget()) return;
      auto claim = q.claim(m_row.id, m_options.queue_version, m_options.lease_s);
      if (!claim || !*claim) {
        if (m_options.max_evaluations > 0) m_claimed.fetch_sub(1);
        if (!claim) {
          KLOG_WARN("[worker {}] claim: {}", m_row.id, claim.error().message);
          std::this_thread::sleep_for(k_retry_pause);
          continue;
        }
        // Idle: NOTIFY (enqueue, release) wakes the slot; a lease that
        // expires sends none, so look again every idle_poll_s.
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(m_options.idle_poll_s);
        while (!m_stop.load() && std::chrono::steady_clock::now() < until) {
          auto woke = q.wait(store::k_channel_queued, k_idle_slice_s);
          if (woke && *woke) break;
          if (!woke) std::this_thread::sleep_for(k_retry_pause);
        }
        continue;
      }
      run_one(q, **claim);
    }
  }

  void run_one(store::WorkQueue& q, const store::Claim& claim) {
    KLOG_DEBUG("[worker {}] {} claimed (claim {})", m_row.id, claim.request_id, claim.claims);
    evaluator::Report report;
    auto request = decode_request(claim.request_json);
    if (m_options.max_claims > 0 && claim.claims > m_options.max_claims) {
      report.request_id = claim.request_id;
      report.status = evaluator::Verdict::worker_crash;
      report.error = fmt::format(
          "claimed {} times: every earlier worker that ran it was lost before it wrote a result; "
          "not run again",
          claim.claims);
      report.evaluator_version = m_evaluator.version();
      report.mode = enum_name(m_evaluator.mode());
      KLOG_WARN("[worker {}] {}: {}", m_row.id, claim.request_id, report.error);
    } else if (!request) {
      report.request_id = claim.request_id;
      report.status = evaluator::Verdict::worker_crash;
      report.error = request.error().message;
      report.evaluator_version = m_evaluator.version();
    } else {
      auto promise = std::make_shared<std::promise<evaluator::Report>>();
      auto future = promise->get_future();
      m_evaluator.evaluate(std::move(*request),
                           [promise](evaluator::Report r) { promise->set_value(std::move(r)); });
      const auto beat = std::chrono::duration<double>(m_options.lease_s / 4);
      while (future.wait_for(beat) != std::future_status::ready) {
        auto held = q.heartbeat(claim.request_id, claim.lease_token, m_options.lease_s);
        if (held && !*held) {
          KLOG_WARN("[worker {}] {}: lease lost (re-claimed elsewhere); its result will be refused",
                    m_row.id, claim.request_id);
        }
      }
      report = future.get();
    }
    // Not a result: the evaluator is stopping, or the worker is draining and
    // the evaluation's sandboxed processes died (Slurm and Kubernetes signal
    // every process of the job, not only this one). Hand the work back at
    // once; another worker runs it.
    const bool cut_short = m_stop.load() && report.status == evaluator::Verdict::worker_crash;
    if (report.interrupted || cut_short) {
      auto r = q.release(claim.request_id, claim.lease_token);
      if (r && *r) m_summary.released.fetch_add(1);
      return;
    }
    report.request_id = claim.request_id;
    const std::string json = report.to_json();
    for (int attempt = 1;; ++attempt) {
      auto r = q.complete(claim.request_id, claim.lease_token, m_row.id, json);
      if (r) {
        if (*r) {
          m_summary.done.fetch_add(1);
        } else {
          m_summary.refused.fetch_add(1);
          KLOG_WARN("[worker {}] {}: result refused (the lease was re-claimed; counted once)",
                    m_row.id, claim.request_id);
        }
        return;
      }
      if (attempt >= k_complete_tries) {
        KLOG_ERROR("[worker {}] {}: giving the result up: {}", m_row.id, claim.request_id,
                   r.error().message);
        return;
      }
      std::this_thread::sleep_for(k_retry_pause);
    }
  }

  const WorkerOptions& m_options;
  evaluator::Evaluator& m_evaluator;
  const std::atomic<bool>& m_stop;
  store::WorkerRow m_row;
  Counters m_summary;
  std::atomic<int> m_slots_left{0};
  std::atomic<std::int64_t> m_claimed{0};
};

}  // namespace

Result<WorkerSummary> run_worker(const WorkerOptions& options, evaluator::Evaluator& evaluator,
                                 const std::atomic<bool>& stop) {
  Worker worker(options, evaluator, stop);
  return worker.run();
}

}  // namespace korch::daemon
