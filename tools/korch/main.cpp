// korch: the command-line entry point. Thin: every subcommand lives in a
// cmd_*.cpp next to this file and calls into the libraries.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/korch/cli.hpp"
#include "tools/korch/version.hpp"
#include "util/allocator/allocator.hpp"

namespace {

constexpr const char* k_usage = R"(korch — durable campaigns of LLM agents writing GPU kernels

Usage:
  korch run CAMPAIGN.toml [--set KEY=VALUE]... [--no-progress] [--log-level LEVEL]
      Run a campaign in the foreground. Ctrl-C or a kill leaves a resumable
      store; running it again resumes without repeating finished work.
  korch resume CAMPAIGN.toml [--set KEY=VALUE]...
      Same as run, but refuses to start a campaign that has no stored state.
  korch status (CAMPAIGN.toml | --db PATH|URL)
      Episodes, turns, tokens and cost per campaign in the store.
  korch export (CAMPAIGN.toml | --db PATH) --format jsonl|csv|sft|rl [--campaign NAME] [--out FILE]
               [--correct-only] [--min-speedup X] [--level N] [--model ID] [--card FILE] [--openai-only]
               [--gamma G]
      jsonl|csv: one record per attempt (turn) and one per episode. sft: one chat
      record per episode (OpenAI fine-tuning shape), deduplicated by code; rl: one
      record per scored action with its verdict, reward and return discounted by
      --gamma; filtered, --card writes the dataset card (docs/export.md).
  korch report (CAMPAIGN.toml | --db PATH) [--campaign NAME] [--format text|json|html] [--out FILE]
      fast_p, geometric-mean speedup, pass@k, cost and tokens per model;
      html: one self-contained page with the plots and the task grid.
  korch config show CAMPAIGN.toml [--set KEY=VALUE]...
      Every configuration value and where it came from.
  korch store copy SRC DST [--campaign NAME]
      Copies campaigns whole (every row, every column) between stores: a path,
      sqlite:PATH or postgres://USER@HOST/DB (docs/postgres.md), either way.
      Refuses a campaign DST already holds.
  korch tasks list DIR [--levels 1,2] [--ids 1-10]
  korch tasks validate DIR [--levels 1] [--ids 1-3] [--mode cpu|gpu] [--gpus 0]
  korch eval --task FILE --code FILE [--mode check|submit] [--device cpu|cuda]
             [--rules on|off] [--evaluator cpu|gpu|mock] [--timeout S]
             [--memory-budget-mb N] [--tolerance strict|tf32] [--gpus all|0,1] [--json]
      One evaluation from the command line.
  korch lint FILE... [--json] [--tolerance strict|tf32] [--torch-ops allow|forbid]
      The static rules alone (no compile, no torch): `file:line: [rule] message`
      and how to fix it; --json prints one object per file. Exit 0 if every
      file passes, 1 if any has a violation, 2 on bad usage or unreadable files.
  korch serve [--listen 127.0.0.1:8765] [--db PATH] [--config FILE] [--token-file FILE]
              [--env-listen 127.0.0.1:8766] [--print-keys] [--print-routes] [--KEY VALUE]...
      The daemon: HTTP API, Prometheus metrics, OpenEnv endpoint; resumes
      unfinished campaigns at start. docs/api.md; `korch serve --print-keys`.
  korch worker --store postgres://... [--config CAMPAIGN.toml] [--evaluator mock|cpu|gpu]
               [--gpus all|none|0,1] [--compile-jobs N] [--slots N] [--lease-s S] [--id NAME]
               [--cache-dir DIR] [--mock-latency-s S] [--max-claims N] [--max-evaluations N]
               [--drain-s S] [--set KEY=VALUE]...
      Claims evaluations from the store's work queue (a coordinator with
      evaluator.remote = true enqueues them), one per GPU, and writes the
      results; SIGTERM drains (finishes what it holds, takes nothing new).
      `korch status --db URL` lists the workers. docs/cluster.md.

  korch help COMMAND, korch COMMAND --help
      One command's usage; prints only, changes nothing.

Configuration precedence: defaults < file < KORCH_* environment < --set flags
(docs/config.md lists every key).

Exit codes: 0 ok, 1 error, 2 bad usage or config, 3 run aborted or a service
unavailable (e.g. LLM endpoint unreachable or key rejected, PostgreSQL store
unreachable), 130 interrupted (resumable).
)";

// The usage block of one subcommand: the lines of k_usage from its
// "  korch <cmd>" line up to the next subcommand's (so the two stay one text).
std::string usage_of(const std::string& cmd) {
  const std::string text = k_usage;
  const std::string head = "  korch " + cmd;
  std::string out;
  std::size_t pos = 0;
  bool in = false;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    bool starts_cmd = line.rfind("  korch ", 0) == 0;
    if (starts_cmd) {
      in = line.rfind(head + " ", 0) == 0 || line == head;
    } else if (line.empty() || line[0] != ' ') {
      in = false;
    }
    if (in) out += line + "\n";
  }
  return out;
}

// `korch CMD ... --help` (or -h): CMD's usage on stdout, exit 0, and nothing
// else happens (no store opened, no port bound, no file written).
bool wants_help(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return true;
  }
  return false;
}

int print_help(const std::string& cmd) {
  auto text = usage_of(cmd);
  if (text.empty()) {
    std::fprintf(stderr, "korch: unknown command '%s' (see korch --help)\n", cmd.c_str());
    return korch::cli::exit_code(korch::ErrorKind::invalid);
  }
  std::fputs(("Usage:\n" + text).c_str(), stdout);
  if (cmd == "serve") std::fputs(korch::cli::serve_help().c_str(), stdout);
  std::fputs("\nkorch --help lists every command; docs/config.md every key.\n", stdout);
  return korch::cli::k_exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace korch::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      (!std::strcmp(argv[1], "help") && argc == 2)) {
    std::fputs(k_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? exit_code(korch::ErrorKind::invalid) : k_exit_ok;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("korch %s (allocator: %s)\n", korch::k_version, korch::allocator_name().c_str());
    return k_exit_ok;
  }
  std::string cmd = argv[1];
  if (cmd == "help" && argc > 2) return print_help(argv[2]);
  if (wants_help(argc, argv)) return print_help(cmd);
  if (cmd == "serve") return cmd_serve(argc, argv);
  int first = 2;
  if (cmd == "config") {
    if (argc < 3 || std::string(argv[2]) != "show") {
      std::fprintf(stderr, "korch: usage: korch config show CAMPAIGN.toml [--set KEY=VALUE]...\n");
      return exit_code(korch::ErrorKind::invalid);
    }
    first = 3;
  }
  if (cmd == "store") {
    if (argc < 3 || std::string(argv[2]) != "copy") {
      std::fprintf(stderr, "korch: usage: korch store copy SRC DST [--campaign NAME]\n");
      return exit_code(korch::ErrorKind::invalid);
    }
    first = 3;
  }
  static const std::vector<std::string> k_switches = {"--no-progress", "--json", "--correct-only",
                                                      "--openai-only"};
  std::string error;
  auto args = parse_args(argc, argv, first, k_switches, &error);
  if (!args) {
    std::fprintf(stderr, "korch %s: %s (see korch --help)\n", cmd.c_str(), error.c_str());
    return exit_code(korch::ErrorKind::invalid);
  }
  try {
    if (cmd == "run") return cmd_run(*args, false);
    if (cmd == "resume") return cmd_run(*args, true);
    if (cmd == "status") return cmd_status(*args);
    if (cmd == "export") return cmd_export(*args);
    if (cmd == "report") return cmd_report(*args);
    if (cmd == "config") return cmd_config_show(*args);
    if (cmd == "store") return cmd_store(*args);
    if (cmd == "tasks") return cmd_tasks(*args);
    if (cmd == "eval") return cmd_eval(*args);
    if (cmd == "lint") return cmd_lint(*args);
    if (cmd == "worker") return cmd_worker(*args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "korch %s: internal error: %s\n", cmd.c_str(), e.what());
    return exit_code(korch::ErrorKind::failure);
  }
  std::fprintf(stderr, "korch: unknown command '%s' (see korch --help)\n", cmd.c_str());
  return exit_code(korch::ErrorKind::invalid);
}
