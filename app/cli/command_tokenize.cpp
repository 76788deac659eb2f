// `tokenscope-cli tokenize`: the token ids (and pieces) the model's tokenizer gives a text.
#include <cstdio>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

int run_tokenize(int argc, char** argv, int first) {
    const Arguments args(
        "tokenize",
        {{"model"}, {"text"}, {"bos", false}, {"parse-special", false}, {"json", false}}, argc,
        argv, first);
    const std::string path = args.required("model");
    const std::string text = args.required("text");
    const gguf::File file = gguf::File::open(path);
    const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_gguf(file);
    tokenizer::EncodeOptions options;
    options.add_bos = args.flag("bos");
    options.parse_special = args.flag("parse-special");
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
    std::string line;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
    return 0;
}

}  // namespace tokenscope::cli
