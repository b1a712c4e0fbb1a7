#include "tools/korch/grammar.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config/vocabulary.hpp"
#include "daemon/serve_config.hpp"
#include "reports/report.hpp"
#include "util/did_you_mean.hpp"

namespace korch::cli {
namespace {

// ---------------------------------------------------------------------------
// Flags more than one command takes: one spelling, one meaning.

FlagSpec set_flag() {
  return {"--set", FlagType::setting, "KEY=VALUE", {}, "a config key (docs/config.md); repeatable"};
}
FlagSpec db_flag(std::string doc) { return {"--db", FlagType::text, "PATH|URL", {}, doc}; }
FlagSpec campaign_flag() {
  return {"--campaign", FlagType::text, "NAME", {}, "the campaign, when the store holds several"};
}
FlagSpec out_flag() { return {"--out", FlagType::text, "FILE", {}, "write to FILE, not stdout"}; }
FlagSpec log_level_flag() {
  return {"--log-level", FlagType::choice, "", enum_name_list<config::LogLevel>(),
          "log verbosity (stderr)"};
}
FlagSpec choice(std::string name, std::vector<std::string> choices, std::string doc) {
  return {std::move(name), FlagType::choice, "", std::move(choices), std::move(doc)};
}
FlagSpec whole(std::string name, std::string doc) {
  return {std::move(name), FlagType::whole, "N", {}, std::move(doc)};
}
FlagSpec number(std::string name, std::string metavar, std::string doc) {
  return {std::move(name), FlagType::number, std::move(metavar), {}, std::move(doc)};
}
FlagSpec text(std::string name, std::string metavar, std::string doc) {
  return {std::move(name), FlagType::text, std::move(metavar), {}, std::move(doc)};
}
FlagSpec on_off(std::string name, std::string doc) {
  return {std::move(name), FlagType::on_off, "", {}, std::move(doc)};
}

const char* k_db_read_doc = "the store (a path, sqlite:PATH or postgres://...), not the TOML's";

int run_run(const Args& a) { return cmd_run(a, false); }
int run_resume(const Args& a) { return cmd_run(a, true); }
int run_tasks_list(const Args& a) { return cmd_tasks(a, false); }
int run_tasks_validate(const Args& a) { return cmd_tasks(a, true); }

// korch serve's flags: its own, then every serve key as a flag
// (daemon/serve_config.cpp, the one table of them).
std::vector<FlagSpec> serve_flags() {
  std::vector<FlagSpec> flags = {
      text("--config", "FILE", "a TOML file of serve keys (defaults < --config < flags)"),
      set_flag(),
      on_off("--print-keys", "print every key, its flag and its doc, and exit"),
      on_off("--print-routes", "print every HTTP route, and exit"),
  };
  flags[1].doc = "a serve key (korch serve --print-keys); repeatable";
  for (const auto& k : daemon::serve_keys()) {
    FlagSpec f{k.flag, k.choices.empty() ? FlagType::text : FlagType::choice, "VALUE", k.choices,
               k.doc};
    f.in_synopsis =
        k.name == "listen" || k.name == "db" || k.name == "token_file" || k.name == "env_listen";
    if (f.in_synopsis) f.metavar = k.name == "token_file" ? "FILE" : "ADDR";
    if (k.name == "db") f.metavar = "PATH|URL";
    flags.push_back(std::move(f));
  }
  return flags;
}

std::vector<CommandSpec> build_table() {
  std::vector<CommandSpec> t;
  t.push_back({"run",
               "CAMPAIGN.toml",
               "Run a campaign in the foreground. Ctrl-C or a kill leaves a resumable store; "
               "running it again resumes without repeating finished work.",
               {set_flag(), db_flag("the store to run in (same as --set store.url=PATH|URL)"),
                on_off("--no-progress", "no progress line on stderr"), log_level_flag()},
               "",
               run_run});
  t.push_back({"resume",
               "CAMPAIGN.toml",
               "Same as run, but refuses to start a campaign that has no stored state.",
               {set_flag(), db_flag("the store to resume in (same as --set store.url=PATH|URL)"),
                on_off("--no-progress", "no progress line on stderr"), log_level_flag()},
               "",
               run_resume});
  t.push_back({"status",
               "[CAMPAIGN.toml]",
               "Episodes, turns, tokens and cost per campaign in the store, and its verdict "
               "counts; the store of CAMPAIGN.toml or --db.",
               {db_flag(k_db_read_doc), campaign_flag(), set_flag()},
               "",
               cmd_status});
  t.push_back({"export",
               "[CAMPAIGN.toml]",
               "jsonl|csv: one record per attempt (turn) and one per episode. sft: one chat record "
               "per episode (OpenAI fine-tuning shape), deduplicated by code; rl: one record per "
               "scored action with its verdict, reward and return discounted by --gamma; "
               "filtered, --card writes the dataset card (docs/export.md).",
               {db_flag(k_db_read_doc), campaign_flag(), set_flag(),
                choice("--format", {"jsonl", "csv", "sft", "rl"}, "the record shape"), out_flag(),
                on_off("--correct-only", "sft|rl: only correct attempts"),
                number("--min-speedup", "X", "sft|rl: only attempts at least X times faster"),
                whole("--level", "sft|rl: only tasks of this KernelBench level"),
                text("--model", "ID", "sft|rl: only this model's episodes"),
                text("--card", "FILE", "sft|rl: write the dataset card to FILE"),
                on_off("--openai-only", "sft: only the fields OpenAI fine-tuning takes"),
                number("--gamma", "G", "rl: the discount of the return, in [0, 1] (default 1)")},
               "",
               cmd_export});
  t.push_back({"report",
               "[CAMPAIGN.toml]",
               "fast_p, geometric-mean speedup, pass@k, verdict counts, cost and tokens per model; "
               "html: one self-contained page with the plots and the task grid.",
               {db_flag(k_db_read_doc), campaign_flag(), set_flag(),
                choice("--format", enum_name_list<reports::ReportFormat>(), "the report's format"),
                out_flag(), on_off("--json", "the older spelling of --format json")},
               "",
               cmd_report});
  t.push_back({"config show",
               "CAMPAIGN.toml",
               "Every configuration value and where it came from.",
               {set_flag()},
               "",
               cmd_config_show});
  t.push_back({"store copy",
               "SRC DST",
               "Copies campaigns whole (every row, every column) between stores: a path, "
               "sqlite:PATH or postgres://USER@HOST/DB (docs/postgres.md), either way. Refuses a "
               "campaign DST already holds.",
               {campaign_flag()},
               "",
               cmd_store});
  t.push_back({"tasks list",
               "DIR",
               "The KernelBench tasks of DIR that a selection picks.",
               {text("--levels", "1,2", "the levels"), text("--ids", "1-10", "the task numbers")},
               "",
               run_tasks_list});
  t.push_back({"tasks validate",
               "DIR",
               "The evaluator's task checks (nondeterministic, nearly constant, input-independent, "
               "non-finite, rounding noise of the reference, over the memory budget) on each task.",
               {text("--levels", "1,2", "the levels"), text("--ids", "1-10", "the task numbers"),
                choice("--mode", {"cpu", "gpu"}, "where the tasks run"),
                text("--gpus", "all|0,1", "gpu mode: the GPUs"),
                whole("--memory-budget-mb", "memory per evaluation"),
                number("--timeout", "S", "wall clock per task"),
                text("--cache-dir", "DIR", "the compile cache"),
                text("--out", "FILE", "also write the results as JSON (tasks.exclude_flagged)"),
                log_level_flag()},
               "",
               run_tasks_validate});
  t.push_back({"eval",
               "",
               "One evaluation from the command line.",
               {text("--task", "FILE", "the KernelBench task (required)"),
                text("--code", "FILE", "the candidate (required)"),
                choice("--mode", {"check", "submit"}, "a CHECK or a SUBMIT"),
                choice("--device", {"cpu", "cuda"}, "where it runs"),
                choice("--rules", {"on", "off"}, "the static rules"),
                choice("--evaluator", enum_name_list<config::EvalMode>(), "the evaluator"),
                number("--timeout", "S", "wall clock"),
                whole("--memory-budget-mb", "memory of the evaluation"),
                choice("--tolerance", enum_name_list<config::Tolerance>(), "correctness tolerance"),
                choice("--reward", enum_name_list<config::Reward>(), "the reward"),
                text("--gpus", "all|0,1", "gpu mode: the GPUs"),
                whole("--seed", "the secret input seed (default: random)"),
                text("--cache-dir", "DIR", "the compile cache"),
                on_off("--json", "the report as JSON"), log_level_flag()},
               "",
               cmd_eval});
  t.push_back({"audit",
               "",
               "The verdict card: runs a corpus of honest kernels and of attacks through the "
               "evaluator and prints attack success x/N and false rejection y/M with 95% Wilson "
               "intervals, per attack class and overall (docs/rules.md). Exit 1 when an attack "
               "was accepted or an honest kernel rejected.",
               {choice("--mode", {"cpu", "gpu"}, "which evaluator and which corpus"),
                text("--corpus", "DIR", "the corpus (default tests/evaluator/corpus)"),
                text("--kernelbench", "DIR", "gpu mode: the KernelBench problems"),
                text("--only", "TEXT", "only entries whose name contains TEXT"),
                whole("--workers", "concurrent evaluations (cpu mode)"),
                number("--timeout", "S", "wall clock per evaluation"),
                text("--gpus", "all|0,1", "gpu mode: the GPUs"),
                text("--cache-dir", "DIR", "the compile cache"),
                number("--timing-max-s", "S",
                       "cap the timed blocks of each evaluation (default: the judge's 15 s)"),
                text("--store", "PATH|URL",
                     "record the card in this store (report, dashboard and dataset card read it)"),
                text("--from-card", "FILE",
                     "with --store: record the card an earlier --json --out FILE wrote (no run)"),
                on_off("--json", "the card as JSON, with every entry's verdict"), out_flag(),
                log_level_flag()},
               "",
               cmd_audit});
  t.push_back({"lint",
               "FILE...",
               "The static rules alone (no compile, no torch): `file:line: [rule] message` and how "
               "to fix it; --json prints one object per file. Exit 0 if every file passes, 1 if "
               "any has a violation, 2 on bad usage or unreadable files.",
               {on_off("--json", "one JSON object per file"),
                choice("--tolerance", enum_name_list<config::Tolerance>(), "the tolerance profile"),
                choice("--torch-ops", enum_name_list<config::TorchOps>(),
                       "whether torch operators may compute")},
               "",
               cmd_lint});
  t.push_back({"serve", "",
               "The daemon: HTTP API, Prometheus metrics, OpenEnv endpoint; resumes unfinished "
               "campaigns at start. docs/api.md; `korch serve --print-keys`.",
               serve_flags(), "[--KEY VALUE]...", cmd_serve});
  t.push_back(
      {"worker",
       "",
       "Claims evaluations from the store's work queue (a coordinator with evaluator.remote = "
       "true enqueues them), one per GPU, and writes the results; SIGTERM drains (finishes what "
       "it holds, takes nothing new). `korch status --db URL` lists the workers. docs/cluster.md.",
       {db_flag("the coordinator's PostgreSQL store (postgres://...)"),
        text("--store", "URL", "the older spelling of --db"),
        text("--config", "CAMPAIGN.toml", "settings from a campaign file"),
        choice("--evaluator", enum_name_list<config::EvalMode>(), "the evaluator"),
        text("--gpus", "all|none|0,1", "the GPUs (one evaluation each)"),
        whole("--compile-jobs", "concurrent compiles"), whole("--slots", "concurrent evaluations"),
        number("--lease-s", "S", "seconds a claim is held without a heartbeat"),
        text("--id", "NAME", "this worker's name"), text("--cache-dir", "DIR", "the compile cache"),
        number("--mock-latency-s", "S", "mock evaluator: simulated time"),
        whole("--max-claims", "claims at once"),
        whole("--max-evaluations", "stop after N evaluations"),
        number("--drain-s", "S", "longest drain on SIGTERM"), set_flag(), log_level_flag()},
       "",
       cmd_worker});
  for (auto& c : t) {
    for (auto& f : c.flags) {
      if (f.type != FlagType::choice) continue;
      f.metavar.clear();
      for (auto& ch : f.choices) f.metavar += (f.metavar.empty() ? "" : "|") + ch;
    }
  }
  return t;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// Words of `text` wrapped to lines of at most `width`, each after `indent`.
std::string wrap(const std::string& text, std::size_t indent, std::size_t width,
                 std::size_t first_used = 0) {
  std::string out;
  std::size_t used = first_used ? first_used : indent;
  if (!first_used) out.append(indent, ' ');
  bool line_empty = !first_used;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    if (!line_empty && used + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      used = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++used;
    }
    out += word;
    used += word.size();
    line_empty = false;
  }
  return out + "\n";
}

std::string flag_usage(const FlagSpec& f) {
  switch (f.type) {
    case FlagType::on_off: return "[" + f.name + "]";
    case FlagType::setting: return "[" + f.name + " " + f.metavar + "]...";
    default: return "[" + f.name + " " + f.metavar + "]";
  }
}

// "korch lint FILE... [--json] ...": the usage on one line, for messages.
std::string usage_words(const CommandSpec& c) {
  std::string words = "korch " + c.name + (c.operands.empty() ? "" : " " + c.operands);
  for (const auto& f : c.flags)
    if (f.in_synopsis) words += " " + flag_usage(f);
  if (!c.synopsis_tail.empty()) words += " " + c.synopsis_tail;
  return words;
}

std::string synopsis(const CommandSpec& c) {
  // A flag and its value stay on one line: joined by '\x01' while wrapping.
  constexpr char k_glue = '\x01';
  std::string words = c.operands;
  for (const auto& f : c.flags) {
    if (!f.in_synopsis) continue;
    std::string usage = flag_usage(f);
    std::replace(usage.begin(), usage.end(), ' ', k_glue);
    words += (words.empty() ? "" : " ") + usage;
  }
  if (!c.synopsis_tail.empty()) {
    std::string tail = c.synopsis_tail;
    std::replace(tail.begin(), tail.end(), ' ', k_glue);
    words += " " + tail;
  }
  const std::string head = "  korch " + c.name;
  std::string out = head + wrap(words, head.size() + 1, 96, head.size());
  std::replace(out.begin(), out.end(), k_glue, ' ');
  return out;
}

std::string usage_block(const CommandSpec& c) { return synopsis(c) + wrap(c.summary, 6, 80); }

std::vector<std::string> flag_names(const CommandSpec& c) {
  std::vector<std::string> out;
  for (const auto& f : c.flags) out.push_back(f.name);
  return out;
}

Result<void> check_value(const FlagSpec& f, const std::string& value) {
  switch (f.type) {
    case FlagType::whole:
    case FlagType::number: {
      double d = 0;
      unsigned long long n = 0;
      const char* end = value.data() + value.size();
      bool ok = false;
      if (f.type == FlagType::whole) {
        auto [p, ec] = std::from_chars(value.data(), end, n);
        ok = ec == std::errc() && p == end && !value.empty();
      } else {
        auto [p, ec] = std::from_chars(value.data(), end, d);
        ok = ec == std::errc() && p == end && !value.empty() && std::isfinite(d) && d >= 0;
      }
      if (!ok) {
        return fail(ErrorKind::invalid,
                    fmt::format("{} takes {}, not '{}'", f.name,
                                f.type == FlagType::whole ? "a whole number >= 0" : "a number >= 0",
                                value));
      }
      return {};
    }
    case FlagType::choice:
      if (std::find(f.choices.begin(), f.choices.end(), value) == f.choices.end()) {
        return fail(ErrorKind::invalid,
                    fmt::format("{} takes {}, not '{}'{}", f.name, join(f.choices, ", "), value,
                                suggestion(value, f.choices)));
      }
      return {};
    case FlagType::setting:
      if (value.find('=') == std::string::npos || value.front() == '=') {
        return fail(ErrorKind::invalid,
                    fmt::format("{} takes KEY=VALUE, not '{}' (docs/config.md lists the keys)",
                                f.name, value));
      }
      return {};
    case FlagType::on_off:
    case FlagType::text: return {};
  }
  return {};
}

}  // namespace

const FlagSpec* CommandSpec::flag(std::string_view n) const {
  for (const auto& f : flags)
    if (f.name == n) return &f;
  return nullptr;
}

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> table = build_table();
  return table;
}

const CommandSpec* find_command(int argc, char** argv, int* words, std::string* error) {
  const std::string first = argc > 1 ? argv[1] : "";
  const std::string second = argc > 2 ? argv[2] : "";
  std::vector<std::string> firsts;
  std::vector<std::string> subs;  // the second words of `first`'s commands
  for (const auto& c : commands()) {
    auto space = c.name.find(' ');
    std::string w1 = c.name.substr(0, space);
    if (std::find(firsts.begin(), firsts.end(), w1) == firsts.end()) firsts.push_back(w1);
    if (space == std::string::npos) {
      if (c.name == first) {
        *words = 1;
        return &c;
      }
      continue;
    }
    if (w1 != first) continue;
    std::string w2 = c.name.substr(space + 1);
    if (w2 == second) {
      *words = 2;
      return &c;
    }
    subs.push_back(w2);
  }
  if (!subs.empty()) {
    *error = fmt::format("korch {}: {} (korch {} {})", first,
                         second.empty()
                             ? "needs a subcommand"
                             : "unknown subcommand '" + second + "'" + suggestion(second, subs),
                         first, join(subs, "|"));
  } else {
    *error = fmt::format("korch: unknown command '{}'{} (see korch --help)", first,
                         suggestion(first, firsts));
  }
  return nullptr;
}

Result<Args> parse_command(const CommandSpec& spec, int argc, char** argv, int first) {
  Args args;
  const std::string verb = "korch " + spec.name;
  auto unknown = [&](const std::string& name) {
    return fail(ErrorKind::invalid, fmt::format("unknown flag {}{}; korch {} takes {}", name,
                                                suggestion(name, flag_names(spec)), spec.name,
                                                spec.flags.empty() ? std::string("no flags")
                                                                   : join(flag_names(spec), ", ")));
  };
  bool flags_ended = false;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (flags_ended || !a.starts_with("--")) {
      args.positional.push_back(std::move(a));
      continue;
    }
    if (a == "--") {
      flags_ended = true;
      continue;
    }
    auto eq = a.find('=');
    std::string name = a.substr(0, eq);
    const FlagSpec* f = spec.flag(name);
    if (!f) return unknown(name);
    std::string value;
    if (f->type == FlagType::on_off) {
      if (eq != std::string::npos)
        return fail(ErrorKind::invalid, fmt::format("{} takes no value", name));
      value = "true";
    } else if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return fail(ErrorKind::invalid, fmt::format("{} needs a value ({})", name, f->metavar));
    }
    if (auto ok = check_value(*f, value); !ok) return std::unexpected(ok.error());
    args.flags.emplace(name, std::move(value));
  }
  return args;
}

std::string usage_line(const CommandSpec& spec) { return usage_words(spec); }

std::string usage_text() {
  std::string out = "korch — durable campaigns of LLM agents writing GPU kernels\n\nUsage:\n";
  for (const auto& c : commands()) out += usage_block(c);
  out +=
      "\n  korch help COMMAND, korch COMMAND --help\n"
      "      One command's usage and flags; prints only, changes nothing.\n\n"
      "Configuration precedence: defaults < file < KORCH_* environment < --set flags\n"
      "(docs/config.md lists every key). An unknown flag, a flag without its value and a\n"
      "value outside a flag's choices are bad usage (exit 2).\n\n"
      "Exit codes: 0 ok, 1 error, 2 bad usage or config, 3 run aborted or a service\n"
      "unavailable (e.g. LLM endpoint unreachable or key rejected, PostgreSQL store\n"
      "unreachable), 130 interrupted (resumable).\n";
  return out;
}

std::string command_help(const CommandSpec& c) {
  std::string out = "Usage:\n" + usage_block(c);
  if (!c.flags.empty()) out += "\nFlags:\n";
  for (const auto& f : c.flags) {
    std::string head = "  " + f.name + (f.type == FlagType::on_off ? "" : " " + f.metavar);
    if (head.size() < 34)
      head.resize(34, ' ');
    else
      head += "\n" + std::string(34, ' ');
    out += head + f.doc + "\n";
  }
  return out;
}

std::string markdown_text() {
  std::string out =
      "# The korch command line\n\n"
      "Generated from the grammar table (`tools/korch/grammar.cpp`) by `korch help --markdown`;\n"
      "a test keeps this file equal to it. Every command parses its flags against the same\n"
      "table: an unknown flag, a flag without its value and a value outside a flag's choices\n"
      "exit 2 with the closest flag or choice. `--set KEY=VALUE` sets a config key\n"
      "(docs/config.md; for `korch serve`, a serve key: `korch serve --print-keys`), and\n"
      "`--db` names the store wherever a command opens one.\n";
  for (const auto& c : commands()) {
    out += "\n## korch " + c.name + "\n\n```\n" + synopsis(c) + "```\n\n" + c.summary + "\n\n";
    out += "| flag | value | meaning |\n|---|---|---|\n";
    for (const auto& f : c.flags) {
      std::string metavar = f.type == FlagType::on_off ? "" : "`" + f.metavar + "`";
      std::string doc = f.doc;
      for (std::size_t p = 0; (p = doc.find('|', p)) != std::string::npos; p += 2)
        doc.replace(p, 1, "\\|");
      for (std::size_t p = 0; (p = metavar.find('|', p)) != std::string::npos; p += 2)
        metavar.replace(p, 1, "\\|");
      out += "| `" + f.name + "` | " + metavar + " | " + doc + " |\n";
    }
  }
  return out;
}

std::string grammar_json() {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& c : commands()) {
    nlohmann::ordered_json flags = nlohmann::ordered_json::array();
    for (const auto& f : c.flags) {
      static const char* k_types[] = {"on_off", "text", "whole", "number", "choice", "setting"};
      flags.push_back(
          {{"name", f.name}, {"type", k_types[static_cast<int>(f.type)]}, {"choices", f.choices}});
    }
    j.push_back({{"command", c.name}, {"flags", flags}});
  }
  return j.dump(1);
}

}  // namespace korch::cli
