#include "option_cli.h"

#include <stdexcept>

namespace normlab::app {
namespace {

// Binds `v` as CLI11 does any option, the default shown when there is one.
template <class T>
void bind_value(CLI::App& command, const core::OptionSpec& spec, T& v) {
  command.add_option(spec.flag, v, spec.help)->capture_default_str()->group(spec.group);
}

}  // namespace

void CliBinder::bind(const core::OptionSpec& spec, double& v) { bind_value(command_, spec, v); }
void CliBinder::bind(const core::OptionSpec& spec, int64_t& v) { bind_value(command_, spec, v); }
void CliBinder::bind(const core::OptionSpec& spec, uint64_t& v) { bind_value(command_, spec, v); }
void CliBinder::bind(const core::OptionSpec& spec, std::string& v) { bind_value(command_, spec, v); }

void CliBinder::bind(const core::OptionSpec& spec, bool& v) {
  command_.add_flag(spec.flag, v, spec.help)->group(spec.group);
}

void CliBinder::bind(const core::OptionSpec& spec, std::vector<std::string>& v) {
  command_.add_option(spec.flag, v, spec.help)->delimiter(',')->capture_default_str()->group(spec.group);
}

void CliBinder::bind(const core::OptionSpec& spec, core::TextValue v) {
  const auto help = v.choices.empty() ? spec.help : spec.help.empty() ? v.choices : spec.help + ": " + v.choices;
  command_
      .add_option_function<std::string>(
          spec.flag,
          [set = std::move(v.set)](const std::string& text) {
            try {
              set(text);
            } catch (const std::invalid_argument& e) {
              throw CLI::ValidationError(e.what());
            }
          },
          help)
      ->default_str(v.shown)
      ->group(spec.group);
}

CLI::Validator in_range(const core::Range& range) {
  return CLI::Validator(
      [range](std::string& text) {
        double v = 0;
        try {
          v = std::stod(text);
        } catch (const std::exception&) {
          return std::string();  // not a number: CLI11's conversion says so
        }
        return range.contains(v) ? std::string() : "must be " + range.describe() + ", got " + text;
      },
      range.describe(), "range");
}

void refuse_empty_numbers(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& value) { return value.empty() ? std::string("an empty value is not a number") : std::string(); },
      "", "non-empty");
  for (auto* option : app.get_options())
    if (const auto& type = option->get_type_name(); type == "FLOAT" || type == "INT" || type == "UINT")
      option->check(non_empty);
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_numbers(*sub);
}

}  // namespace normlab::app
