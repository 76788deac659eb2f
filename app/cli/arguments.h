#pragma once
// Command-line parsing for tokenscope-cli: `tokenscope-cli COMMAND [--option value | --flag]`.
// Each command declares the options it accepts; anything else is an InvalidArgument that
// names the offending argument.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tokenscope::cli {

struct OptionSpec {
    std::string name;  // without the leading "--"
    bool takes_value = true;
};

class Arguments {
  public:
    // Parses argv[first..argc). Throws InvalidArgument for unknown options, missing values
    // and stray positional arguments.
    Arguments(const std::string& command, const std::vector<OptionSpec>& specs, int argc,
              char** argv, int first);

    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    std::optional<std::string> value(const std::string& name) const;
    std::string required(const std::string& name) const;
    // Parses a numeric option; throws InvalidArgument naming the option and the bad text.
    std::optional<double> number(const std::string& name) const;

  private:
    std::string command_;
    std::set<std::string> flags_;
    std::map<std::string, std::string> values_;
};

}  // namespace tokenscope::cli
