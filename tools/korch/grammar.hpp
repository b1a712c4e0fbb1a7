#pragma once
// The command line's grammar, declared once: every subcommand, its operands
// and its flags (a table, as config/keys.cpp is for the config keys). The
// parser, `korch --help`, `korch CMD --help`, docs/cli.md (`korch help
// --markdown`) and the table-driven test (`korch help --grammar`) all read
// this table, so a flag added here is parsed, checked, documented and tested.
#include <string>
#include <string_view>
#include <vector>

#include "tools/korch/cli.hpp"

namespace korch::cli {

enum class FlagType {
  on_off,   // a switch: present or not, takes no value
  text,     // any text (a path, a name, a URL)
  whole,    // a whole number >= 0
  number,   // a number >= 0
  choice,   // one of `choices`
  setting,  // KEY=VALUE, repeatable (--set)
};

struct FlagSpec {
  std::string name;  // "--format"
  FlagType type = FlagType::text;
  std::string metavar;               // "FILE", "N"; for a choice: its choices joined by '|'
  std::vector<std::string> choices;  // FlagType::choice
  std::string doc;                   // one line
  bool in_synopsis = true;           // listed on the command's usage line
};

struct CommandSpec {
  std::string name;      // "run", "config show": the words after `korch`
  std::string operands;  // "CAMPAIGN.toml", "SRC DST", "" for none
  std::string summary;   // what it does; a few sentences
  std::vector<FlagSpec> flags;
  std::string synopsis_tail;  // written after the flags: "[--KEY VALUE]..."
  int (*run)(const Args&) = nullptr;

  const FlagSpec* flag(std::string_view name) const;
};

// Every subcommand, in the order `korch --help` lists them.
const std::vector<CommandSpec>& commands();

// The command argv names: the longest name that matches argv[1] (and argv[2]
// for a two-word command). nullptr with *error set otherwise: an unknown
// command or subcommand, with a did-you-mean; *words is how many argv
// entries the name took.
const CommandSpec* find_command(int argc, char** argv, int* words, std::string* error);

// Parses argv[first..] against `spec`: `--name value`, `--name=value`,
// switches without a value, `--` ends the flags. An unknown flag, a switch
// given a value, a missing value, a number that is not one and a choice that
// is not one are invalid-input errors that name the flag, the closest flag
// or choice (did you mean) and the valid ones.
Result<Args> parse_command(const CommandSpec& spec, int argc, char** argv, int first);

// "korch lint FILE... [--json] ...": the command's usage on one line.
std::string usage_line(const CommandSpec& spec);
// `korch --help`: every command's usage block.
std::string usage_text();
// `korch CMD --help`: its usage block and each flag with its doc.
std::string command_help(const CommandSpec& spec);
// docs/cli.md, generated from the table (a test keeps the file equal).
std::string markdown_text();
// The table as JSON, for the table-driven test.
std::string grammar_json();

}  // namespace korch::cli
