// The layers of a config, applied in order by the Loader: defaults < TOML
// file < environment (KORCH_*) < flags (--set key=value), each value keeping
// where it came from; then load_campaign(), load_settings() and
// process_environment().
#include <fmt/format.h>
#include <toml++/toml.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>

#include "config/loader_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace korch::config {
namespace detail {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Text (env / flag) parsing with the same type rules as the file.

std::optional<std::int64_t> parse_int(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  std::int64_t x = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return x;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double x = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(x))
    return std::nullopt;
  return x;
}

// Parses `text` as a value of type `t`; nullopt when it does not parse.
std::optional<Value> parse_text(KeyType t, std::string_view text) {
  switch (t) {
    case KeyType::string:
    case KeyType::path: return Value{std::string(text)};
    case KeyType::integer:
      if (auto x = parse_int(text)) return Value{*x};
      return std::nullopt;
    case KeyType::number:
      if (auto x = parse_double(text)) return Value{*x};
      return std::nullopt;
    case KeyType::boolean: {
      auto s = trim(text);
      if (s == "true" || s == "1" || s == "yes" || s == "on") return Value{true};
      if (s == "false" || s == "0" || s == "no" || s == "off") return Value{false};
      return std::nullopt;
    }
    case KeyType::integer_list: {
      auto s = trim(text);
      if (!s.empty() && s.front() == '[') {
        if (s.back() != ']') return std::nullopt;
        s = trim(s.substr(1, s.size() - 2));
      }
      std::vector<int> xs;
      while (!s.empty()) {
        auto comma = s.find(',');
        auto part = s.substr(0, comma);
        auto x = parse_int(part);
        if (!x || *x < std::numeric_limits<int>::min() || *x > std::numeric_limits<int>::max())
          return std::nullopt;
        xs.push_back(static_cast<int>(*x));
        if (comma == std::string_view::npos) break;
        s = s.substr(comma + 1);
        if (trim(s).empty()) return std::nullopt;  // trailing comma
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// Converts a TOML node to a value of type `t`; nullopt on a type mismatch.
std::optional<Value> node_value(KeyType t, const toml::node& node) {
  switch (t) {
    case KeyType::string:
    case KeyType::path:
      if (auto s = node.as_string()) return Value{s->get()};
      return std::nullopt;
    case KeyType::integer:
      if (auto x = node.as_integer()) return Value{x->get()};
      return std::nullopt;
    case KeyType::number:
      if (auto x = node.as_integer()) return Value{static_cast<double>(x->get())};
      if (auto x = node.as_floating_point(); x && std::isfinite(x->get())) return Value{x->get()};
      return std::nullopt;
    case KeyType::boolean:
      if (auto x = node.as_boolean()) return Value{x->get()};
      return std::nullopt;
    case KeyType::integer_list: {
      auto arr = node.as_array();
      if (!arr) return std::nullopt;
      std::vector<int> xs;
      for (const auto& el : *arr) {
        auto x = el.as_integer();
        if (!x || x->get() < std::numeric_limits<int>::min() ||
            x->get() > std::numeric_limits<int>::max())
          return std::nullopt;
        xs.push_back(static_cast<int>(x->get()));
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The loader: applies the layers in order and remembers each value's origin.

struct Origin {
  std::string label;  // "default", "file:<path>:<line>", "env:KORCH_X", "flag"
  std::string where;  // message prefix, e.g. "cfg.toml:12: "
};

class Loader {
 public:
  explicit Loader(std::string path) : m_path(std::move(path)) {
    m_dir = fs::absolute(fs::path(m_path)).parent_path();
  }

  Result<void> apply_file(const toml::table& root);
  Result<void> apply_env(const std::map<std::string, std::string>& env,
                         std::vector<std::string>& warnings);
  Result<void> apply_flags(const std::vector<std::string>& overrides);
  Result<void> validate(std::vector<std::string>& warnings) const {
    return validate_with(
        m_cfg, [this](const std::string& key) { return where(key); }, &warnings, m_unknown_names);
  }
  LoadedConfig finish(std::vector<std::string> warnings) const;
  // Only each key's own rules (load_settings()).
  Result<void> validate_keys() const {
    for (const auto& spec : campaign_specs()) {
      std::string key(spec.info.name);
      if (auto it = m_unknown_names.find(key); it != m_unknown_names.end())
        return fail(where(key) + it->second);
      if (auto e = check_rules(spec, key, spec.get(m_cfg))) return fail(where(key) + *e);
    }
    return {};
  }

 private:
  std::string file_where(const toml::node& node) const {
    return fmt::format("{}:{}: ", m_path, node.source().begin.line);
  }
  std::string file_where(const toml::key& key) const {
    return fmt::format("{}:{}: ", m_path, key.source().begin.line);
  }
  Origin file_origin(const toml::node& node) const {
    return {fmt::format("file:{}:{}", m_path, node.source().begin.line), file_where(node)};
  }
  // The prefix for errors about `key`: its own origin, else its parent's
  // ("models[0].x" -> "models[0]"), else the file.
  std::string where(std::string key) const {
    while (true) {
      if (auto it = m_origins.find(key); it != m_origins.end() && it->second.label != "default")
        return it->second.where;
      auto cut = key.find_last_of(".[");
      if (cut == std::string::npos || cut == 0) break;
      // "models[0].x" -> "models[0]"; "models[0]" -> "models" (stop there)
      if (key[cut] == '[') break;
      key.resize(cut);
    }
    return m_path + ": ";
  }
  std::string resolve(const std::string& p) const {
    if (p.find("://") != std::string::npos) return p;  // a URL (db_path = "postgres://...")
    if (p.rfind("sqlite:", 0) == 0) return "sqlite:" + resolve(p.substr(7));
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (m_dir / p).lexically_normal().string();
  }

  Result<void> set_campaign_from_node(const Spec<C>& spec, const toml::node& node);
  Result<void> load_model(std::size_t index, const toml::table& tbl);
  Result<void> load_event(std::size_t index, const toml::table& tbl);

  std::string m_path;
  fs::path m_dir;
  CampaignConfig m_cfg;
  std::map<std::string, Origin> m_origins;
  // A vocabulary value that names no choice is reported by validate() with
  // the origin of the value that won, so a later layer (env, flag) can
  // still replace it, as for every other value rule.
  UnknownNames m_unknown_names;

  // Sets campaign key `spec` to `v`. Returns the error text of a value that
  // does not fit its field; an unknown vocabulary name is kept for validate().
  std::optional<std::string> set_campaign(const Spec<C>& spec, const Value& v) {
    std::string key(spec.info.name);
    auto e = spec.set(m_cfg, v);
    if (e && spec.info.type == KeyType::string) {
      m_unknown_names[key] = fmt::format("'{}' {}", key, *e);
      return std::nullopt;
    }
    if (!e) m_unknown_names.erase(key);
    return e;
  }
};

std::vector<std::string> campaign_candidates() {
  std::vector<std::string> out = {"tasks", "evaluator", "store", "strategy", "models", "events"};
  for (const auto& s : campaign_specs()) out.emplace_back(s.info.name);
  return out;
}

Result<void> Loader::set_campaign_from_node(const Spec<C>& spec, const toml::node& node) {
  std::string key(spec.info.name);
  auto v = node_value(spec.info.type, node);
  if (!v)
    return fail(file_where(node) +
                fmt::format("'{}' must be {}", key, type_phrase(spec.info.type)));
  if (spec.info.type == KeyType::path) v = Value{resolve(std::get<std::string>(*v))};
  if (auto e = set_campaign(spec, *v))
    return fail(file_where(node) + fmt::format("'{}' {}", key, *e));
  m_origins[key] = file_origin(node);
  return {};
}

Result<void> Loader::load_model(std::size_t index, const toml::table& tbl) {
  auto at = fmt::format("models[{}]", index);
  ModelConfig m;
  m_origins[at] = file_origin(tbl);
  std::vector<std::string> names;
  for (const auto& s : model_specs()) names.push_back(at + "." + std::string(s.info.name));
  for (auto&& [k, node] : tbl) {
    auto key = at + "." + std::string(k.str());
    const auto* spec = find_spec(model_specs(), k.str());
    if (!spec)
      return fail(file_where(k) + fmt::format("unknown key '{}'{}", key, suggestion(key, names)));
    auto v = node_value(spec->info.type, node);
    if (!v)
      return fail(file_where(node) +
                  fmt::format("'{}' must be {}", key, type_phrase(spec->info.type)));
    if (auto e = spec->set(m, *v)) return fail(file_where(node) + fmt::format("'{}' {}", key, *e));
    m_origins[key] = file_origin(node);
  }
  m_cfg.models.push_back(std::move(m));
  return {};
}

Result<void> Loader::load_event(std::size_t index, const toml::table& tbl) {
  auto at = fmt::format("events[{}]", index);
  LifecycleEvent e;
  m_origins[at] = file_origin(tbl);
  std::vector<std::string> names;
  for (const auto& info : event_infos()) names.push_back(at + "." + std::string(info.name));
  bool has_kind = false, has_turn = false;
  for (auto&& [k, node] : tbl) {
    auto key = at + "." + std::string(k.str());
    auto it = std::find_if(event_infos().begin(), event_infos().end(),
                           [&](const KeyInfo& i) { return i.name == k.str(); });
    if (it == event_infos().end())
      return fail(file_where(k) + fmt::format("unknown key '{}'{}", key, suggestion(key, names)));
    auto v = node_value(it->type, node);
    if (!v)
      return fail(file_where(node) + fmt::format("'{}' must be {}", key, type_phrase(it->type)));
    m_origins[key] = file_origin(node);
    if (it->name == "kind") {
      if (auto err = assign(e.kind, *v))
        return fail(file_where(node) + fmt::format("'{}' {}", key, *err));
      has_kind = true;
    } else if (it->name == "turn") {
      auto x = std::get<std::int64_t>(*v);
      if (x < 1 || x > std::numeric_limits<int>::max())
        return fail(file_where(node) + fmt::format("'{}' must be >= 1 (got {})", key, x));
      e.turn = static_cast<int>(x);
      has_turn = true;
    } else if (it->name == "model") {
      e.model = std::get<std::string>(*v);
    } else {
      e.samples = std::get<std::vector<int>>(*v);
    }
  }
  if (!has_kind) return fail(file_where(tbl) + fmt::format("'{}.kind' is required", at));
  if (!has_turn) return fail(file_where(tbl) + fmt::format("'{}.turn' is required", at));
  m_cfg.events.push_back(std::move(e));
  return {};
}

Result<void> Loader::apply_file(const toml::table& root) {
  const auto candidates = campaign_candidates();
  for (auto&& [k, node] : root) {
    std::string key(k.str());
    if (key == "tasks" || key == "evaluator" || key == "store" || key == "strategy") {
      auto tbl = node.as_table();
      if (!tbl)
        return fail(file_where(node) + fmt::format("'{}' must be a table ([{}])", key, key));
      for (auto&& [k2, node2] : *tbl) {
        auto dotted = key + "." + std::string(k2.str());
        const auto* spec = find_spec(campaign_specs(), dotted);
        if (!spec)
          return fail(file_where(k2) +
                      fmt::format("unknown key '{}'{}", dotted, suggestion(dotted, candidates)));
        if (auto r = set_campaign_from_node(*spec, node2); !r) return r;
      }
    } else if (key == "models" || key == "events") {
      auto arr = node.as_array();
      if (!arr || (!arr->empty() && !arr->is_array_of_tables()))
        return fail(file_where(node) +
                    fmt::format("'{}' must be an array of tables ([[{}]])", key, key));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const auto& tbl = *arr->get(i)->as_table();
        auto r = key == "models" ? load_model(i, tbl) : load_event(i, tbl);
        if (!r) return r;
      }
    } else {
      const auto* spec = find_spec(campaign_specs(), key);
      if (!spec || key.find('.') != std::string::npos)
        return fail(file_where(k) +
                    fmt::format("unknown key '{}'{}", key, suggestion(key, candidates)));
      if (auto r = set_campaign_from_node(*spec, node); !r) return r;
    }
  }
  return {};
}

Result<void> Loader::apply_env(const std::map<std::string, std::string>& env,
                               std::vector<std::string>& warnings) {
  std::set<std::string> known;
  for (const auto& spec : campaign_specs()) {
    std::string var(spec.info.env);
    known.insert(var);
    auto it = env.find(var);
    if (it == env.end()) continue;
    std::string key(spec.info.name);
    auto v = parse_text(spec.info.type, it->second);
    if (!v)
      return fail(fmt::format("{}: '{}' must be {} (got {})", var, key, type_phrase(spec.info.type),
                              toml_quote(it->second)));
    if (auto e = set_campaign(spec, *v)) return fail(fmt::format("{}: '{}' {}", var, key, *e));
    m_origins[key] = {"env:" + var, var + ": "};
  }
  for (std::size_t i = 0; i < m_cfg.models.size(); ++i) {
    auto& m = m_cfg.models[i];
    for (const auto& spec : model_specs()) {
      if (spec.info.name == "id") continue;
      auto var = model_env_name(m.id, spec.info.name);
      known.insert(var);
      auto it = env.find(var);
      if (it == env.end()) continue;
      auto key = fmt::format("models[{}].{}", i, spec.info.name);
      auto v = parse_text(spec.info.type, it->second);
      if (!v) {
        // Do not echo api_key_env's value here: it may be a pasted key.
        return fail(fmt::format("{}: '{}' must be {}", var, key, type_phrase(spec.info.type)));
      }
      if (auto e = spec.set(m, *v)) return fail(fmt::format("{}: '{}' {}", var, key, *e));
      m_origins[key] = {"env:" + var, var + ": "};
    }
  }
  std::vector<std::string> known_list(known.begin(), known.end());
  for (const auto& [var, value] : env) {
    if (!var.starts_with("KORCH_") || known.contains(var)) continue;
    if (auto c = closest(var, known_list); !c.empty())
      warnings.push_back(fmt::format("{} is not a korch setting (did you mean {}?)", var, c));
  }
  return {};
}

Result<void> Loader::apply_flags(const std::vector<std::string>& overrides) {
  const auto candidates = campaign_candidates();
  for (const auto& flag : overrides) {
    auto eq = flag.find('=');
    auto where = "--set " + flag + ": ";
    if (eq == std::string::npos) return fail(where + "expected key=value");
    std::string key(trim(std::string_view(flag).substr(0, eq)));
    std::string text(trim(std::string_view(flag).substr(eq + 1)));
    if (key.starts_with("models.")) {
      auto dot = key.rfind('.');
      if (dot <= 7) return fail(where + "expected models.<id>.<key>=value");
      auto id = key.substr(7, dot - 7);
      auto field = key.substr(dot + 1);
      auto it = std::find_if(m_cfg.models.begin(), m_cfg.models.end(),
                             [&](const ModelConfig& m) { return m.id == id; });
      if (it == m_cfg.models.end()) {
        std::vector<std::string> ids;
        for (const auto& m : m_cfg.models) ids.push_back(m.id);
        return fail(where + fmt::format("no model with id '{}'{}", id, suggestion(id, ids)));
      }
      std::vector<std::string> names;
      for (const auto& s : model_specs()) names.emplace_back(s.info.name);
      const auto* spec = find_spec(model_specs(), field);
      if (!spec)
        return fail(where +
                    fmt::format("unknown model key '{}'{}", field, suggestion(field, names)));
      if (field == "id") return fail(where + "a model's id can only be set in the file");
      auto i = static_cast<std::size_t>(it - m_cfg.models.begin());
      auto label = fmt::format("models[{}].{}", i, field);
      auto v = parse_text(spec->info.type, text);
      if (!v)
        return fail(where + fmt::format("'{}' must be {}", label, type_phrase(spec->info.type)));
      if (auto e = spec->set(*it, *v)) return fail(where + fmt::format("'{}' {}", label, *e));
      m_origins[label] = {"flag", where};
      continue;
    }
    const auto* spec = find_spec(campaign_specs(), key);
    if (!spec) {
      if (key == "models" || key == "events")
        return fail(where + fmt::format("'{}' can only be set in the file", key));
      return fail(where + fmt::format("unknown key '{}'{}", key, suggestion(key, candidates)));
    }
    auto v = parse_text(spec->info.type, text);
    if (!v)
      return fail(where + fmt::format("'{}' must be {} (got {})", key, type_phrase(spec->info.type),
                                      toml_quote(text)));
    if (auto e = set_campaign(*spec, *v)) return fail(where + fmt::format("'{}' {}", key, *e));
    m_origins[key] = {"flag", where};
  }
  return {};
}

LoadedConfig Loader::finish(std::vector<std::string> warnings) const {
  LoadedConfig out;
  out.config = m_cfg;
  if (!out.config.store_url.empty()) out.config.db_path = out.config.store_url;
  out.path = m_path;
  out.warnings = std::move(warnings);
  auto label = [&](const std::string& key) {
    auto it = m_origins.find(key);
    return it == m_origins.end() ? std::string("default") : it->second.label;
  };
  for (const auto& spec : campaign_specs()) {
    std::string key(spec.info.name);
    out.values.push_back({key, log::redact_url(render(spec.get(m_cfg))), label(key)});
  }
  for (std::size_t i = 0; i < m_cfg.models.size(); ++i) {
    for (const auto& spec : model_specs()) {
      out.values.push_back({fmt::format("models.{}.{}", m_cfg.models[i].id, spec.info.name),
                            render(spec.get(m_cfg.models[i])),
                            label(fmt::format("models[{}].{}", i, spec.info.name))});
    }
  }
  for (std::size_t i = 0; i < m_cfg.events.size(); ++i) {
    auto key = fmt::format("events[{}]", i);
    out.values.push_back({key, render_event(m_cfg.events[i]), label(key)});
  }
  return out;
}

}  // namespace
}  // namespace detail

using detail::Loader;

Result<LoadedConfig> load_campaign(const std::string& path,
                                   const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides) {
  auto text = read_file(path);
  if (!text) return fail(text.error().message);
  toml::table root;
  try {
    root = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    return fail(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                            e.description()));
  }
  Loader loader(path);
  std::vector<std::string> warnings;
  if (auto r = loader.apply_file(root); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_env(env, warnings); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_flags(overrides); !r) return std::unexpected(r.error());
  if (auto r = loader.validate(warnings); !r) return std::unexpected(r.error());
  return loader.finish(std::move(warnings));
}

Result<LoadedConfig> load_settings(const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides) {
  Loader loader("(no config file)");
  std::vector<std::string> warnings;
  if (auto r = loader.apply_env(env, warnings); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_flags(overrides); !r) return std::unexpected(r.error());
  if (auto r = loader.validate_keys(); !r) return std::unexpected(r.error());
  return loader.finish(std::move(warnings));
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with("KORCH_")) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

}  // namespace korch::config
