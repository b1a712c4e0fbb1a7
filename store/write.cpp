// The write side of the SQLite backend: batches, the conflict rules, the
// writer thread with group commit, the syncer and the checkpointer
// (write_internal.hpp says how they share the work).
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <utility>

#include "store/codec_internal.hpp"
#include "store/write_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store {

void WriteBatch::put(CampaignRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(TaskRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EpisodeRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::update(EpisodeUpdate update) { m_ops.emplace_back(std::move(update)); }
void WriteBatch::put(MessageRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(TurnRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(LlmCallRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EvaluationRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EventRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(FinalRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(VerdictCardRow row) { m_ops.emplace_back(std::move(row)); }

namespace detail {
namespace {

// WAL frames after which the writer asks the checkpointer for a pass.
constexpr int k_checkpoint_frames = 4096;
// WAL frames after which the writer waits for a complete pass before its
// next transaction (the checkpointer is behind; bounds the WAL).
constexpr int k_wal_limit_frames = 16 * k_checkpoint_frames;

}  // namespace

void invoke_safely(const CommitCallback& done, Result<CommitInfo> result) {
  if (!done) return;
  try {
    done(std::move(result));
  } catch (const std::exception& e) {
    KLOG_ERROR("[store] commit callback threw: {}", e.what());
  } catch (...) {
    KLOG_ERROR("[store] commit callback threw a non-standard exception");
  }
}

// --- Checkpointer ----------------------------------------------------------------

Checkpointer::Checkpointer(const std::string& path, int busy_timeout_ms,
                           const std::string& synchronous)
    : m_db(std::make_unique<Db>(path, Db::Mode::read_write, busy_timeout_ms)) {
  // The checkpoint's own syncs (WAL before copying, database after) follow
  // this connection's setting.
  m_db->exec("PRAGMA synchronous = " + synchronous, "setting synchronous");
  m_thread = std::thread([this] { main(); });
}

Checkpointer::~Checkpointer() { stop(); }

void Checkpointer::request() {
  {
    std::lock_guard lock(m_mutex);
    m_requested = true;
  }
  m_cv.notify_all();
}

void Checkpointer::request_and_wait() {
  std::unique_lock lock(m_mutex);
  // A pass already running may have started before the caller's last
  // commit: wait for the one after it.
  std::uint64_t target = m_started + 1;
  m_requested = true;
  m_cv.notify_all();
  m_cv.wait(lock, [&] { return m_finished >= target || m_stopping; });
}

void Checkpointer::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void Checkpointer::main() {
  pthread_setname_np(pthread_self(), "korch-store-c");
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_cv.wait(lock, [&] { return m_requested || m_stopping; });
    if (m_stopping) break;
    m_requested = false;
    ++m_started;
    lock.unlock();
    int log = 0, done = 0;
    int rc =
        sqlite3_wal_checkpoint_v2(m_db->get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      KLOG_WARN("[store] {}: checkpoint failed: {}", m_db->path(), sqlite3_errmsg(m_db->get()));
    }
    lock.lock();
    ++m_finished;
    m_cv.notify_all();
  }
}

// --- Writer ------------------------------------------------------------------------

Writer::Writer(const Options& options, std::unique_ptr<Db> db, bool own_sync)
    : m_options(options), m_own_sync(own_sync), m_db(std::move(db)) {
  // Replaces the connection's automatic checkpoints: the checkpointer does them.
  sqlite3_wal_hook(m_db->get(), &Writer::wal_hook, this);
  m_applier.emplace(*m_db);
  m_checkpointer = std::make_unique<Checkpointer>(m_options.path, m_options.busy_timeout_ms,
                                                  own_sync ? "NORMAL" : m_options.synchronous);
  m_writer = std::thread([this] { writer_main(); });
  m_writer_id = m_writer.get_id();
  if (m_own_sync) {
    m_syncer = std::thread([this] { syncer_main(); });
    m_syncer_id = m_syncer.get_id();
  }
}

Writer::~Writer() {
  close();
  std::lock_guard lock(m_join_mutex);
  // Joinable here only when destroyed from one of its own callbacks.
  if (m_writer.joinable()) m_writer.detach();
  if (m_syncer.joinable()) m_syncer.detach();
}

int Writer::wal_hook(void* self, sqlite3*, const char*, int frames) {
  auto* w = static_cast<Writer*>(self);
  w->m_stats.frames +=
      static_cast<std::uint64_t>(frames > w->m_wal_frames ? frames - w->m_wal_frames : frames);
  w->m_wal_frames = frames;
  return SQLITE_OK;
}

std::string Writer::closed_message() const { return m_options.path + ": store is closed"; }

void Writer::enqueue(Job job) {
  if (!m_queue.push(job)) invoke_safely(job.done, fail(closed_message()));
}

void Writer::commit(WriteBatch batch, CommitCallback done) {
  enqueue(Job{std::move(batch), std::move(done), {}, false});
}

Result<CommitInfo> Writer::commit_sync(WriteBatch batch) {
  if (on_writer_thread()) {
    // Called from a commit callback: the writer is between transactions.
    auto r = run_alone(batch);
    if (r && m_own_sync) {
      if (auto err = sync_wal(); !err.empty()) return fail(err);
    }
    return r;
  }
  // From a callback on the syncer thread, the syncer cannot also sync this
  // batch: the writer hands it back at COMMIT and this thread syncs it.
  bool caller_syncs = on_syncer_thread();
  auto promise = std::make_shared<std::promise<Result<CommitInfo>>>();
  auto future = promise->get_future();
  enqueue(Job{std::move(batch),
              [promise](Result<CommitInfo> r) { promise->set_value(std::move(r)); },
              {},
              caller_syncs});
  auto r = future.get();
  if (r && caller_syncs) {
    if (auto err = sync_wal(); !err.empty()) return fail(err);
  }
  return r;
}

Result<void> Writer::run_task(const std::function<void(Db&)>& task) {
  auto promise = std::make_shared<std::promise<Result<void>>>();
  auto future = promise->get_future();
  auto body = [this, promise, &task](Db& db) {
    try {
      task(db);
      if (m_own_sync) {
        if (auto err = sync_wal(); !err.empty()) {
          promise->set_value(fail(err));
          return;
        }
      }
      promise->set_value({});
    } catch (const std::exception& e) {
      promise->set_value(fail(e.what()));
    }
  };
  if (on_writer_thread()) {
    body(*m_db);
    return future.get();
  }
  Job job{{}, {}, body, false};
  if (!m_queue.push(job)) return fail(closed_message());
  return future.get();
}

void Writer::close() {
  m_queue.stop();
  if (on_writer_thread()) return;  // the loop ends after draining; the destructor joins
  std::lock_guard lock(m_join_mutex);
  if (m_writer.joinable()) m_writer.join();
  if (on_syncer_thread()) return;  // the syncer ends after draining; the destructor joins
  if (m_syncer.joinable()) m_syncer.join();
}

std::string Writer::sync_wal() {
  std::lock_guard lock(m_wal_fd_mutex);
  std::string wal = m_options.path + "-wal";
  if (m_wal_fd < 0) {
    // Opened after the first COMMIT, so the file exists; it stays the same
    // file while the write connection is open.
    m_wal_fd = ::open(wal.c_str(), O_RDONLY | O_CLOEXEC);
    if (m_wal_fd < 0 && errno == ENOENT) return {};  // no WAL yet: nothing written to sync
    if (m_wal_fd < 0) return wal + ": cannot open to sync it: " + std::strerror(errno);
  }
  if (::fdatasync(m_wal_fd) != 0) return wal + ": fdatasync: " + std::strerror(errno);
  return {};
}

Result<CommitInfo> Writer::run_alone(const WriteBatch& batch) {
  try {
    Txn txn(*m_db, Txn::Kind::immediate);
    CommitInfo info = m_applier->apply(batch);
    txn.commit();
    after_commit();
    return info;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

bool Writer::sync_idle() const { return m_synced.empty() && !m_syncing; }

// Applies the open group's jobs from `first` on, in the open transaction
// (begun here if needed). When a batch fails, that batch gets the error and
// the transaction is rolled back and the group's other batches are applied
// again, so only bad batches fail. When BEGIN fails, every batch of the
// group fails.
void Writer::apply_open(std::size_t first) {
  auto& jobs = m_open.jobs;
  auto& results = m_open.results;
  results.resize(jobs.size());
  for (std::size_t i = first;;) {
    if (!m_open.txn) {
      try {
        m_open.txn.emplace(*m_db, Txn::Kind::immediate);
      } catch (const std::exception& e) {
        for (auto& r : results) r = fail(e.what());
        return;
      }
    }
    std::optional<std::size_t> failed;
    try {
      for (; i < jobs.size(); ++i) {
        if (results[i] && !*results[i]) continue;  // failed earlier
        failed = i;
        results[i] = m_applier->apply(jobs[i].batch);
      }
      return;
    } catch (const std::exception& e) {
      KLOG_WARN("[store] batch failed, applying the rest of its group again: {}", e.what());
      m_open.txn.reset();  // rolls back
      results[*failed] = fail(e.what());
      i = 0;
    }
  }
}

// COMMITs the open group and hands its callbacks on: at once (SQLite synced
// inside COMMIT, or nothing to sync), or to the syncer.
void Writer::commit_open() {
  if (m_open.jobs.empty()) return;
  bool committed = false;
  if (m_open.txn) {
    try {
      m_open.txn->commit();
      committed = true;
    } catch (const std::exception& e) {
      for (auto& r : m_open.results) {
        if (*r) r = fail(e.what());
      }
    }
    m_open.txn.reset();  // rolls back unless committed
  }
  auto jobs = std::move(m_open.jobs);
  auto results = std::move(m_open.results);
  m_open.jobs.clear();
  m_open.results.clear();
  ++m_stats.commits;
  m_stats.batches += jobs.size();
  if (committed) after_commit();

  if (!m_own_sync) {
    for (std::size_t i = 0; i < jobs.size(); ++i)
      invoke_safely(jobs[i].done, std::move(*results[i]));
    return;
  }
  Synced synced;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].caller_syncs) {
      invoke_safely(jobs[i].done, std::move(*results[i]));
    } else {
      synced.done.push_back(std::move(jobs[i].done));
      synced.results.push_back(std::move(*results[i]));
    }
  }
  if (synced.done.empty()) return;
  {
    std::lock_guard lock(m_queue.mutex);
    m_synced.push_back(std::move(synced));
  }
  m_sync_cv.notify_one();
}

void Writer::after_commit() {
  m_stats.max_wal_frames = std::max(m_stats.max_wal_frames, m_wal_frames);
  if (m_wal_frames >= k_wal_limit_frames) {
    ++m_stats.checkpoint_waits;
    const auto t0 = std::chrono::steady_clock::now();
    m_checkpointer->request_and_wait();
    m_stats.checkpoint_wait_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m_wal_frames = 0;  // the next transaction starts the WAL over (or the hook says otherwise)
  } else if (m_wal_frames >= k_checkpoint_frames) {
    m_checkpointer->request();
  }
}

// The writer loop. Batches are applied as they arrive into one open
// transaction. With synchronous=FULL it is committed when the syncer has
// nothing left to sync (so a group grows while the disk is busy, and the
// writer keeps applying meanwhile) or when it is full; otherwise at once.
void Writer::writer_main() {
  pthread_setname_np(pthread_self(), "korch-store-w");
  const auto limit = static_cast<std::size_t>(std::max(1, m_options.max_batches_per_txn));
  for (;;) {
    std::vector<Job> taken;
    std::optional<Job> task;
    bool commit = false;
    {
      std::unique_lock lock(m_queue.mutex);
      m_queue.cv.wait(lock, [&] {
        return !m_queue.jobs.empty() || m_queue.stopping || (!m_open.jobs.empty() && sync_idle());
      });
      if (m_queue.jobs.empty() && m_open.jobs.empty()) break;  // stopping, drained
      if (!m_queue.jobs.empty() && m_queue.jobs.front().task) {
        if (m_open.jobs.empty()) {
          task = std::move(m_queue.jobs.front());
          m_queue.jobs.pop_front();
        }
      } else {
        while (!m_queue.jobs.empty() && !m_queue.jobs.front().task &&
               m_open.jobs.size() + taken.size() < limit) {
          taken.push_back(std::move(m_queue.jobs.front()));
          m_queue.jobs.pop_front();
        }
      }
    }
    try {
      if (task) {
        task->task(*m_db);
        after_commit();
        continue;
      }
      std::size_t first = m_open.jobs.size();
      for (auto& job : taken) m_open.jobs.push_back(std::move(job));
      if (first < m_open.jobs.size()) apply_open(first);
      {
        std::lock_guard lock(m_queue.mutex);
        commit = !m_own_sync || sync_idle() || m_open.jobs.size() >= limit || m_queue.stopping ||
                 (!m_queue.jobs.empty() && m_queue.jobs.front().task);
      }
      if (commit) commit_open();
    } catch (const std::exception& e) {
      KLOG_ERROR("[store] writer: {}", e.what());
    } catch (...) {
      KLOG_ERROR("[store] writer: non-standard exception");
    }
  }
  KLOG_DEBUG(
      "[store] writer: {} commits of {} batches, {} WAL frames written, WAL peak {} frames, {} "
      "waits for a checkpoint ({:.2f} s)",
      m_stats.commits, m_stats.batches, m_stats.frames, m_stats.max_wal_frames,
      m_stats.checkpoint_waits, m_stats.checkpoint_wait_s);
  if (m_own_sync) {
    // The syncer drains what is left and closes the connection.
    {
      std::lock_guard lock(m_queue.mutex);
      m_writer_done = true;
    }
    m_sync_cv.notify_all();
    return;
  }
  close_connections();
}

void Writer::syncer_main() {
  pthread_setname_np(pthread_self(), "korch-store-s");
  for (;;) {
    std::deque<Synced> work;
    {
      std::unique_lock lock(m_queue.mutex);
      m_sync_cv.wait(lock, [&] { return !m_synced.empty() || m_writer_done; });
      if (m_synced.empty()) break;
      work.swap(m_synced);
      m_syncing = true;
    }
    // One fdatasync covers every group committed so far.
    std::string err = sync_wal();
    {
      std::lock_guard lock(m_queue.mutex);
      m_syncing = false;
    }
    m_queue.cv.notify_one();  // the writer may commit its open group now
    if (!err.empty()) KLOG_ERROR("[store] {}", err);
    for (auto& s : work) {
      for (std::size_t i = 0; i < s.done.size(); ++i) {
        if (!err.empty() && s.results[i]) s.results[i] = fail("commit not made durable: " + err);
        invoke_safely(s.done[i], std::move(s.results[i]));
      }
    }
  }
  close_connections();
}

// Ends the checkpointer and closes the write connection, last of the
// process's connections to the file in the common case: SQLite then
// checkpoints and removes the WAL.
void Writer::close_connections() {
  try {
    m_checkpointer.reset();
    m_applier.reset();
    m_db.reset();
  } catch (...) {}
  std::lock_guard lock(m_wal_fd_mutex);
  if (m_wal_fd >= 0) ::close(m_wal_fd);
  m_wal_fd = -1;
}

}  // namespace detail
}  // namespace korch::store
