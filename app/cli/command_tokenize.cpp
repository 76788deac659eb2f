// `tokenscope-cli tokenize`: the token ids (and pieces) the model's tokenizer gives a text, or
// (--inp FILE) the ids of every string of a llama.cpp test-vector file, one line each, in the
// format of its .out file, so other tokenizers can be compared with ours in one run.
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

std::string ids_line(const std::vector<std::int32_t>& ids) {
    std::string line;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    return line;
}

// Strings separated by "\n__ggml_vocab_test__\n" (each followed by it, as llama.cpp writes).
int tokenize_vectors(const tokenizer::Tokenizer& tokenizer, const std::string& path,
                     const tokenizer::EncodeOptions& options) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(fmt::format("{}: cannot open: {}", path, system_error_text(errno)));
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string inp = buffer.str();
    const std::string separator = "\n__ggml_vocab_test__\n";
    std::size_t pos = 0;
    for (std::size_t next; (next = inp.find(separator, pos)) != std::string::npos;
         pos = next + separator.size())
        std::printf("%s\n",
                    ids_line(tokenizer.encode(inp.substr(pos, next - pos), options)).c_str());
    if (pos != inp.size())
        throw InvalidArgument(fmt::format(
            "{}: {} bytes after the last '__ggml_vocab_test__' separator", path, inp.size() - pos));
    return 0;
}

}  // namespace

int run_tokenize(int argc, char** argv, int first) {
    const Arguments args(
        "tokenize",
        {{"model"}, {"text"}, {"inp"}, {"bos", false}, {"parse-special", false}, {"json", false}},
        argc, argv, first);
    const std::string path = args.required("model");
    const auto inp = args.value("inp");
    if (inp && args.value("text"))
        throw InvalidArgument("tokenize: give --text or --inp, not both");
    // Arguments first, so a missing --text is reported before the model is read.
    const std::string text = inp ? std::string() : args.required("text");
    const gguf::File file = gguf::File::open(path);
    const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_gguf(file);
    tokenizer::EncodeOptions options;
    options.add_bos = args.flag("bos");
    options.parse_special = args.flag("parse-special");
    if (inp) return tokenize_vectors(tokenizer, *inp, options);
    const std::vector<std::int32_t> ids = tokenizer.encode(text, options);

    if (args.flag("json")) {
        JsonWriter json;
        json.begin_object();
        json.key("ids").begin_array();
        for (auto id : ids) json.value(static_cast<std::int64_t>(id));
        json.end_array();
        json.key("pieces").begin_array();
        for (auto id : ids) json.value(tokenizer.piece(id));
        json.end_array();
        json.key("count").value(static_cast<std::uint64_t>(ids.size()));
        json.end_object();
        std::printf("%s\n", json.str().c_str());
        return 0;
    }
    std::printf("%s\n", ids_line(ids).c_str());
    return 0;
}

}  // namespace tokenscope::cli
