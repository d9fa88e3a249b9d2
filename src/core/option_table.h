// Options declared once: flag, config.json key, field, help, group and check, from which the
// command line, config.json and the range checks come. The model is fairseq's dataclass fields
// (fairseq/dataclass/configs.py: `lr: float = field(default=..., metadata={"help": ...})`), with
// the check beside the help. Torch-free and CLI11-free: apps/normlab/option_cli.h binds a table
// to a command. docs/architecture.md, "A new option", says where a table lives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace normlab::core {

// "%g" of v: 5e-04 -> "0.0005", 4096 -> "4096".
std::string format_number(double v);

// One table of (value, name) per enum: its parser, its names and its choices "a|b|c".
template <class E>
class EnumNames {
 public:
  EnumNames(std::initializer_list<std::pair<E, const char*>> names) : names_(names) {}
  // Throws std::invalid_argument "OPTION: unknown value 'S', expected a|b|c".
  E parse(const std::string& s, const std::string& option) const {
    for (const auto& [value, name] : names_)
      if (s == name) return value;
    throw std::invalid_argument(option + ": unknown value '" + s + "', expected " + choices());
  }
  std::string name(E value) const {
    for (const auto& [v, name] : names_)
      if (v == value) return name;
    throw std::logic_error("an enum value without a name");
  }
  std::string choices() const {
    std::string out;
    for (const auto& [value, name] : names_) out += (out.empty() ? "" : "|") + std::string(name);
    return out;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [value, name] : names_) out.emplace_back(name);
    return out;
  }

 private:
  std::vector<std::pair<E, const char*>> names_;
};

// A numeric option's allowed values; NaN is never among them. "FLAG must be PHRASE, got V".
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  bool finite = false;  // also refuse +-inf
  std::string phrase;   // what the message says the value must be; empty: from the bounds

  bool contains(double v) const;
  std::string describe() const;  // ">= 0", "> 0", "in (0, 4096]", or the phrase
};
Range at_least(double lo);                                         // [lo, inf]
Range above(double lo);                                            // (lo, inf]
Range between(double lo, double hi, bool lo_open, bool hi_open);  // [lo, hi], ( and ) where open
Range finite(Range r);                                             // r without +-inf

// How a value that is not a plain number, string or bool reads from and prints to the command
// line and config.json: enums (their EnumNames or a registry), Adam's betas.
template <class T>
struct Codec {
  std::function<T(const std::string& text, const std::string& flag)> parse;  // throws std::invalid_argument
  std::function<std::string(const T&)> format;
  std::function<std::string()> choices;  // "a|b|c" for the help; empty function: none
  std::function<nlohmann::json(const T&)> json;  // empty function: the formatted text
};
template <class E>
Codec<E> enum_codec(const EnumNames<E>& names) {
  return {[&names](const std::string& s, const std::string& flag) { return names.parse(s, flag); },
          [&names](const E& v) { return names.name(v); }, [&names] { return names.choices(); }, {}};
}

// What a command line needs of an option: its name and text, and the field to set.
struct OptionSpec {
  std::string flag;   // "--lr"
  std::string key;    // config.json's "schedule.lr"
  std::string help;
  std::string group;  // the help's section
  bool on_command_line = true;  // false: config.json only (set from another option, or fixed)
  bool in_json = true;          // false: the command line only (its effect is recorded elsewhere)
};
// A value given as text, parsed by a Codec.
struct TextValue {
  std::function<void(const std::string&)> set;  // throws std::invalid_argument naming the flag
  std::string shown;    // the current (default) value
  std::string choices;  // "a|b|c", or empty
};
// Implemented by a command-line library (apps/normlab/option_cli.h).
class OptionBinder {
 public:
  virtual ~OptionBinder() = default;
  virtual void bind(const OptionSpec& spec, double& v) = 0;
  virtual void bind(const OptionSpec& spec, int64_t& v) = 0;
  virtual void bind(const OptionSpec& spec, uint64_t& v) = 0;
  virtual void bind(const OptionSpec& spec, bool& v) = 0;  // a flag
  virtual void bind(const OptionSpec& spec, std::string& v) = 0;
  virtual void bind(const OptionSpec& spec, std::vector<std::string>& v) = 0;  // comma-separated
  virtual void bind(const OptionSpec& spec, TextValue v) = 0;
};

// One option's field of a config C, type erased.
template <class C>
class Field {
 public:
  virtual ~Field() = default;
  virtual nlohmann::json json(const C& c) const = 0;
  virtual std::optional<std::string> problem(const C& c, const std::string& flag) const = 0;
  virtual void bind(C& c, const OptionSpec& spec, OptionBinder& binder) const = 0;
};

namespace detail {

template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_floating_point_v<T>) return format_number(v);
  else return std::to_string(v);
}

template <class C, class T>
class MemberField final : public Field<C> {
 public:
  MemberField(T C::*member, std::optional<Range> range) : member_(member), range_(std::move(range)) {}
  nlohmann::json json(const C& c) const override { return c.*member_; }
  std::optional<std::string> problem(const C& c, const std::string& flag) const override {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (range_ && !range_->contains(static_cast<double>(c.*member_)))
        return flag + " must be " + range_->describe() + ", got " + value_text(c.*member_);
    }
    return std::nullopt;
  }
  void bind(C& c, const OptionSpec& spec, OptionBinder& binder) const override { binder.bind(spec, c.*member_); }

 private:
  T C::*member_;
  std::optional<Range> range_;
};

template <class C, class T>
class CodedField final : public Field<C> {
 public:
  CodedField(T C::*member, Codec<T> codec) : member_(member), codec_(std::move(codec)) {}
  nlohmann::json json(const C& c) const override {
    return codec_.json ? codec_.json(c.*member_) : nlohmann::json(codec_.format(c.*member_));
  }
  std::optional<std::string> problem(const C&, const std::string&) const override { return std::nullopt; }
  void bind(C& c, const OptionSpec& spec, OptionBinder& binder) const override {
    T* field = &(c.*member_);
    binder.bind(spec, TextValue{[field, codec = codec_, flag = spec.flag](const std::string& s) {
                                  *field = codec.parse(s, flag);
                                },
                                codec_.format(*field), codec_.choices ? codec_.choices() : ""});
  }

 private:
  T C::*member_;
  Codec<T> codec_;
};

// A part's field seen from the whole: the part's own problems() checks it, so this does not.
template <class C, class Part>
class PartField final : public Field<C> {
 public:
  PartField(Part C::*part, std::shared_ptr<const Field<Part>> field) : part_(part), field_(std::move(field)) {}
  nlohmann::json json(const C& c) const override { return field_->json(c.*part_); }
  std::optional<std::string> problem(const C&, const std::string&) const override { return std::nullopt; }
  void bind(C& c, const OptionSpec& spec, OptionBinder& binder) const override { field_->bind(c.*part_, spec, binder); }

 private:
  Part C::*part_;
  std::shared_ptr<const Field<Part>> field_;
};

// Sets j at the dotted path "a.b.c".
void set_at(nlohmann::json& j, const std::string& path, nlohmann::json value);

}  // namespace detail

// The declared options of a config struct C, in declaration order (the help's order).
template <class C>
class OptionTable {
 public:
  struct Entry {
    OptionSpec spec;
    std::shared_ptr<const Field<C>> field;
    Entry& json_only() { spec.on_command_line = false; return *this; }
    Entry& cli_only() { spec.in_json = false; return *this; }
  };

  // Options added after this call appear in the help under `name`.
  OptionTable& group(std::string name) {
    group_ = std::move(name);
    return *this;
  }
  // A number, string, string list (comma-separated) or flag; `range` for numbers only.
  template <class T>
  Entry& add(std::string flag, std::string key, T C::*member, std::string help, std::optional<Range> range = {}) {
    return push(std::move(flag), std::move(key), std::move(help),
                std::make_shared<detail::MemberField<C, T>>(member, std::move(range)));
  }
  // A value read and printed by `codec` (an enum, a pair of numbers).
  template <class T>
  Entry& add(std::string flag, std::string key, T C::*member, std::string help, Codec<T> codec) {
    return push(std::move(flag), std::move(key), std::move(help),
                std::make_shared<detail::CodedField<C, T>>(member, std::move(codec)));
  }
  // Every option of `part`'s table, its keys under `prefix` ("" for none). The part keeps its
  // own checks (its problems() runs them), so problems() here does not repeat them.
  template <class Part>
  OptionTable& add_part(Part C::*part, const OptionTable<Part>& table, const std::string& prefix) {
    for (const auto& e : table.entries()) {
      OptionSpec spec = e.spec;
      if (!prefix.empty()) spec.key = prefix + "." + spec.key;
      entries_.push_back({std::move(spec), std::make_shared<detail::PartField<C, Part>>(part, e.field)});
    }
    return *this;
  }

  const std::vector<Entry>& entries() const { return entries_; }

  // Each declared key at its dotted path.
  nlohmann::json to_json(const C& c) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& e : entries_)
      if (e.spec.in_json) detail::set_at(j, e.spec.key, e.field->json(c));
    return j;
  }
  // One message per value outside its range, naming the flag.
  std::vector<std::string> problems(const C& c) const {
    std::vector<std::string> out;
    for (const auto& e : entries_)
      if (auto p = e.field->problem(c, e.spec.flag)) out.push_back(std::move(*p));
    return out;
  }
  // Hands every command-line option's field of `c` to `binder`.
  void bind(C& c, OptionBinder& binder) const {
    for (const auto& e : entries_)
      if (e.spec.on_command_line) e.field->bind(c, e.spec, binder);
  }

 private:
  Entry& push(std::string flag, std::string key, std::string help, std::shared_ptr<const Field<C>> field) {
    entries_.push_back({OptionSpec{std::move(flag), std::move(key), std::move(help), group_}, std::move(field)});
    return entries_.back();
  }
  std::string group_;
  std::vector<Entry> entries_;
};

}  // namespace normlab::core
