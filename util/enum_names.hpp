#pragma once
// One name table per enum: the only place its values are spelt as text.
//
// Specialise EnumNames<E> next to the enum with a `k_names` array of
// {value, name} pairs; enum_name() and enum_from_name() then convert in both
// directions, and enum_choices() renders the allowed names for a message.
// Modules wrap them as `to_string(E)` / `from_string<E>(text)` in their own
// namespace (config/vocabulary.hpp).
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace korch {

template <typename E>
struct EnumNames;  // static constexpr std::pair<E, std::string_view> k_names[] = {...};

template <typename E>
concept NamedEnum = requires {
  EnumNames<E>::k_names;
};

// The name of `value`; "" for a value missing from the table (a bug that a
// unit test catches).
template <NamedEnum E>
constexpr std::string_view enum_name(E value) {
  for (const auto& [v, name] : EnumNames<E>::k_names)
    if (v == value) return name;
  return {};
}

// The value named `name` (exact, case-sensitive match); nullopt otherwise.
template <NamedEnum E>
constexpr std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& [v, n] : EnumNames<E>::k_names)
    if (n == name) return v;
  return std::nullopt;
}

// The names, quoted, for a message: "\"a\", \"b\" or \"c\"".
template <NamedEnum E>
std::string enum_choices() {
  std::string out;
  const auto& names = EnumNames<E>::k_names;
  const std::size_t n = std::size(names);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " or " : ", ";
    out += '"';
    out += names[i].second;
    out += '"';
  }
  return out;
}

}  // namespace korch
