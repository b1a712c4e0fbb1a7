// Tests of config/loader: precedence and origins, validation messages with
// file:line, path resolution, and agreement between the key table,
// docs/config.md and the defaults in campaign.hpp.
#include "config/loader.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/tasks.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::config {
namespace {

namespace fs = std::filesystem;

using korch::testing::TempDir;

// The smallest valid campaign. Line numbers matter to the tests below:
//   1 name, 2 [tasks], 3 kernelbench_dir, 4 [[models]], 5 id, 6 base_url, 7 model
const char* const k_minimal =
    "name = \"t\"\n"
    "[tasks]\n"
    "kernelbench_dir = \"/kb\"\n"
    "[[models]]\n"
    "id = \"m1\"\n"
    "base_url = \"http://127.0.0.1:8000/v1\"\n"
    "model = \"model-one\"\n";

const std::map<std::string, std::string> k_no_env;
const std::vector<std::string> k_no_flags;

std::string k_min_text() { return k_minimal; }

std::string origin_of(const LoadedConfig& c, const std::string& key) {
  auto v = find_value(c, key);
  return v ? v->origin : "<missing>";
}
std::string value_of(const LoadedConfig& c, const std::string& key) {
  auto v = find_value(c, key);
  return v ? v->value : "<missing>";
}

std::string env_name_for(std::string_view key) {
  std::string out = "KORCH_";
  for (char c : key)
    out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ---------------------------------------------------------------------------
// Key table / defaults / docs agreement

TEST(KeyTable, DefaultsMatchCampaignStruct) {
  CampaignConfig defaults;
  std::set<std::string_view> names;
  for (const auto& k : key_table()) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate key " << k.name;
    EXPECT_EQ(k.default_value, render_key(defaults, k.name)) << k.name;
    EXPECT_EQ(k.env, env_name_for(k.name)) << k.name;
    EXPECT_FALSE(k.doc.empty()) << k.name;
  }
  ModelConfig model;
  for (const auto& k : model_key_table()) {
    EXPECT_EQ(k.default_value, render_model_key(model, k.name)) << "models." << k.name;
    EXPECT_FALSE(k.doc.empty()) << k.name;
  }
  EXPECT_EQ(model_key_table().size(), 19u);
  EXPECT_EQ(event_key_table().size(), 4u);
}

// The rows of the markdown table that follows heading `heading` in `doc`:
// first cell (without backticks) -> the other cells (backticks stripped).
std::map<std::string, std::vector<std::string>> markdown_table(const std::string& doc,
                                                               const std::string& heading) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream in(doc);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) {
      inside = line == heading;
      continue;
    }
    if (!inside || !line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        auto b = cell.find_first_not_of(' ');
        auto e = cell.find_last_not_of(' ');
        cell = b == std::string::npos ? "" : cell.substr(b, e - b + 1);
        if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`')
          cell = cell.substr(1, cell.size() - 2);
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    if (cells.empty()) continue;
    auto key = cells.front();
    cells.erase(cells.begin());
    rows[key] = cells;
  }
  return rows;
}

TEST(KeyTable, DocsMatchKeyTable) {
  std::ifstream in(std::string(KORCH_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = ss.str();

  // On failure, print the rows the docs should hold.
  std::string expected;
  for (const auto& k : key_table())
    expected += "| `" + std::string(k.name) + "` | `" + std::string(k.env) + "` | `" +
                std::string(k.default_value) + "` | " + std::string(k.doc) + " |\n";

  auto rows = markdown_table(doc, "## Keys");
  EXPECT_EQ(rows.size(), key_table().size()) << expected;
  for (const auto& k : key_table()) {
    auto it = rows.find(std::string(k.name));
    ASSERT_NE(it, rows.end()) << "docs/config.md lacks key " << k.name << "\n" << expected;
    ASSERT_GE(it->second.size(), 2u) << k.name;
    EXPECT_EQ(it->second[0], k.env) << k.name;
    EXPECT_EQ(it->second[1], k.default_value) << k.name;
  }

  auto models = markdown_table(doc, "## Models");
  EXPECT_EQ(models.size(), model_key_table().size());
  for (const auto& k : model_key_table()) {
    auto it = models.find(std::string(k.name));
    ASSERT_NE(it, models.end()) << "docs/config.md lacks model key " << k.name;
    ASSERT_GE(it->second.size(), 1u);
    EXPECT_EQ(it->second[0], k.default_value) << "models." << k.name;
  }

  auto events = markdown_table(doc, "## Events");
  EXPECT_EQ(events.size(), event_key_table().size());
  for (const auto& k : event_key_table())
    EXPECT_TRUE(events.contains(std::string(k.name)))
        << "docs/config.md lacks event key " << k.name;
}

// ---------------------------------------------------------------------------
// Loading

TEST(Loader, DefaultsApplyWhenUnset) {
  TempDir dir;
  auto path = dir.write("c.toml", k_minimal);
  auto loaded = load_campaign(path, k_no_env, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto& c = loaded->config;
  CampaignConfig d;
  EXPECT_EQ(c.name, "t");
  EXPECT_EQ(c.max_turns, d.max_turns);
  EXPECT_EQ(c.samples_per_task, d.samples_per_task);
  EXPECT_EQ(c.tasks.levels, d.tasks.levels);
  EXPECT_EQ(c.evaluator.mode, d.evaluator.mode);
  EXPECT_EQ(c.resume, ResumeMode::exact);
  EXPECT_EQ(c.db_path, "korch.db");  // the default is not file-relative
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].max_tokens, ModelConfig{}.max_tokens);
  EXPECT_EQ(origin_of(*loaded, "max_turns"), "default");
  EXPECT_EQ(value_of(*loaded, "max_turns"), "5");
  EXPECT_EQ(origin_of(*loaded, "name"), "file:" + path + ":1");
  EXPECT_EQ(origin_of(*loaded, "tasks.kernelbench_dir"), "file:" + path + ":3");
  EXPECT_EQ(origin_of(*loaded, "models.m1.base_url"), "file:" + path + ":6");
  EXPECT_EQ(origin_of(*loaded, "models.m1.temperature"), "default");
  // Every key-table key has a value.
  for (const auto& k : key_table()) EXPECT_NE(find_value(*loaded, k.name), nullptr) << k.name;
}

TEST(Loader, PrecedenceFileEnvFlag) {
  TempDir dir;
  auto path = dir.write("c.toml",
                        "max_turns = 3\n"             // line 1
                        "samples_per_task = 2\n" +    // line 2
                            std::string(k_minimal) +  // lines 3-9
                            "[evaluator]\n"           // line 10
                            "mode = \"cpu\"\n");      // line 11
  std::map<std::string, std::string> env = {{"KORCH_MAX_TURNS", "4"},
                                            {"KORCH_SAMPLES_PER_TASK", "7"}};
  std::vector<std::string> flags = {"max_turns=6"};

  auto file_only = load_campaign(path, k_no_env, k_no_flags);
  ASSERT_TRUE(file_only) << file_only.error().message;
  EXPECT_EQ(file_only->config.max_turns, 3);
  EXPECT_EQ(origin_of(*file_only, "max_turns"), "file:" + path + ":1");
  EXPECT_EQ(origin_of(*file_only, "evaluator.mode"), "file:" + path + ":11");

  auto with_env = load_campaign(path, env, k_no_flags);
  ASSERT_TRUE(with_env) << with_env.error().message;
  EXPECT_EQ(with_env->config.max_turns, 4);
  EXPECT_EQ(origin_of(*with_env, "max_turns"), "env:KORCH_MAX_TURNS");

  auto all = load_campaign(path, env, flags);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->config.max_turns, 6);
  EXPECT_EQ(origin_of(*all, "max_turns"), "flag");
  EXPECT_EQ(all->config.samples_per_task, 7);
  EXPECT_EQ(origin_of(*all, "samples_per_task"), "env:KORCH_SAMPLES_PER_TASK");
  EXPECT_EQ(all->config.evaluator.mode, EvalMode::cpu);
  EXPECT_EQ(origin_of(*all, "evaluator.mode"), "file:" + path + ":11");
  EXPECT_EQ(origin_of(*all, "resume"), "default");
}

TEST(Loader, EnvAndFlagTypes) {
  TempDir dir;
  auto path = dir.write("c.toml", k_minimal);
  std::map<std::string, std::string> env = {{"KORCH_TASKS_LEVELS", "1,2"},
                                            {"KORCH_EPISODE_WALL_CLOCK_S", "12.5"},
                                            {"KORCH_EVALUATOR_MODE", "gpu"}};
  std::vector<std::string> flags = {"tasks.levels=[3, 4]", "spend_cap_usd = 10",
                                    "context=hello = world"};
  auto loaded = load_campaign(path, env, flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.tasks.levels, (std::vector<int>{3, 4}));
  EXPECT_DOUBLE_EQ(loaded->config.episode_wall_clock_s, 12.5);
  EXPECT_DOUBLE_EQ(loaded->config.spend_cap_usd, 10);
  EXPECT_EQ(loaded->config.context, "hello = world");
  EXPECT_EQ(loaded->config.evaluator.mode, EvalMode::gpu);
  EXPECT_EQ(value_of(*loaded, "tasks.levels"), "[3, 4]");
  EXPECT_EQ(value_of(*loaded, "episode_wall_clock_s"), "12.5");
}

TEST(Loader, ModelOverridesByEnvAndFlag) {
  TempDir dir;
  auto path = dir.write("c.toml", k_minimal);
  std::map<std::string, std::string> env = {
      {"KORCH_MODELS_M1_BASE_URL", "http://127.0.0.1:9000/v1"},
      {"KORCH_MODELS_M1_CONCURRENCY", "3"}};
  auto loaded = load_campaign(path, env, {"models.m1.concurrency=5", "models.m1.stream=true"});
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto& m = loaded->config.models[0];
  EXPECT_EQ(m.base_url, "http://127.0.0.1:9000/v1");
  EXPECT_EQ(m.concurrency, 5);
  EXPECT_TRUE(m.stream);
  EXPECT_EQ(origin_of(*loaded, "models.m1.base_url"), "env:KORCH_MODELS_M1_BASE_URL");
  EXPECT_EQ(origin_of(*loaded, "models.m1.concurrency"), "flag");
  EXPECT_EQ(model_env_name("gpt-4o.mini", "base_url"), "KORCH_MODELS_GPT_4O_MINI_BASE_URL");

  auto bad = load_campaign(path, k_no_env, {"models.nope.base_url=http://x"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no model with id 'nope'"), std::string::npos)
      << bad.error().message;
}

TEST(Loader, RelativePathsResolveAgainstTheFile) {
  TempDir dir;
  auto path = dir.write("sub/c.toml",
                        "name = \"t\"\n"
                        "db_path = \"data/k.db\"\n"
                        "[tasks]\n"
                        "kernelbench_dir = \"../kb\"\n"
                        "[evaluator]\n"
                        "cache_dir = \"/abs/cache\"\n"
                        "[[models]]\n"
                        "id = \"m\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"x\"\n");
  auto loaded = load_campaign(path, k_no_env, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  auto base = fs::absolute(dir.path()).lexically_normal();
  EXPECT_EQ(loaded->config.db_path, (base / "sub/data/k.db").string());
  EXPECT_EQ(loaded->config.tasks.kernelbench_dir, (base / "kb").string());
  EXPECT_EQ(loaded->config.evaluator.cache_dir, "/abs/cache");

  // Env and flag paths stay as given (relative to the working directory).
  auto env = load_campaign(path, {{"KORCH_DB_PATH", "here.db"}}, k_no_flags);
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_EQ(env->config.db_path, "here.db");
}

TEST(Loader, EventsAndModels) {
  TempDir dir;
  auto path =
      dir.write("c.toml", std::string(k_minimal) +
                              "[[models]]\n"
                              "id = \"m2\"\nbase_url = \"http://h/v1\"\nmodel = \"two\"\n"
                              "api_key_env = \"M2_KEY\"\nprice_prompt_per_mtok = 1.5\n"
                              "context_window = 32768\n"
                              "[[events]]\nkind = \"model_swap\"\nturn = 2\nmodel = \"m2\"\n"
                              "[[events]]\nkind = \"crash\"\nturn = 4\nsamples = [0]\n");
  auto loaded = load_campaign(path, {{"M2_KEY", "sk-very-secret"}}, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto& c = loaded->config;
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.models[1].api_key_env, "M2_KEY");
  EXPECT_DOUBLE_EQ(c.models[1].price_prompt_per_mtok, 1.5);
  EXPECT_EQ(c.models[1].context_window, 32768);
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].kind, LifecycleKind::model_swap);
  EXPECT_EQ(c.events[0].model, "m2");
  EXPECT_EQ(c.events[1].kind, LifecycleKind::crash);
  EXPECT_EQ(c.events[1].samples, (std::vector<int>{0}));

  auto shown = describe(*loaded);
  EXPECT_NE(shown.find("models.m2.api_key_env = \"M2_KEY\""), std::string::npos) << shown;
  EXPECT_NE(shown.find("events[0] = { kind = \"model_swap\", turn = 2, model = \"m2\" }"),
            std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("sk-very-secret"), std::string::npos);
}

TEST(Loader, DescribeShowsEveryKeyWithItsOrigin) {
  TempDir dir;
  auto path = dir.write("c.toml", "max_turns = 3\n" + std::string(k_minimal));
  auto loaded = load_campaign(path, {{"KORCH_RESUME", "compact"}}, {"evaluator.workers=4"});
  ASSERT_TRUE(loaded) << loaded.error().message;
  auto shown = describe(*loaded);
  for (const auto& k : key_table())
    EXPECT_NE(shown.find(std::string(k.name) + " = "), std::string::npos) << k.name;
  auto line_of = [&](const std::string& prefix) {
    auto p = shown.find("\n" + prefix);
    return p == std::string::npos ? std::string()
                                  : shown.substr(p + 1, shown.find('\n', p + 1) - p - 1);
  };
  auto mt = line_of("max_turns = 3 ");
  EXPECT_NE(mt.find("   # file:" + path + ":1"), std::string::npos) << shown;
  EXPECT_NE(line_of("resume = \"compact\" ").find("# env:KORCH_RESUME"), std::string::npos)
      << shown;
  EXPECT_NE(line_of("evaluator.workers = 4 ").find("# flag"), std::string::npos) << shown;
  EXPECT_NE(line_of("log_level = \"info\" ").find("# default"), std::string::npos) << shown;
}

TEST(Loader, WarnsAboutMisspeltEnvVariables) {
  TempDir dir;
  auto path = dir.write("c.toml", k_minimal);
  auto loaded =
      load_campaign(path, {{"KORCH_MAX_TURN", "3"}, {"KORCH_UNRELATED_THING", "1"}}, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->warnings.size(), 1u);
  EXPECT_NE(loaded->warnings[0].find("KORCH_MAX_TURNS"), std::string::npos);
}

// An event after the last turn never fires: a warning, not an error, so that
// lowering max_turns from the environment keeps a campaign loadable.
TEST(Loader, WarnsAboutEventsThatNeverFire) {
  TempDir dir;
  auto path = dir.write("c.toml", k_min_text() + "[[events]]\nkind = \"crash\"\nturn = 4\n");
  auto loaded = load_campaign(path, {{"KORCH_MAX_TURNS", "3"}}, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->warnings.size(), 1u);
  EXPECT_EQ(loaded->warnings[0], path + ":10: 'events[0]' at turn 4 never fires: max_turns is 3");
  EXPECT_NE(describe(*loaded).find("# warning: " + path + ":10:"), std::string::npos);
}

TEST(Loader, ProcessEnvironmentKeepsOnlyKorchVariables) {
  ::setenv("KORCH_TEST_LOADER_VAR", "x=y", 1);
  auto env = process_environment();
  EXPECT_EQ(env["KORCH_TEST_LOADER_VAR"], "x=y");
  for (const auto& [k, v] : env) EXPECT_TRUE(k.starts_with("KORCH_")) << k;
  ::unsetenv("KORCH_TEST_LOADER_VAR");
}

TEST(Loader, ValidateInCode) {
  CampaignConfig c;
  c.name = "x";
  c.tasks.kernelbench_dir = "/kb";
  c.models.push_back({.id = "a", .base_url = "http://h/v1", .model = "m"});
  EXPECT_TRUE(validate(c));
  c.max_turns = 0;
  auto r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "'max_turns' must be >= 1 (got 0)");
}

TEST(Loader, DemoExampleLoadsWithItsTasks) {
  auto path = std::string(KORCH_SOURCE_DIR) + "/examples/demo.toml";
  auto loaded = load_campaign(path, k_no_env, {"models.replay.base_url=http://127.0.0.1:1234/v1"});
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto& c = loaded->config;
  EXPECT_EQ(c.name, "demo");
  EXPECT_EQ(c.samples_per_task, 2);
  EXPECT_EQ(c.max_turns, 3);
  EXPECT_EQ(c.evaluator.mode, EvalMode::mock);
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].id, "replay");
  EXPECT_EQ(c.models[0].base_url, "http://127.0.0.1:1234/v1");
  EXPECT_EQ(c.models[0].api_key_env, "OPENAI_API_KEY");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].kind, LifecycleKind::compaction);
  EXPECT_EQ(c.events[0].turn, 3);
  EXPECT_EQ(c.events[0].samples, (std::vector<int>{1}));
  auto tasks = load_tasks(c.tasks);
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 4u);
  EXPECT_EQ((*tasks)[0].id, "1_ReLU_small");
}

// ---------------------------------------------------------------------------
// Errors, table-driven. `file` is appended to nothing: it is the whole file.
// `expect` is matched as a substring; "@" stands for the config file path.

struct ErrorCase {
  const char* name;
  std::string file;
  std::map<std::string, std::string> env;
  std::vector<std::string> flags;
  std::string expect;
};

class LoaderErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LoaderErrors, MessageNamesTheOrigin) {
  const auto& tc = GetParam();
  TempDir dir;
  auto path = dir.write("c.toml", tc.file);
  auto loaded = load_campaign(path, tc.env, tc.flags);
  ASSERT_FALSE(loaded) << tc.name;
  auto expect = tc.expect;
  if (auto at = expect.find('@'); at != std::string::npos) expect.replace(at, 1, path);
  EXPECT_NE(loaded.error().message.find(expect), std::string::npos)
      << "got:    " << loaded.error().message << "\nwanted: " << expect;
  EXPECT_EQ(loaded.error().message.find('\n'), std::string::npos) << "one line";
}

const std::string k_min = k_minimal;  // 7 lines; additions start on line 8
// name, [tasks], kernelbench_dir, [[models]]: add the model's keys (line 5 on).
const std::string k_models_only = "name = \"t\"\n[tasks]\nkernelbench_dir = \"/kb\"\n[[models]]\n";

void PrintTo(const ErrorCase& tc, std::ostream* os) { *os << tc.name; }

INSTANTIATE_TEST_SUITE_P(
    Cases, LoaderErrors,
    ::testing::Values(
        ErrorCase{"malformed", k_min + "max_turns = = 3\n", {}, {}, "@:8:13: "},
        ErrorCase{"unterminated", "name = \"t\n", {}, {}, "@:1:"},
        ErrorCase{"unknown_key",
                  "max_turn = 3\n" + k_min,
                  {},
                  {},
                  "@:1: unknown key 'max_turn' (did you mean 'max_turns'?)"},
        ErrorCase{
            "unknown_key_far", "frobnicate = 3\n" + k_min, {}, {}, "@:1: unknown key 'frobnicate'"},
        ErrorCase{"unknown_in_section",
                  k_min + "[evaluator]\nmodee = \"gpu\"\n",
                  {},
                  {},
                  "@:9: unknown key 'evaluator.modee' (did you mean 'evaluator.mode'?)"},
        ErrorCase{"nested_key_at_root",
                  "mode = \"gpu\"\n" + k_min,
                  {},
                  {},
                  "@:1: unknown key 'mode' (did you mean 'evaluator.mode'?)"},
        ErrorCase{"unknown_section",
                  k_min + "[evaluater]\nmode = \"gpu\"\n",
                  {},
                  {},
                  "(did you mean 'evaluator'?)"},
        ErrorCase{
            "unknown_model_key",
            k_min + "temprature = 0.5\n",
            {},
            {},
            "@:8: unknown key 'models[0].temprature' (did you mean 'models[0].temperature'?)"},
        ErrorCase{"wrong_type",
                  k_min.substr(0, 11) + "max_turns = \"five\"\n" + k_min.substr(11),
                  {},
                  {},
                  "@:2: 'max_turns' must be an integer"},
        ErrorCase{"wrong_type_float_for_int",
                  "max_turns = 2.5\n" + k_min,
                  {},
                  {},
                  "@:1: 'max_turns' must be an integer"},
        ErrorCase{"wrong_type_model",
                  k_min + "temperature = \"hot\"\n",
                  {},
                  {},
                  "@:8: 'models[0].temperature' must be a number"},
        ErrorCase{"wrong_type_levels",
                  k_min.substr(0, 43) + "levels = [1, \"2\"]\n" + k_min.substr(43),
                  {},
                  {},
                  "@:4: 'tasks.levels' must be a list of integers"},
        ErrorCase{
            "tasks_not_table", "tasks = 3\nname = \"t\"\n", {}, {}, "@:1: 'tasks' must be a table"},
        ErrorCase{"max_turns_zero",
                  "max_turns = 0\n" + k_min,
                  {},
                  {},
                  "@:1: 'max_turns' must be >= 1 (got 0)"},
        ErrorCase{"bad_mode",
                  k_min + "[evaluator]\nmode = \"tpu\"\n",
                  {},
                  {},
                  "@:9: 'evaluator.mode' must be \"mock\", \"cpu\" or \"gpu\" (got \"tpu\")"},
        ErrorCase{"bad_resume",
                  "resume = \"fuzzy\"\n" + k_min,
                  {},
                  {},
                  "@:1: 'resume' must be \"exact\" or \"compact\" (got \"fuzzy\")"},
        ErrorCase{"duplicate_model",
                  k_min + "[[models]]\nid = \"m1\"\nbase_url = \"http://x/v1\"\nmodel = \"y\"\n",
                  {},
                  {},
                  "@:9: duplicate model id 'm1'"},
        ErrorCase{"swap_unknown_model",
                  k_min + "[[events]]\nkind = \"model_swap\"\nturn = 2\nmodel = \"m2\"\n",
                  {},
                  {},
                  "@:11: 'events[0].model' names an unknown model 'm2' (did you mean 'm1'?)"},
        ErrorCase{"swap_without_model",
                  k_min + "[[events]]\nkind = \"model_swap\"\nturn = 2\n",
                  {},
                  {},
                  "@:8: 'events[0]' is a model_swap event: 'model' is required"},
        ErrorCase{"bad_event_kind",
                  k_min + "[[events]]\nkind = \"explode\"\nturn = 2\n",
                  {},
                  {},
                  "@:9: 'events[0].kind' must be \"compaction\", \"crash\" or \"model_swap\""},
        ErrorCase{"event_turn_zero",
                  k_min + "[[events]]\nkind = \"crash\"\nturn = 0\n",
                  {},
                  {},
                  "@:10: 'events[0].turn' must be >= 1 (got 0)"},
        ErrorCase{"event_sample_out_of_range",
                  k_min + "[[events]]\nkind = \"crash\"\nturn = 2\nsamples = [1]\n",
                  {},
                  {},
                  "@:11: 'events[0].samples' holds 1"},
        ErrorCase{"no_models",
                  "name = \"t\"\n[tasks]\nkernelbench_dir = \"/kb\"\n",
                  {},
                  {},
                  "@: no models: add a [[models]] table"},
        ErrorCase{"empty_models",
                  "name = \"t\"\nmodels = []\n[tasks]\nkernelbench_dir = \"/kb\"\n",
                  {},
                  {},
                  "@: no models"},
        ErrorCase{"models_not_tables",
                  "name = \"t\"\nmodels = [1]\n",
                  {},
                  {},
                  "@:2: 'models' must be an array of tables ([[models]])"},
        ErrorCase{"model_missing_url",
                  "name = \"t\"\ntasks.kernelbench_dir = \"/kb\"\n[[models]]\nid = \"a\"\nmodel = "
                  "\"b\"\n",
                  {},
                  {},
                  "@:3: 'models[0].base_url' is required"},
        ErrorCase{
            "model_bad_url",
            k_models_only + "id = \"a\"\nmodel = \"b\"\nbase_url = \"ftp://x\"\n",
            {},
            {},
            "@:7: 'models[0].base_url' must start with http:// or https:// (got \"ftp://x\")"},
        ErrorCase{"api_key_pasted",
                  k_min + "api_key_env = \"sk-abc123\"\n",
                  {},
                  {},
                  "@:8: 'models[0].api_key_env' must be the NAME of an environment variable"},
        ErrorCase{
            "missing_kernelbench_dir",
            "name = \"t\"\n[[models]]\nid = \"a\"\nbase_url = \"http://h/v1\"\nmodel = \"b\"\n",
            {},
            {},
            "@: 'tasks.kernelbench_dir' is required"},
        ErrorCase{"missing_name", k_min.substr(11), {}, {}, "@: 'name' is required"},
        ErrorCase{"bad_ids",
                  k_models_only.substr(0, 43) + "ids = \"1-x\"\n" + k_models_only.substr(43) +
                      "id = \"a\"\nmodel = \"b\"\nbase_url = \"http://h\"\n",
                  {},
                  {},
                  "@:4: 'tasks.ids': bad id list '1-x'"},
        ErrorCase{"env_wrong_type",
                  k_min,
                  {{"KORCH_MAX_TURNS", "many"}},
                  {},
                  "KORCH_MAX_TURNS: 'max_turns' must be an integer (got \"many\")"},
        ErrorCase{"env_bad_value",
                  k_min,
                  {{"KORCH_EVALUATOR_MODE", "tpu"}},
                  {},
                  "KORCH_EVALUATOR_MODE: 'evaluator.mode' must be"},
        ErrorCase{"env_out_of_range",
                  k_min,
                  {{"KORCH_MAX_TURNS", "99999999999"}},
                  {},
                  "KORCH_MAX_TURNS: 'max_turns' is out of range"},
        ErrorCase{"flag_bad_value",
                  k_min,
                  {},
                  {"max_turns=0"},
                  "--set max_turns=0: 'max_turns' must be >= 1"},
        ErrorCase{"flag_unknown",
                  k_min,
                  {},
                  {"max_turnz=3"},
                  "--set max_turnz=3: unknown key 'max_turnz' (did you mean 'max_turns'?)"},
        ErrorCase{
            "flag_no_equals", k_min, {}, {"max_turns"}, "--set max_turns: expected key=value"},
        ErrorCase{
            "flag_models_table", k_min, {}, {"models=x"}, "'models' can only be set in the file"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Loader, StrategyTable) {
  TempDir dir;
  auto path = dir.write("c.toml", std::string(k_minimal) +
                                      "[strategy]\nkind = \"best_of_k\"\nk = 6\n"
                                      "target_speedup = 1.5\nparallel = 2\n");
  auto loaded = load_campaign(path, k_no_env, k_no_flags);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.strategy.kind, StrategyKind::best_of_k);
  EXPECT_EQ(loaded->config.strategy.k, 6);
  EXPECT_DOUBLE_EQ(loaded->config.strategy.target_speedup, 1.5);
  EXPECT_EQ(loaded->config.strategy.parallel, 2);
  EXPECT_EQ(max_samples_per_task_model(loaded->config), 6);
  // Without the table nothing changes: grid.
  auto plain = load_campaign(dir.write("p.toml", k_minimal), k_no_env, k_no_flags);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->config.strategy, StrategyConfig{});
  EXPECT_EQ(plain->config.strategy.kind, StrategyKind::grid);

  // A budget needs a cap; an unknown kind or bandit is refused with the choices.
  auto no_cap =
      load_campaign(dir.write("b.toml", std::string(k_minimal) + "[strategy]\nkind = \"budget\"\n"),
                    k_no_env, k_no_flags);
  ASSERT_FALSE(no_cap);
  EXPECT_NE(no_cap.error().message.find("strategy.budget_usd"), std::string::npos)
      << no_cap.error().message;
  auto bad = load_campaign(path, k_no_env, {"strategy.kind=beam"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"refine\""), std::string::npos) << bad.error().message;
  auto bad_bandit = load_campaign(path, k_no_env, {"strategy.bandit=greedy"});
  ASSERT_FALSE(bad_bandit);
  // [[events]] samples index the strategy's samples (refine: rounds x samples_per_task).
  auto events = dir.write("e.toml", std::string(k_minimal) +
                                        "[strategy]\nkind = \"refine\"\nrounds = 3\n"
                                        "[[events]]\nkind = \"crash\"\nturn = 1\nsamples = [2]\n");
  EXPECT_TRUE(load_campaign(events, k_no_env, k_no_flags));
  auto beyond = load_campaign(events, k_no_env, {"strategy.rounds=2"});
  ASSERT_FALSE(beyond);
  EXPECT_NE(beyond.error().message.find("sample indices run from 0 to 1"), std::string::npos)
      << beyond.error().message;
}

TEST(Loader, MissingFile) {
  auto loaded = load_campaign("/nonexistent/korch.toml", k_no_env, k_no_flags);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("/nonexistent/korch.toml"), std::string::npos);
}

// A value that is invalid in the file but overridden by a valid flag is fine:
// only the winning value is validated.
TEST(Loader, OnlyTheWinningValueIsValidated) {
  TempDir dir;
  auto path = dir.write("c.toml", "resume = \"fuzzy\"\n" + k_min);
  auto loaded = load_campaign(path, k_no_env, {"resume=compact"});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.resume, ResumeMode::compact);
}

}  // namespace
}  // namespace korch::config

// ---------------------------------------------------------------------------
// The stored record: config_to_json() / config_from_json() round-trip every
// key of the key tables.

namespace korch::config {
namespace {

// A value other than the default for every campaign key. Fails (below) when a
// key is added to the table without one here, so a new key cannot go
// unrecorded.
const std::map<std::string, std::string> k_non_default = {
    {"name", "round-trip"},
    {"db_path", "/x/k.db"},
    {"store.url", "postgres://korch@db.example:5432/k"},
    {"context", "a \"quoted\" context\nwith two lines"},
    {"tasks.kernelbench_dir", "/kb2"},
    {"tasks.levels", "1,3"},
    {"tasks.ids", "1-4,9"},
    {"tasks.exclude_flagged", "/flags/validate.json"},
    {"samples_per_task", "3"},
    {"max_turns", "7"},
    {"episode_wall_clock_s", "123.5"},
    {"episode_token_budget", "99999"},
    {"spend_cap_usd", "12.25"},
    {"max_inflight_episodes", "17"},
    {"resume", "compact"},
    {"synchronous", "NORMAL"},
    {"log_level", "debug"},
    {"evaluator.mode", "gpu"},
    {"evaluator.tolerance", "tf32"},
    {"evaluator.reward", "beat_baseline"},
    {"evaluator.torch_ops", "forbid"},
    {"evaluator.workers", "5"},
    {"evaluator.gpus", "0,1"},
    {"evaluator.compile_jobs", "3"},
    {"evaluator.timeout_s", "45.5"},
    {"evaluator.memory_budget_mb", "2048"},
    {"evaluator.cache_dir", "/cache"},
    {"evaluator.mock_latency_s", "0.125"},
    {"evaluator.remote", "true"},
    {"strategy.kind", "budget"},
    {"strategy.k", "6"},
    {"strategy.target_speedup", "1.25"},
    {"strategy.parallel", "2"},
    {"strategy.rounds", "4"},
    {"strategy.budget_usd", "3.5"},
    {"strategy.budget_gpu_hours", "0.5"},
    {"strategy.bandit", "ucb"},
    {"strategy.batch", "8"},
    {"strategy.seed", "42"},
};

// The same for every model key but `id` (set in the file).
const std::map<std::string, std::string> k_model_non_default = {
    {"base_url", "http://10.0.0.1:9/v1"},
    {"model", "other-model"},
    {"api_key_env", "KORCH_TEST_ROUND_TRIP_KEY"},
    {"temperature", "0.7"},
    {"top_p", "0.9"},
    {"max_tokens", "1000"},
    {"concurrency", "8"},
    {"stream", "true"},
    {"max_attempts", "2"},
    {"retry_cap_s", "5"},
    {"connect_timeout_s", "3"},
    {"first_byte_timeout_s", "30"},
    {"total_timeout_s", "90"},
    {"stall_timeout_s", "20"},
    {"price_prompt_per_mtok", "1.5"},
    {"price_completion_per_mtok", "6"},
    {"price_cached_per_mtok", "0.75"},
    {"context_window", "128000"},
};

constexpr const char* k_secret = "sk-round-trip-secret-0123456789";

class ConfigRecord : public ::testing::Test {
 protected:
  // A config with every key away from its default: two models (the second
  // for a model_swap event) and two events.
  CampaignConfig non_default_config() {
    auto path = m_dir.write(
        "c.toml",
        "name = \"t\"\n[tasks]\nkernelbench_dir = \"/kb\"\n"
        "[[models]]\nid = \"m1\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"a\"\n"
        "[[models]]\nid = \"m2\"\nbase_url = \"http://127.0.0.1:8001/v1\"\nmodel = \"b\"\n"
        "[[events]]\nkind = \"model_swap\"\nturn = 2\nmodel = \"m2\"\nsamples = [0, 2]\n"
        "[[events]]\nkind = \"crash\"\nturn = 3\n");
    std::vector<std::string> flags;
    for (const auto& [k, v] : k_non_default) flags.push_back(k + "=" + v);
    for (const auto& [k, v] : k_model_non_default) flags.push_back("models.m1." + k + "=" + v);
    auto loaded = load_campaign(path, k_no_env, flags);
    if (!loaded) ADD_FAILURE() << loaded.error().message;
    return loaded ? loaded->config : CampaignConfig{};
  }

  TempDir m_dir;
};

TEST_F(ConfigRecord, TheTestSetsEveryKeyAwayFromItsDefault) {
  const auto cfg = non_default_config();
  for (const auto& k : key_table()) {
    ASSERT_TRUE(k_non_default.contains(std::string(k.name)))
        << "add a non-default value for the new key '" << k.name << "' to k_non_default";
    EXPECT_NE(render_key(cfg, k.name), k.default_value) << k.name;
  }
  for (const auto& k : model_key_table()) {
    if (k.name == "id") continue;
    ASSERT_TRUE(k_model_non_default.contains(std::string(k.name)))
        << "add a non-default value for the new model key '" << k.name
        << "' to k_model_non_default";
    EXPECT_NE(render_model_key(cfg.models.at(0), k.name), k.default_value) << k.name;
  }
}

// The tasks a campaign left out (tasks.exclude_flagged) ride with its stored
// config: read back as written, invisible to config_from_json.
TEST_F(ConfigRecord, ExcludedTasksRideWithTheStoredConfig) {
  const auto cfg = non_default_config();
  const auto plain = config_to_json(cfg);
  EXPECT_EQ(with_excluded_tasks(plain, {}), plain);
  EXPECT_TRUE(excluded_tasks(plain).empty());
  const std::vector<ExcludedTask> left_out = {
      {"L2/23_Conv3d_GroupNorm_Mean", {"rounding_noise: rms 1.7e-08 where float64 is 0"}},
      {"L1/5_Const", {"nearly_constant: x", "input_independent: y"}}};
  const auto stored = with_excluded_tasks(plain, left_out);
  EXPECT_EQ(excluded_tasks(stored), left_out);
  auto back = config_from_json(stored);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(config_to_json(*back), plain);
  EXPECT_TRUE(excluded_tasks("not json").empty());
}

TEST_F(ConfigRecord, EveryKeyRoundTrips) {
  const auto cfg = non_default_config();
  const auto json = config_to_json(cfg);
  auto back = config_from_json(json);
  ASSERT_TRUE(back) << back.error().message;
  for (const auto& k : key_table())
    EXPECT_EQ(render_key(*back, k.name), render_key(cfg, k.name)) << k.name;
  ASSERT_EQ(back->models.size(), cfg.models.size());
  for (std::size_t i = 0; i < cfg.models.size(); ++i) {
    for (const auto& k : model_key_table()) {
      EXPECT_EQ(render_model_key(back->models[i], k.name), render_model_key(cfg.models[i], k.name))
          << "models[" << i << "]." << k.name;
    }
  }
  ASSERT_EQ(back->events.size(), 2u);
  EXPECT_EQ(back->events[0].kind, LifecycleKind::model_swap);
  EXPECT_EQ(back->events[0].model, "m2");
  EXPECT_EQ(back->events[0].samples, (std::vector<int>{0, 2}));
  EXPECT_EQ(back->events[1].kind, LifecycleKind::crash);
  EXPECT_EQ(back->events[1].turn, 3);
  EXPECT_TRUE(*back == cfg) << json;
  // Written from the key tables: serialising the parsed copy gives the same text.
  EXPECT_EQ(config_to_json(*back), json);
}

TEST_F(ConfigRecord, NamesAreWrittenAsTheFileSpellsThem) {
  const auto json = config_to_json(non_default_config());
  for (const char* word :
       {"\"mode\":\"gpu\"", "\"tolerance\":\"tf32\"", "\"reward\":\"beat_baseline\"",
        "\"torch_ops\":\"forbid\"", "\"resume\":\"compact\"", "\"synchronous\":\"NORMAL\"",
        "\"kind\":\"model_swap\"", "\"spend_cap_usd\":12.25",
        "\"price_completion_per_mtok\":6.0"}) {
    EXPECT_NE(json.find(word), std::string::npos) << word << " in " << json;
  }
}

TEST_F(ConfigRecord, HoldsTheKeysVariableNameNeverTheKey) {
  ::setenv("KORCH_TEST_ROUND_TRIP_KEY", k_secret, 1);
  auto env = process_environment();  // what korch run passes: the key is in it
  ASSERT_TRUE(env.contains("KORCH_TEST_ROUND_TRIP_KEY"));
  auto path = m_dir.write("c.toml", k_min_text());
  auto loaded = load_campaign(path, env, {"models.m1.api_key_env=KORCH_TEST_ROUND_TRIP_KEY"});
  ::unsetenv("KORCH_TEST_ROUND_TRIP_KEY");
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto json = config_to_json(loaded->config);
  EXPECT_EQ(json.find(k_secret), std::string::npos) << json;
  EXPECT_NE(json.find("\"api_key_env\":\"KORCH_TEST_ROUND_TRIP_KEY\""), std::string::npos) << json;
}

// store.url names the store (it wins over db_path); a password in it never
// reaches the stored record (campaigns.config_json, exports) nor config show.
TEST_F(ConfigRecord, StoreUrlWinsAndItsPasswordIsRedacted) {
  auto path = m_dir.write("c.toml",
                          k_min_text() + "[store]\nurl = \"postgres://korch:hunter2@db:5432/k\"\n");
  auto loaded = load_campaign(path, k_no_env, {});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.db_path, "postgres://korch:hunter2@db:5432/k");  // what libpq gets
  const auto json = config_to_json(loaded->config);
  EXPECT_EQ(json.find("hunter2"), std::string::npos) << json;
  EXPECT_NE(json.find("postgres://korch:****@db:5432/k"), std::string::npos) << json;
  const auto shown = describe(*loaded);
  EXPECT_EQ(shown.find("hunter2"), std::string::npos) << shown;
  // A URL is not a file path: it is not made relative to the config's folder.
  auto flag = load_campaign(path, k_no_env, {"store.url=", "db_path=postgres://h/k"});
  ASSERT_TRUE(flag) << flag.error().message;
  EXPECT_EQ(flag->config.db_path, "postgres://h/k");
}

TEST(ConfigFromJson, RefusesWrongTypesAndUnknownNames) {
  EXPECT_FALSE(config_from_json("[1]"));
  EXPECT_FALSE(config_from_json("not json"));
  auto bad_type = config_from_json(R"({"max_turns":"five"})");
  ASSERT_FALSE(bad_type);
  EXPECT_EQ(bad_type.error().message, "'max_turns' must be an integer");
  auto bad_name = config_from_json(R"({"evaluator":{"mode":"tpu"}})");
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().message,
            "'evaluator.mode' must be \"mock\", \"cpu\" or \"gpu\" (got \"tpu\")");
  auto bad_kind = config_from_json(R"({"events":[{"kind":"explode","turn":1}]})");
  ASSERT_FALSE(bad_kind);
  EXPECT_EQ(
      bad_kind.error().message,
      "'events[0].kind' must be \"compaction\", \"crash\" or \"model_swap\" (got \"explode\")");
  // Absent keys keep their defaults.
  auto empty = config_from_json("{}");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(*empty == CampaignConfig{});
}

// evaluator.gpus is checked at load (its syntax; which GPUs exist is known
// only once the evaluator asks the host).
TEST(EvaluatorGpus, BadListsAreRefusedAtLoad) {
  TempDir dir;
  auto path =
      dir.write("c.toml",
                "name = \"t\"\n[tasks]\nkernelbench_dir = \"/kb\"\n"
                "[[models]]\nid = \"m1\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"a\"\n"
                "[evaluator]\ngpus = \"0;1\"\n");
  auto loaded = load_campaign(path, k_no_env, {});
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("evaluator.gpus"), std::string::npos)
      << loaded.error().message;
  EXPECT_TRUE(load_campaign(path, k_no_env, {"evaluator.gpus=0-3"}));
}

}  // namespace
}  // namespace korch::config
