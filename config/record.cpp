// The record of a resolved config: config_to_json() and config_from_json(),
// the JSON stored with a campaign, written from the key tables; describe()
// (`korch config show`) and find_value() over a loaded config's values.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

#include "config/loader_internal.hpp"
#include "util/log.hpp"

namespace korch::config {
namespace detail {
namespace {

// ---------------------------------------------------------------------------
// The JSON record of a resolved config (config_to_json / config_from_json).
// Written from the key tables, so a key added to a table is recorded with no
// further code; dotted names nest ("evaluator.mode" -> {"evaluator": {"mode"}}).

nlohmann::ordered_json value_json(const Value& v) {
  struct Visitor {
    nlohmann::ordered_json operator()(const std::string& s) const { return s; }
    nlohmann::ordered_json operator()(std::int64_t x) const { return x; }
    nlohmann::ordered_json operator()(double x) const { return x; }
    nlohmann::ordered_json operator()(bool x) const { return x; }
    nlohmann::ordered_json operator()(const std::vector<int>& xs) const { return xs; }
  };
  return std::visit(Visitor{}, v);
}

// The JSON value `j` as a value of type `t`; nullopt on a type mismatch.
std::optional<Value> json_value(KeyType t, const nlohmann::ordered_json& j) {
  switch (t) {
    case KeyType::string:
    case KeyType::path:
      if (j.is_string()) return Value{j.get<std::string>()};
      return std::nullopt;
    case KeyType::integer:
      if (j.is_number_integer()) return Value{j.get<std::int64_t>()};
      return std::nullopt;
    case KeyType::number:
      if (j.is_number()) return Value{j.get<double>()};
      return std::nullopt;
    case KeyType::boolean:
      if (j.is_boolean()) return Value{j.get<bool>()};
      return std::nullopt;
    case KeyType::integer_list: {
      if (!j.is_array()) return std::nullopt;
      std::vector<int> xs;
      for (const auto& el : j) {
        if (!el.is_number_integer()) return std::nullopt;
        xs.push_back(el.get<int>());
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// The node at dotted `name` under `root`; nullptr when absent.
const nlohmann::ordered_json* find_dotted(const nlohmann::ordered_json& root,
                                          std::string_view name) {
  const nlohmann::ordered_json* node = &root;
  while (true) {
    auto dot = name.find('.');
    auto part = std::string(name.substr(0, dot));
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    name.remove_prefix(dot + 1);
  }
}

nlohmann::ordered_json& make_dotted(nlohmann::ordered_json& root, std::string_view name) {
  nlohmann::ordered_json* node = &root;
  while (true) {
    auto dot = name.find('.');
    node = &(*node)[std::string(name.substr(0, dot))];
    if (dot == std::string_view::npos) return *node;
    name.remove_prefix(dot + 1);
  }
}

template <typename Struct>
nlohmann::ordered_json specs_to_json(const std::vector<Spec<Struct>>& specs, const Struct& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& spec : specs) {
    auto v = spec.get(s);
    // A store location may carry a password: the record keeps it redacted.
    if (auto* text = std::get_if<std::string>(&v)) *text = log::redact_url(*text);
    make_dotted(j, spec.info.name) = value_json(v);
  }
  return j;
}

// Sets every key of `specs` present in `j`; a missing key keeps its default.
template <typename Struct>
Result<void> specs_from_json(const std::vector<Spec<Struct>>& specs,
                             const nlohmann::ordered_json& j, std::string_view at, Struct& s) {
  for (const auto& spec : specs) {
    const auto* node = find_dotted(j, spec.info.name);
    if (!node) continue;
    auto label = fmt::format("{}{}", at, spec.info.name);
    auto v = json_value(spec.info.type, *node);
    if (!v) return fail(fmt::format("'{}' must be {}", label, type_phrase(spec.info.type)));
    if (auto e = spec.set(s, *v)) return fail(fmt::format("'{}' {}", label, *e));
  }
  return {};
}

nlohmann::ordered_json event_to_json(const LifecycleEvent& e) {
  return {
      {"kind", to_string(e.kind)}, {"turn", e.turn}, {"model", e.model}, {"samples", e.samples}};
}

Result<LifecycleEvent> event_from_json(const nlohmann::ordered_json& j, const std::string& at) {
  LifecycleEvent e;
  for (const auto& info : event_infos()) {
    auto it = j.find(std::string(info.name));
    if (it == j.end()) continue;
    auto key = fmt::format("{}.{}", at, info.name);
    auto v = json_value(info.type, *it);
    if (!v) return fail(fmt::format("'{}' must be {}", key, type_phrase(info.type)));
    if (info.name == "kind") {
      if (auto err = assign(e.kind, *v)) return fail(fmt::format("'{}' {}", key, *err));
    } else if (info.name == "turn") {
      if (auto err = assign(e.turn, *v)) return fail(fmt::format("'{}' {}", key, *err));
    } else if (info.name == "model") {
      e.model = std::get<std::string>(*v);
    } else {
      e.samples = std::get<std::vector<int>>(*v);
    }
  }
  return e;
}

}  // namespace
}  // namespace detail

using detail::campaign_specs;
using detail::event_from_json;
using detail::event_to_json;
using detail::model_specs;
using detail::specs_from_json;
using detail::specs_to_json;

std::string config_to_json(const CampaignConfig& cfg) {
  auto j = specs_to_json(campaign_specs(), cfg);
  auto& models = j["models"] = nlohmann::ordered_json::array();
  for (const auto& m : cfg.models) models.push_back(specs_to_json(model_specs(), m));
  auto& events = j["events"] = nlohmann::ordered_json::array();
  for (const auto& e : cfg.events) events.push_back(event_to_json(e));
  return j.dump();
}

Result<CampaignConfig> config_from_json(std::string_view json) {
  auto j = nlohmann::ordered_json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("config JSON: not a JSON object");
  CampaignConfig cfg;
  if (auto r = specs_from_json(campaign_specs(), j, "", cfg); !r) return std::unexpected(r.error());
  if (auto it = j.find("models"); it != j.end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      ModelConfig m;
      auto r = specs_from_json(model_specs(), (*it)[i], fmt::format("models[{}].", i), m);
      if (!r) return std::unexpected(r.error());
      cfg.models.push_back(std::move(m));
    }
  }
  if (auto it = j.find("events"); it != j.end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      auto e = event_from_json((*it)[i], fmt::format("events[{}]", i));
      if (!e) return std::unexpected(e.error());
      cfg.events.push_back(std::move(*e));
    }
  }
  return cfg;
}

std::string with_excluded_tasks(const std::string& config_json,
                                const std::vector<ExcludedTask>& excluded) {
  if (excluded.empty()) return config_json;
  auto j = nlohmann::ordered_json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return config_json;
  auto& list = j["excluded_tasks"] = nlohmann::ordered_json::array();
  for (const auto& e : excluded) list.push_back({{"task", e.task_id}, {"issues", e.issues}});
  return j.dump();
}

std::vector<ExcludedTask> excluded_tasks(std::string_view config_json) {
  std::vector<ExcludedTask> out;
  auto j = nlohmann::ordered_json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return out;
  auto it = j.find("excluded_tasks");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& e : *it) {
    if (!e.is_object() || !e.contains("task") || !e["task"].is_string()) continue;
    ExcludedTask t{e["task"].get<std::string>(), {}};
    if (e.contains("issues") && e["issues"].is_array())
      for (const auto& i : e["issues"])
        if (i.is_string()) t.issues.push_back(i.get<std::string>());
    out.push_back(std::move(t));
  }
  return out;
}

std::string describe(const LoadedConfig& loaded) {
  constexpr std::size_t k_max_align = 64;
  std::size_t width = 0;
  for (const auto& v : loaded.values) width = std::max(width, v.key.size() + 3 + v.value.size());
  width = std::min(width, k_max_align);
  std::string out = fmt::format("# {}\n", loaded.path);
  for (const auto& v : loaded.values) {
    auto lhs = v.key + " = " + v.value;
    out += fmt::format("{:<{}}   # {}\n", lhs, width, v.origin);
  }
  for (const auto& w : loaded.warnings) out += "# warning: " + w + "\n";
  return out;
}

const ConfigValue* find_value(const LoadedConfig& loaded, std::string_view key) {
  for (const auto& v : loaded.values)
    if (v.key == key) return &v;
  return nullptr;
}

}  // namespace korch::config
