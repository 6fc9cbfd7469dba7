// tools: argument parsing.
#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dsv4::cli {

Result<Args> Args::parse(int argc, char** argv, const std::vector<std::string>& flags_with_value,
                         const std::vector<std::string>& bool_flags) {
  Args a;
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() > 2 && arg.rfind("--", 0) == 0) {
      std::string value;
      bool inline_value = false;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inline_value = true;
      }
      if (contains(flags_with_value, arg)) {
        if (!inline_value) {
          if (i + 1 >= argc) return invalid_argument("cli.missing_value", "flag " + arg + " needs a value");
          value = argv[++i];
        }
        a.values_[arg] = value;
      } else if (contains(bool_flags, arg) && !inline_value) {
        a.bools_[arg] = true;
      } else {
        return invalid_argument("cli.unknown_flag", "unknown flag " + arg);
      }
    } else {
      a.positional_.push_back(arg);
    }
  }
  return a;
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& def) const {
  auto v = get(flag);
  return v ? *v : def;
}

Result<int64_t> Args::get_int(const std::string& flag, int64_t def, int64_t min, int64_t max) const {
  auto v = get(flag);
  if (!v) return def;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    return invalid_argument("cli.not_integer", flag + " expects an integer, got '" + *v + "'");
  if (x < min || x > max)
    return invalid_argument("cli.out_of_range", flag + " = " + *v + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return static_cast<int64_t>(x);
}

Result<double> Args::get_double(const std::string& flag, double def, double min, double max) const {
  auto v = get(flag);
  if (!v) return def;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(x))
    return invalid_argument("cli.not_number", flag + " expects a number, got '" + *v + "'");
  if (x < min || x > max)
    return invalid_argument("cli.out_of_range", flag + " = " + *v + " is out of range");
  return x;
}

int report_error(const std::string& cmd, const Status& s) {
  std::fprintf(stderr, "dsv4 %s: %s\n", cmd.c_str(), s.to_string().c_str());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace dsv4::cli
