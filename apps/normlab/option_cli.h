// The command line of a declared option table (core/option_table.h): one CLI11 option per
// entry, bound to a config's field, with its help, group and default.
#pragma once

#include <CLI/CLI.hpp>

#include "core/option_table.h"

namespace normlab::app {

// The CLI11 side of core::OptionBinder: numbers, strings and lists bind to their fields (CLI11
// converts them), flags are flags, coded values (enums, --betas) parse as they arrive and a
// value they refuse is a CLI::ValidationError of one line naming the flag.
class CliBinder final : public core::OptionBinder {
 public:
  explicit CliBinder(CLI::App& command) : command_(command) {}
  void bind(const core::OptionSpec& spec, double& v) override;
  void bind(const core::OptionSpec& spec, int64_t& v) override;
  void bind(const core::OptionSpec& spec, uint64_t& v) override;
  void bind(const core::OptionSpec& spec, bool& v) override;
  void bind(const core::OptionSpec& spec, std::string& v) override;
  void bind(const core::OptionSpec& spec, std::vector<std::string>& v) override;
  void bind(const core::OptionSpec& spec, core::TextValue v) override;

 private:
  CLI::App& command_;
};

// Adds every command-line option of `table` to `command`, bound to the fields of `config`
// (which must outlive the parse).
template <class C>
void add_options(CLI::App& command, const core::OptionTable<C>& table, C& config) {
  CliBinder binder(command);
  table.bind(config, binder);
}

// A numeric option's range checked as it is parsed, so that an option the command will not use is
// checked too (issue 34: `train --lenpen -inf` without --eval-bleu was accepted):
// "--lenpen: must be finite, got -inf".
CLI::Validator in_range(const core::Range& range);

// Every numeric option of `app` and of its subcommands, at any depth, refuses an empty value
// (CLI11 reads '' as 0): "--eps: an empty value is not a number", exit 2 (issue 34).
void refuse_empty_numbers(CLI::App& app);

}  // namespace normlab::app
