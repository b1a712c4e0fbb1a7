#pragma once
// Internal to korch_store: the write side of the SQLite backend.
//
// Three threads serve one write connection:
//  - the writer applies queued batches, many per `BEGIN IMMEDIATE`
//    transaction (group commit), and COMMITs;
//  - the syncer (synchronous=FULL only) makes each COMMIT durable with one
//    fdatasync of the WAL, then runs the group's callbacks, while the writer
//    already builds the next group. A callback still runs only after its
//    batch is on disk: what FULL promises, without the writer waiting on the
//    disk. (SQLite's own FULL fsyncs inside COMMIT, on the writer thread.)
//  - the checkpointer copies the WAL back into the database file (PASSIVE
//    checkpoints on its own connection), so the writer never does.
// When the WAL outgrows k_wal_limit_frames (the checkpointer is behind), the
// writer waits for one complete checkpoint pass before its next transaction,
// which then starts the WAL over: the WAL stays bounded.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/apply_internal.hpp"
#include "store/sqlite_internal.hpp"
#include "store/store.hpp"
#include "store/store_internal.hpp"

namespace korch::store::detail {

// The batch rules over SQLite's connection (apply_internal.hpp).
using BatchApplier = BatchApplierT<Db>;

// Copies the WAL into the database file on its own thread and connection.
class Checkpointer {
 public:
  // Opens a second read-write connection to `path`. Throws SqliteError.
  Checkpointer(const std::string& path, int busy_timeout_ms, const std::string& synchronous);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Asks for a pass (cheap; coalesces with a pending request).
  void request();
  // Asks for a pass and waits until a pass that started after this call
  // ended. Call only with the writer idle: the pass then copies every frame.
  void request_and_wait();
  // Ends the thread (a pass in progress finishes first). Idempotent.
  void stop();

 private:
  void main();

  std::unique_ptr<Db> m_db;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_requested = false;
  bool m_stopping = false;
  std::uint64_t m_started = 0;   // passes started
  std::uint64_t m_finished = 0;  // passes finished
  std::thread m_thread;
};

class Writer {
 public:
  // Takes the migrated write connection (journal_mode=WAL, synchronous set)
  // and starts the threads. `own_sync`: the connection runs with
  // synchronous=NORMAL and the syncer makes every commit durable (see above).
  Writer(const Options& options, std::unique_ptr<Db> db, bool own_sync);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Store::commit / commit_sync / close (same contracts).
  void commit(WriteBatch batch, CommitCallback done);
  Result<CommitInfo> commit_sync(WriteBatch batch);
  void close();

  // Runs `task` alone on the writer thread, in queue order; the task opens
  // and commits its own transaction. Returns once that commit is durable.
  // Exceptions thrown by `task` come back as errors.
  Result<void> run_task(const std::function<void(Db&)>& task);

 private:
  // A queued unit of writer work: a batch (with its callback), or a task.
  struct Job {
    WriteBatch batch;
    CommitCallback done;
    std::function<void(Db&)> task;
    bool caller_syncs = false;  // commit_sync from the syncer thread: `done` runs at COMMIT
  };
  // A committed group waiting for its fdatasync.
  struct Synced {
    std::vector<CommitCallback> done;
    std::vector<Result<CommitInfo>> results;
  };
  // Writer thread only: the group applied in the open transaction.
  struct OpenGroup {
    std::vector<Job> jobs;
    std::vector<std::optional<Result<CommitInfo>>> results;  // per job; tentative until COMMIT
    std::optional<Txn> txn;
  };
  // Counters for the debug line at close (writer thread only).
  struct Stats {
    std::uint64_t commits = 0;
    std::uint64_t batches = 0;
    std::uint64_t frames = 0;
    std::uint64_t checkpoint_waits = 0;
    double checkpoint_wait_s = 0;  // the writer's time in those waits
    int max_wal_frames = 0;
  };

  bool on_writer_thread() const { return std::this_thread::get_id() == m_writer_id; }
  bool on_syncer_thread() const { return std::this_thread::get_id() == m_syncer_id; }
  std::string closed_message() const;
  void enqueue(Job job);

  Result<CommitInfo> run_alone(const WriteBatch& batch);
  void apply_open(std::size_t first);
  void commit_open();
  bool sync_idle() const;  // m_queue.mutex held
  void after_commit();
  // fdatasync of the WAL; "" on success, else the error.
  std::string sync_wal();
  void close_connections();

  void writer_main();
  void syncer_main();

  static int wal_hook(void* self, struct sqlite3* db, const char* name, int frames);

  Options m_options;
  bool m_own_sync;
  std::unique_ptr<Db> m_db;
  std::optional<BatchApplier> m_applier;
  std::unique_ptr<Checkpointer> m_checkpointer;
  int m_wal_frames = 0;  // writer thread only (set by wal_hook)
  std::mutex m_wal_fd_mutex;
  int m_wal_fd = -1;  // guarded by m_wal_fd_mutex
  OpenGroup m_open;
  Stats m_stats;

  // Its mutex also guards the syncer's state below; the writer waits on its
  // cv for work, stop, or the syncer idle.
  WriterQueue<Job> m_queue;
  std::condition_variable m_sync_cv;  // the syncer waits: committed groups or the writer done
  std::deque<Synced> m_synced;        // committed, not yet synced
  bool m_syncing = false;             // an fdatasync is in progress
  bool m_writer_done = false;

  std::mutex m_join_mutex;
  std::thread m_writer;
  std::thread m_syncer;
  std::thread::id m_writer_id;  // set once in the constructor
  std::thread::id m_syncer_id;  // set once in the constructor
};

}  // namespace korch::store::detail
