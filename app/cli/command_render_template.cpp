// `tokenscope-cli render-template`: renders a chat template (a .jinja file, or the one inside a
// GGUF) with a JSON context, exactly as the app would, and prints the text with nothing added.
// It is how the template engine is compared with Python's jinja2 (tests/tokenizer/
// compare_with_jinja2.py) and how a user sees what a model's template makes of a conversation.
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "jinja/json.h"
#include "jinja/template.h"
#include "util/error.h"

namespace tokenscope::cli {

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(fmt::format("{}: cannot open: {}", path, system_error_text(errno)));
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// "YYYY-MM-DD" as local midnight, what Python's datetime(Y, M, D) formats to.
std::chrono::system_clock::time_point parse_date(const std::string& text) {
    std::tm t{};
    if (std::sscanf(text.c_str(), "%d-%d-%d", &t.tm_year, &t.tm_mon, &t.tm_mday) != 3 || t.tm_mon < 1 ||
        t.tm_mon > 12 || t.tm_mday < 1 || t.tm_mday > 31)
        throw InvalidArgument(fmt::format("--date: '{}' is not YYYY-MM-DD", text));
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    t.tm_isdst = -1;
    return std::chrono::system_clock::from_time_t(std::mktime(&t));
}

}  // namespace

int run_render_template(int argc, char** argv, int first) {
    const Arguments args("render-template", {{"template"}, {"model"}, {"context"}, {"date"}}, argc, argv, first);
    std::string source;
    if (auto path = args.value("template")) {
        source = read_file(*path);
    } else if (auto model = args.value("model")) {
        const auto file = gguf::File::open(*model);
        if (!file.find("tokenizer.chat_template"))
            throw InvalidArgument(fmt::format("{}: no tokenizer.chat_template in this file", *model));
        source = file.optional_string("tokenizer.chat_template", "");
    } else {
        throw InvalidArgument("render-template needs --template FILE.jinja or --model FILE.gguf");
    }
    const std::string context_path = args.required("context");
    const jinja::Value context = jinja::parse_json(read_file(context_path));
    if (!context.is_object()) throw InvalidArgument(fmt::format("{}: the context must be a JSON object", context_path));
    jinja::RenderOptions options;
    if (auto date = args.value("date")) options.now = parse_date(*date);
    const std::string text = jinja::Template(source).render(*context.object, options);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace tokenscope::cli
