// korch: the command-line entry point. Thin: the grammar (every command and
// its flags) is the table in grammar.cpp; every subcommand lives in a
// cmd_*.cpp next to this file and calls into the libraries.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/korch/cli.hpp"
#include "tools/korch/grammar.hpp"
#include "tools/korch/version.hpp"
#include "util/allocator/allocator.hpp"

namespace {

// `korch CMD ... --help` (or -h): CMD's usage on stdout, exit 0, and nothing
// else happens (no store opened, no port bound, no file written).
bool wants_help(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--")) return false;
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return true;
  }
  return false;
}

int print_help(const korch::cli::CommandSpec& spec) {
  std::fputs(korch::cli::command_help(spec).c_str(), stdout);
  std::fputs(
      "\nkorch --help lists every command; docs/cli.md every flag, docs/config.md every key.\n",
      stdout);
  return korch::cli::k_exit_ok;
}

// The usage of a group's commands (`korch tasks --help`: tasks list, tasks
// validate); false when `group` names none.
bool print_group_help(const std::string& group) {
  std::string text;
  for (const auto& c : korch::cli::commands())
    if (c.name.starts_with(group + " ")) text += korch::cli::command_help(c);
  if (text.empty()) return false;
  std::fputs(text.c_str(), stdout);
  return true;
}

// `korch help [COMMAND | --markdown | --grammar]`.
int cmd_help(int argc, char** argv) {
  using namespace korch::cli;
  if (argc == 2) {
    std::fputs(usage_text().c_str(), stdout);
    return k_exit_ok;
  }
  if (!std::strcmp(argv[2], "--markdown")) {
    std::fputs(markdown_text().c_str(), stdout);
    return k_exit_ok;
  }
  if (!std::strcmp(argv[2], "--grammar")) {
    std::printf("%s\n", grammar_json().c_str());
    return k_exit_ok;
  }
  int words = 0;
  std::string error;
  auto* spec = find_command(argc - 1, argv + 1, &words, &error);
  if (spec) return print_help(*spec);
  if (print_group_help(argv[2])) return k_exit_ok;
  std::fprintf(stderr, "%s\n", error.c_str());
  return exit_code(korch::ErrorKind::invalid);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace korch::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(usage_text().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? exit_code(korch::ErrorKind::invalid) : k_exit_ok;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("korch %s (allocator: %s)\n", korch::k_version, korch::allocator_name().c_str());
    return k_exit_ok;
  }
  if (!std::strcmp(argv[1], "help")) return cmd_help(argc, argv);
  int words = 0;
  std::string error;
  const CommandSpec* spec = find_command(argc, argv, &words, &error);
  if (wants_help(argc, argv)) {
    if (spec) return print_help(*spec);
    if (print_group_help(argv[1])) return k_exit_ok;
  }
  if (!spec) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return exit_code(korch::ErrorKind::invalid);
  }
  auto args = parse_command(*spec, argc, argv, 1 + words);
  if (!args) {
    return report_failure(spec->name, args.error().kind,
                          args.error().message + "\nusage: " + usage_line(*spec) + " (korch " +
                              spec->name + " --help)");
  }
  try {
    return spec->run(*args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "korch %s: internal error: %s\n", spec->name.c_str(), e.what());
    return exit_code(korch::ErrorKind::failure);
  }
}
