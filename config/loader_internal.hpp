#pragma once
// Internal to korch_config: what the files of the loader share. keys.cpp
// holds the key tables (one Spec per key, with a typed setter and getter);
// layers.cpp applies the layers, validate.cpp checks the result and
// record.cpp writes and reads the JSON record, all through those tables.
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/loader.hpp"
#include "util/did_you_mean.hpp"

namespace korch::config::detail {

// A parsed value, before it is stored into a typed field. The alternative
// matches the key's KeyType: string/path -> string, integer -> int64,
// number -> double, boolean -> bool, integer_list -> vector<int>.
using Value = std::variant<std::string, std::int64_t, double, bool, std::vector<int>>;

// Quotes a string as a TOML basic string.
std::string toml_quote(std::string_view s);

// Renders a list of integers as TOML: "[1, 2]".
std::string render_int_list(const std::vector<int>& xs);

// Renders a value as TOML ("5", "\"mock\"", "[1, 2]").
std::string render(const Value& v);

// Renders an event as an inline TOML table: "{ kind = \"compaction\", turn = 2 }".
std::string render_event(const LifecycleEvent& e);

// Assigning and reading typed fields. `assign` returns an error text when the
// value does not fit the field (an integer out of int range).
std::optional<std::string> assign(std::string& field, const Value& v);
std::optional<std::string> assign(int& field, const Value& v);
std::optional<std::string> assign(std::int64_t& field, const Value& v);
std::optional<std::string> assign(double& field, const Value& v);
std::optional<std::string> assign(bool& field, const Value& v);
std::optional<std::string> assign(std::vector<int>& field, const Value& v);

// A vocabulary enum is written as its name; an unknown name is refused with
// the list of the allowed ones (config/vocabulary.hpp holds the names).
template <NamedEnum E>
std::optional<std::string> assign(E& field, const Value& v) {
  const auto& s = std::get<std::string>(v);
  auto x = from_string<E>(s);
  if (!x) return fmt::format("must be {} (got {})", enum_choices<E>(), toml_quote(s));
  field = *x;
  return std::nullopt;
}

// One row of a key table: the documented KeyInfo, the value rules (bounds; a
// vocabulary key's choices are its enum's names) and a setter/getter pair on
// the typed struct.
template <typename Struct>
struct Spec {
  KeyInfo info;
  std::optional<double> min;   // inclusive lower bound
  bool min_exclusive = false;  // min is exclusive (timeouts > 0)
  std::optional<double> max;   // inclusive upper bound
  std::optional<std::string> (*set)(Struct&, const Value&) = nullptr;
  Value (*get)(const Struct&) = nullptr;
};

using C = CampaignConfig;
using M = ModelConfig;

// The key tables (keys.cpp): the campaign's scalar keys, the keys of one
// [[models]] table and of one [[events]] table, in documentation order.
const std::vector<Spec<C>>& campaign_specs();
const std::vector<Spec<M>>& model_specs();
const std::vector<KeyInfo>& event_infos();

template <typename Struct>
const Spec<Struct>* find_spec(const std::vector<Spec<Struct>>& specs, std::string_view name) {
  for (const auto& s : specs)
    if (s.info.name == name) return &s;
  return nullptr;
}

// Did-you-mean (util/did_you_mean.hpp), the one rule for every name.
using korch::closest;
using korch::suggestion;

// What a value of type `t` must be, for messages: "an integer", ...
const char* type_phrase(KeyType t);

// Checks choices and bounds; returns the error text (without location).
template <typename Struct>
std::optional<std::string> check_rules(const Spec<Struct>& spec, std::string_view label,
                                       const Value& v) {
  auto check_one = [&](double x, const std::string& shown) -> std::optional<std::string> {
    if (spec.min) {
      if (spec.min_exclusive && !(x > *spec.min))
        return fmt::format("'{}' must be > {} (got {})", label, *spec.min, shown);
      if (!spec.min_exclusive && x < *spec.min)
        return fmt::format("'{}' must be >= {} (got {})", label, *spec.min, shown);
    }
    if (spec.max && x > *spec.max)
      return fmt::format("'{}' must be <= {} (got {})", label, *spec.max, shown);
    return std::nullopt;
  };
  if (auto x = std::get_if<std::int64_t>(&v))
    return check_one(static_cast<double>(*x), std::to_string(*x));
  if (auto x = std::get_if<double>(&v)) return check_one(*x, fmt::format("{}", *x));
  if (auto xs = std::get_if<std::vector<int>>(&v)) {
    for (int x : *xs)
      if (auto e = check_one(x, std::to_string(x))) return e;
  }
  return std::nullopt;
}

// Validation shared by load_campaign() and validate(). `where(key)` returns
// the message prefix for a key ("file:line: ", "KORCH_X: ", "" ...). Keys:
// "max_turns", "models[0]", "models[0].top_p", "events[1]", "events[1].turn".
using Locator = std::function<std::string(const std::string& key)>;

// `unknown_names`: vocabulary keys whose winning value named no choice (key ->
// "'key' must be ..."), reported here, in key order, like any other rule.
using UnknownNames = std::map<std::string, std::string>;

// Checks the value rules of every key and the whole-config requirements
// (validate.cpp); fails with the first broken rule, prefixed by `where(key)`.
// A non-fatal note (an event that never fires) goes to `warnings` if given.
Result<void> validate_with(const CampaignConfig& cfg, const Locator& where,
                           std::vector<std::string>* warnings,
                           const UnknownNames& unknown_names = {});

}  // namespace korch::config::detail
