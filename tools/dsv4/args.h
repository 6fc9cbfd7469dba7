// tools: a small, strict argument parser shared by the subcommands. Unknown flags and missing values
// are errors (printed with the command's usage), never silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace dsv4::cli {

class Args {
 public:
  // `flags_with_value`: "--model", ...; `bool_flags`: "--json", ...
  static Result<Args> parse(int argc, char** argv, const std::vector<std::string>& flags_with_value,
                            const std::vector<std::string>& bool_flags);

  bool has(const std::string& flag) const { return values_.count(flag) > 0 || bools_.count(flag) > 0; }
  std::optional<std::string> get(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& def) const;
  Result<int64_t> get_int(const std::string& flag, int64_t def, int64_t min, int64_t max) const;
  Result<double> get_double(const std::string& flag, double def, double min, double max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> bools_;
  std::vector<std::string> positional_;
};

// Prints "dsv4 <cmd>: <status>" to stderr and returns the process exit code for it.
int report_error(const std::string& cmd, const Status& s);

}  // namespace dsv4::cli
