#include "arguments.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace tokenscope::cli {

Arguments::Arguments(const std::string& command, const std::vector<OptionSpec>& specs, int argc,
                     char** argv, int first)
    : command_(command) {
    for (int i = first; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
            throw InvalidArgument("'" + command + "': unexpected argument '" + arg + "'");
        }
        std::string name = arg.substr(2);
        std::optional<std::string> inline_value;
        if (auto eq = name.find('='); eq != std::string::npos) {
            inline_value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        const OptionSpec* spec = nullptr;
        for (const auto& s : specs) {
            if (s.name == name) spec = &s;
        }
        if (!spec) {
            std::string known;
            for (const auto& s : specs) known += (known.empty() ? "--" : ", --") + s.name;
            throw InvalidArgument("'" + command + "': unknown option '--" + name +
                                  "' (accepted: " + known + ")");
        }
        if (!spec->takes_value) {
            if (inline_value) {
                throw InvalidArgument("'" + command + "': option '--" + name + "' takes no value");
            }
            flags_.insert(name);
            continue;
        }
        if (inline_value) {
            values_[name] = *inline_value;
        } else if (i + 1 < argc) {
            values_[name] = argv[++i];
        } else {
            throw InvalidArgument("'" + command + "': option '--" + name + "' needs a value");
        }
    }
}

std::optional<std::string> Arguments::value(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Arguments::required(const std::string& name) const {
    auto v = value(name);
    if (!v) throw InvalidArgument("'" + command_ + "': missing required option '--" + name + "'");
    return *v;
}

std::optional<double> Arguments::number(const std::string& name) const {
    auto v = value(name);
    if (!v) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const double parsed = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || errno != 0 || !std::isfinite(parsed)) {
        throw InvalidArgument("'" + command_ + "': option '--" + name +
                              "' expects a number, got '" + *v + "'");
    }
    return parsed;
}

}  // namespace tokenscope::cli
