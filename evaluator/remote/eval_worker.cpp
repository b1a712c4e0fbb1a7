#include "evaluator/remote/eval_worker.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "evaluator/remote/queue_evaluator.hpp"
#include "evaluator/retries.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "util/enum_names.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::evaluator::remote {
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

    // One queue for the whole process: one connection for statements (the
    // slots' claims, heartbeats and results, and this row), one that
    // LISTENs, whatever the number of slots (docs/cluster.md sizes
    // max_connections by it).
    m_queue = admin->get();
    std::vector<std::thread> slots;
    m_slots_left.store(m_options.slots);
    std::thread listener([this] {
      pthread_setname_np(pthread_self(), "korch-listen");
      listen();
    });
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
    std::optional<std::chrono::steady_clock::time_point> drain_until;
    bool cut = false;
    while (m_slots_left.load() > 0) {
      auto next = std::chrono::steady_clock::now() + beat;
      if (m_stop.load() && m_options.drain_s > 0 && !drain_until) {
        drain_until = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(m_options.drain_s));
      }
      m_row.state = m_stop.load() ? "draining" : "running";
      m_row.note = refusal_note(**admin);
      if (m_row.note != last_note && !m_row.note.empty())
        KLOG_WARN("[worker {}] {}", m_row.id, m_row.note);
      last_note = m_row.note;
      if (auto r = (*admin)->put_worker(m_row); !r)
        KLOG_WARN("[worker {}] heartbeat: {}", m_row.id, r.error().message);
      while (m_slots_left.load() > 0 && std::chrono::steady_clock::now() < next) {
        if (!cut && drain_until && std::chrono::steady_clock::now() >= *drain_until) {
          // The drain's time is up: what still runs comes back interrupted and is handed back.
          cut = true;
          KLOG_WARN("[worker {}] drain: {:.1f} s passed; handing back what still runs", m_row.id,
                    m_options.drain_s);
          m_evaluator.shutdown();
        }
        if (!drain_until && m_stop.load() && m_options.drain_s > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    for (auto& t : slots) t.join();
    listener.join();
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

  // The process's one LISTEN on korch_eval_queued: every NOTIFY wakes every
  // idle slot (m_wakeups), until the last slot ends.
  void listen() {
    while (m_slots_left.load() > 0) {
      auto woke = m_queue->wait(store::k_channel_queued, k_idle_slice_s);
      if (woke && *woke) {
        {
          std::lock_guard lock(m_wake_mutex);
          ++m_wakeups;
        }
        m_wake_cv.notify_all();
      } else if (!woke) {
        std::this_thread::sleep_for(k_retry_pause);
      }
    }
  }

  bool take_budget() {
    if (m_options.max_evaluations <= 0) return true;
    if (m_claimed.fetch_add(1) < m_options.max_evaluations) return true;
    m_claimed.fetch_sub(1);
    return false;
  }

  void slot(int /*index*/) {
    store::WorkQueue& q = *m_queue;
    while (!m_stop.load()) {
      if (!take_budget()) return;
      // A NOTIFY heard from here on wakes this slot, even one heard while it claims.
      std::uint64_t seen = 0;
      {
        std::lock_guard lock(m_wake_mutex);
        seen = m_wakeups;
      }
      auto claim = q.claim(m_row.id, m_options.queue_version, m_options.lease_s);
      if (!claim || !*claim) {
        if (m_options.max_evaluations > 0) m_claimed.fetch_sub(1);
        if (!claim) {
          KLOG_WARN("[worker {}] claim: {}", m_row.id, claim.error().message);
          std::this_thread::sleep_for(k_retry_pause);
          continue;
        }
        // Idle: NOTIFY (enqueue, release) wakes the slot (through listen());
        // a lease that expires sends none, so look again every idle_poll_s.
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(m_options.idle_poll_s);
        std::unique_lock lock(m_wake_mutex);
        while (!m_stop.load() && m_wakeups == seen && std::chrono::steady_clock::now() < until) {
          m_wake_cv.wait_for(lock, std::chrono::duration<double>(k_idle_slice_s));
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
        auto held = q.heartbeat(claim, m_options.lease_s);
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
      auto r = q.release(claim);
      if (r && *r) m_summary.released.fetch_add(1);
      return;
    }
    // The host failed it (issue #47): back to the queue, the claim counted,
    // to run again on whichever worker claims it next -- another host, or
    // this one after a pause -- while the evaluation has had fewer than
    // evaluator::k_max_runs runs (retries.hpp: the earlier claims' runs and
    // this claim's, as its evidence counts them; an evaluator that ran it
    // again itself may have spent them all) and --max-claims allows; then
    // the last run's outcome is the result. (A re-run by the episode would
    // only find the stored row.)
    const std::int64_t runs =
        claim.claims - 1 + evaluator::host_fault_runs(report.evidence, report.host_fault());
    if (report.host_fault() && runs < evaluator::k_max_runs &&
        claim.claims < m_options.max_claims && !m_stop.load()) {
      auto r = q.release(claim, /*counted=*/true);
      if (r && *r) {
        m_summary.released.fetch_add(1);
        const auto pause = evaluator::pause_before_run(static_cast<int>(runs) + 1);
        KLOG_WARN(
            "[worker {}] {}: {}; handed back to run again (run {} of at most {}, claim {} of at "
            "most {}), pausing {} s",
            m_row.id, claim.request_id, report.error.substr(0, 300), runs, evaluator::k_max_runs,
            claim.claims, m_options.max_claims, pause.count());
        const auto until = std::chrono::steady_clock::now() + pause;
        while (!m_stop.load() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::duration<double>(k_idle_slice_s));
        return;
      }
    }
    report.request_id = claim.request_id;
    const std::string json = report.to_json();
    for (int attempt = 1;; ++attempt) {
      auto r = q.complete(claim, m_row.id, json);
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
  store::WorkQueue* m_queue = nullptr;  // the process's queue (run() owns it)
  std::mutex m_wake_mutex;
  std::condition_variable m_wake_cv;
  std::uint64_t m_wakeups = 0;  // NOTIFYs heard on korch_eval_queued
};

}  // namespace

Result<WorkerSummary> run_worker(const WorkerOptions& options, evaluator::Evaluator& evaluator,
                                 const std::atomic<bool>& stop) {
  Worker worker(options, evaluator, stop);
  return worker.run();
}

}  // namespace korch::evaluator::remote
