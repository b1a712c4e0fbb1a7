#pragma once
// One name table per enum: the only place its values are spelt as text.
//
// Next to the enum, in namespace korch, either name each value by its
// identifier:
//   KORCH_ENUM_NAMES(evaluator::JobRole, rules, compile, warm);
// or, where the text differs from the identifier, specialise EnumNames<E>
// with a `k_names` array of {value, name} pairs. enum_name() and
// enum_from_name() then convert in both directions, enum_choices() renders
// the allowed names for a message, and `to_string(E)` /
// `from_string<E>(text)` wrap them (a module brings them into its namespace
// with `using korch::to_string;` so that argument-dependent lookup finds
// them: config/vocabulary.hpp).
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace korch {

template <typename E>
struct EnumNames;  // static constexpr std::pair<E, std::string_view> k_names[] = {...};

template <typename E>
concept NamedEnum = requires {
  EnumNames<E>::k_names;
};

namespace detail {
// The {value, name} table of KORCH_ENUM_NAMES: `list` is the text of its
// arguments ("rules, compile, warm"), `values` the same arguments as values.
template <typename E, std::size_t N>
constexpr std::array<std::pair<E, std::string_view>, N> names_of_identifiers(std::string_view list,
                                                                             const E (&values)[N]) {
  std::array<std::pair<E, std::string_view>, N> table{};
  for (std::size_t i = 0; i < N; ++i) {
    while (!list.empty() && (list.front() == ' ' || list.front() == ',')) list.remove_prefix(1);
    std::size_t end = 0;
    while (end < list.size() && list[end] != ',' && list[end] != ' ') ++end;
    table[i] = {values[i], list.substr(0, end)};
    list.remove_prefix(end);
  }
  return table;
}
}  // namespace detail

// EnumNames<E> for an enum whose values are named by their identifiers.
#define KORCH_ENUM_NAMES(E, ...)                                                 \
  template <>                                                                    \
  struct EnumNames<E> {                                                          \
    static constexpr auto k_names = [] {                                         \
      using enum E;                                                              \
      return ::korch::detail::names_of_identifiers(#__VA_ARGS__, {__VA_ARGS__}); \
    }();                                                                         \
  }

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

// The names in order, for a list of choices (a flag's, a help text's).
template <NamedEnum E>
std::vector<std::string> enum_name_list() {
  std::vector<std::string> out;
  for (const auto& [v, n] : EnumNames<E>::k_names) out.emplace_back(n);
  return out;
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

// The name of a vocabulary value ("gpu", "tf32", "final", ...):
// `to_string(cfg.evaluator.mode)`.
template <NamedEnum E>
constexpr std::string_view to_string(E value) {
  return enum_name(value);
}

// The value named `text`, or nullopt: `from_string<Tolerance>("tf32")`.
template <NamedEnum E>
constexpr std::optional<E> from_string(std::string_view text) {
  return enum_from_name<E>(text);
}

}  // namespace korch
