#pragma once
// Loads a campaign configuration (DESIGN §1 "config", STYLE habit 7).
//
// One key table describes every scalar key: its dotted TOML name, its
// environment variable (KORCH_ + upper snake case), its default, its type and
// a doc string. docs/config.md documents the same table and a unit test keeps
// the two (and the defaults in campaign.hpp) in agreement.
//
// Precedence, lowest first:
//   defaults  <  TOML file  <  environment (KORCH_*)  <  flags (--set key=value)
//
// `[[models]]` and `[[events]]` are arrays of tables set in the file. A model
// field can also be overridden by `--set models.<id>.<key>=value` or by the
// variable KORCH_MODELS_<ID>_<KEY> (the id upper-cased, other characters
// than letters and digits turned into '_'), e.g. to point a model at another
// endpoint without editing the file.
//
// No toml++ type appears here; the parser lives in config/layers.cpp (the
// key table in keys.cpp, the rules in validate.cpp, the JSON in record.cpp).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/campaign.hpp"
#include "util/error.hpp"

namespace korch::config {

// How a key's value is written and parsed. In the environment and in flags
// the same rules apply to the text: integer ("5"), number ("2.5"), boolean
// ("true"/"false"), integer_list ("1,2" or "[1, 2]"). `path` is a string
// that, when set in the file and relative, is resolved against the directory
// of the config file (relative values from env or flags stay relative to the
// working directory).
enum class KeyType { string, path, integer, number, boolean, integer_list };

// The documented part of one key (the setters stay in keys.cpp).
struct KeyInfo {
  std::string_view name;  // dotted TOML name: "max_turns", "evaluator.mode"
  std::string_view env;   // "KORCH_MAX_TURNS"; empty for model/event keys
  KeyType type = KeyType::string;
  std::string_view default_value;  // rendered as TOML: "5", "\"exact\"", "[1]"
  std::string_view doc;            // one sentence, used by docs/config.md
};

// The campaign's scalar keys, in documentation order.
const std::vector<KeyInfo>& key_table();

// The keys of one `[[models]]` table (defaults from ModelConfig{}).
const std::vector<KeyInfo>& model_key_table();

// The keys of one `[[events]]` table.
const std::vector<KeyInfo>& event_key_table();

// Renders key `name` of `cfg` as TOML ("5", "\"mock\"", "[1, 2]"). An unknown
// name renders as "".
std::string render_key(const CampaignConfig& cfg, std::string_view name);

// Renders field `name` (a model_key_table() name) of `model` as TOML.
std::string render_model_key(const ModelConfig& model, std::string_view name);

// The value a key ended up with and where it came from.
struct ConfigValue {
  std::string key;     // "max_turns", "models.replay.base_url", "events[0]"
  std::string value;   // rendered as TOML
  std::string origin;  // "default", "file:<path>:<line>", "env:KORCH_X", "flag"
};

struct LoadedConfig {
  CampaignConfig config;
  std::string path;  // the config file, as given
  // Every key-table key in table order, then every field of every model
  // ("models.<id>.<key>"), then every event ("events[<i>]").
  std::vector<ConfigValue> values;
  // Non-fatal notes, e.g. a KORCH_* variable that looks like a misspelt key.
  std::vector<std::string> warnings;
};

// Loads `path`, then applies `env` (only KORCH_* names are looked at; pass
// process_environment() in production, a literal map in tests) and then
// `overrides` ("key=value" strings from repeated --set flags), and validates
// the result. Fails with one line:
//   "<file>:<line>:<col>: <toml error>"            malformed TOML
//   "<file>:<line>: unknown key 'x' (did you mean 'y'?)"
//   "<file>:<line>: 'max_turns' must be an integer"
//   "KORCH_MAX_TURNS: 'max_turns' must be an integer (got 'x')"
//   "--set max_turns=0: 'max_turns' must be >= 1 (got 0)"
//   "<file>: no models: add a [[models]] table" (and other whole-file checks)
// An invalid value is reported with the origin of the value that won.
Result<LoadedConfig> load_campaign(const std::string& path,
                                   const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides);

// The layers without a file, for commands that need settings but run no
// campaign (`korch worker` without --config): defaults < `env` < `overrides`,
// with the same names, parsing and per-key rules as load_campaign(); the
// campaign's whole-file requirements (name, tasks, models) are not asked.
Result<LoadedConfig> load_settings(const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides);

// Checks the value rules (ranges, choices, models, events, tasks.ids) on a
// config built in code. Messages name the key but no file position.
Result<void> validate(const CampaignConfig& cfg);

// How many sample indices a (task, model) may reach under the campaign's
// strategy: samples_per_task (grid), strategy.k (best_of_k, budget) or
// strategy.rounds * samples_per_task (refine). [[events]] samples index these.
int max_samples_per_task_model(const CampaignConfig& cfg);

// The whole resolved config as one JSON object, written from the key tables
// (campaign keys nested by their dotted names, then "models" with every model
// key and "events"), so a stored campaign says exactly what ran. Holds no
// secret: a model names the variable of its API key (api_key_env), never the
// key. Stored as the campaign's config_json.
std::string config_to_json(const CampaignConfig& cfg);

// Reads config_to_json()'s output back; a key that is absent keeps its
// default. Fails on a wrong type or an unknown vocabulary name (no other
// validation: see validate()).
Result<CampaignConfig> config_from_json(std::string_view json);

// A selected task a campaign left out (tasks.exclude_flagged: `korch tasks
// validate` flagged it), with the report's issues ("rounding_noise: ...").
struct ExcludedTask {
  std::string task_id;
  std::vector<std::string> issues;

  bool operator==(const ExcludedTask&) const = default;
};

// A stored config_json with the tasks the campaign left out, as its
// "excluded_tasks" array (the JSON unchanged when there are none); and that
// array read back (none when absent or unreadable). config_from_json ignores it.
std::string with_excluded_tasks(const std::string& config_json,
                                const std::vector<ExcludedTask>& excluded);
std::vector<ExcludedTask> excluded_tasks(std::string_view config_json);

// `korch config show`: one line per value, "key = value   # origin", aligned.
// Models print their api_key_env (a variable name), never a key.
std::string describe(const LoadedConfig& loaded);

// Looks up a value of `loaded.values` by key; nullptr if absent.
const ConfigValue* find_value(const LoadedConfig& loaded, std::string_view key);

// The KORCH_* variables of this process's environment.
std::map<std::string, std::string> process_environment();

// The env var that overrides field `key` of model `model_id`:
// ("replay", "base_url") -> "KORCH_MODELS_REPLAY_BASE_URL".
std::string model_env_name(std::string_view model_id, std::string_view key);

}  // namespace korch::config
