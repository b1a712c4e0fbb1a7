// Validation: the rules a resolved
// config must meet (each key's bounds and choices, then the whole-config
// requirements: name, tasks, models, events), shared by load_campaign() and
// validate().
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "config/gpus.hpp"
#include "config/loader_internal.hpp"
#include "config/tasks.hpp"

namespace korch::config {
namespace detail {

const char* type_phrase(KeyType t) {
  switch (t) {
    case KeyType::string:
    case KeyType::path: return "a string";
    case KeyType::integer: return "an integer";
    case KeyType::number: return "a number";
    case KeyType::boolean: return "a boolean (true or false)";
    case KeyType::integer_list: return "a list of integers, e.g. [1, 2]";
  }
  return "a value";
}

namespace {

bool valid_model_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

bool valid_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

}  // namespace

Result<void> validate_with(const CampaignConfig& cfg, const Locator& where,
                           std::vector<std::string>* warnings, const UnknownNames& unknown_names) {
  for (const auto& spec : campaign_specs()) {
    std::string key(spec.info.name);
    if (auto it = unknown_names.find(key); it != unknown_names.end())
      return fail(where(key) + it->second);
    if (auto e = check_rules(spec, key, spec.get(cfg))) return fail(where(key) + *e);
  }
  if (cfg.name.empty())
    return fail(where("name") + "'name' is required (the campaign id is derived from it)");
  if (cfg.tasks.kernelbench_dir.empty())
    return fail(where("tasks.kernelbench_dir") +
                "'tasks.kernelbench_dir' is required: set it under [tasks] or with "
                "KORCH_TASKS_KERNELBENCH_DIR");
  if (cfg.tasks.levels.empty())
    return fail(where("tasks.levels") + "'tasks.levels' must not be empty");
  if (cfg.evaluator.reward == Reward::roofline && cfg.evaluator.mode == EvalMode::cpu)
    return fail(where("evaluator.reward") +
                "'evaluator.reward = \"roofline\"' needs the GPU's datasheet peaks: use it with "
                "evaluator.mode = \"gpu\" (or \"mock\"); the cpu mode cannot compute t_min");
  if (auto ids = parse_id_ranges(cfg.tasks.ids); !ids)
    return fail(where("tasks.ids") + "'tasks.ids': " + ids.error().message);
  if (auto g = parse_gpu_list(cfg.evaluator.gpus, std::nullopt); !g)
    return fail(where("evaluator.gpus") + "'evaluator.gpus': " + g.error().message);

  if (cfg.strategy.kind == StrategyKind::budget && cfg.strategy.budget_usd <= 0 &&
      cfg.strategy.budget_gpu_hours <= 0)
    return fail(where("strategy.kind") +
                "'strategy.kind = \"budget\"' needs a cap: set strategy.budget_usd or "
                "strategy.budget_gpu_hours");
  if (cfg.models.empty())
    return fail(where("models") + "no models: add a [[models]] table with id, base_url and model");
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < cfg.models.size(); ++i) {
    const auto& m = cfg.models[i];
    auto at = fmt::format("models[{}]", i);
    for (const auto& spec : model_specs()) {
      auto key = at + "." + std::string(spec.info.name);
      if (auto e = check_rules(spec, key, spec.get(m))) return fail(where(key) + *e);
    }
    for (std::string_view req : {"id", "base_url", "model"}) {
      if (std::get<std::string>(find_spec(model_specs(), req)->get(m)).empty())
        return fail(where(at) + fmt::format("'{}.{}' is required", at, req));
    }
    if (!valid_model_id(m.id))
      return fail(where(at + ".id") +
                  fmt::format("'{}.id' may only hold letters, digits, '.', '_' and '-' (got {})",
                              at, toml_quote(m.id)));
    if (!m.base_url.starts_with("http://") && !m.base_url.starts_with("https://"))
      return fail(where(at + ".base_url") +
                  fmt::format("'{}.base_url' must start with http:// or https:// (got {})", at,
                              toml_quote(m.base_url)));
    // Never echo this value: a user may have pasted the key itself here.
    if (!m.api_key_env.empty() && !valid_env_name(m.api_key_env))
      return fail(where(at + ".api_key_env") +
                  fmt::format("'{}.api_key_env' must be the NAME of an environment variable "
                              "(letters, digits, '_'), not the key itself",
                              at));
    if (auto [it, fresh] = seen.emplace(m.id, i); !fresh)
      return fail(where(at + ".id") +
                  fmt::format("duplicate model id '{}' (also models[{}])", m.id, it->second));
  }

  for (std::size_t i = 0; i < cfg.events.size(); ++i) {
    const auto& e = cfg.events[i];
    auto at = fmt::format("events[{}]", i);
    if (e.turn < 1)
      return fail(where(at + ".turn") + fmt::format("'{}.turn' must be >= 1 (got {})", at, e.turn));
    if (e.turn > cfg.max_turns && warnings)
      warnings->push_back(
          where(at + ".turn") +
          fmt::format("'{}' at turn {} never fires: max_turns is {}", at, e.turn, cfg.max_turns));
    if (e.kind == LifecycleKind::model_swap) {
      if (e.model.empty())
        return fail(where(at) + fmt::format("'{}' is a model_swap event: 'model' is required", at));
      if (!seen.contains(e.model))
        return fail(where(at + ".model") + fmt::format("'{}.model' names an unknown model '{}'{}",
                                                       at, e.model, suggestion(e.model, [&] {
                                                         std::vector<std::string> ids;
                                                         for (const auto& m : cfg.models)
                                                           ids.push_back(m.id);
                                                         return ids;
                                                       }())));
    } else if (!e.model.empty()) {
      return fail(where(at + ".model") +
                  fmt::format("'{}.model' only applies to model_swap events (this one is '{}')", at,
                              to_string(e.kind)));
    }
    const int samples = max_samples_per_task_model(cfg);
    for (int s : e.samples)
      if (s < 0 || s >= samples)
        return fail(where(at + ".samples") +
                    fmt::format("'{}.samples' holds {}, but sample indices run from 0 to {} "
                                "(samples_per_task = {}, strategy.kind = \"{}\")",
                                at, s, samples - 1, cfg.samples_per_task,
                                to_string(cfg.strategy.kind)));
  }
  return {};
}

}  // namespace detail

int max_samples_per_task_model(const CampaignConfig& cfg) {
  switch (cfg.strategy.kind) {
    case StrategyKind::best_of_k:
    case StrategyKind::budget: return cfg.strategy.k;
    case StrategyKind::refine: return cfg.strategy.rounds * cfg.samples_per_task;
    case StrategyKind::grid: break;
  }
  return cfg.samples_per_task;
}

Result<void> validate(const CampaignConfig& cfg) {
  return detail::validate_with(
      cfg, [](const std::string&) { return std::string(); }, nullptr);
}

}  // namespace korch::config
