#include "tokenizer/trained_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sentencepiece_trainer.h>

#include "tokenizer/model_proto.h"
#include "util/test_paths.h"

namespace tokenscope::test {

namespace {

TrainedTokenizer train() {
    TrainedTokenizer result;
    std::string inputs;
    for (const char* name : {"prose.txt", "code.txt", "multilingual.txt"}) {
        const std::string path = source_file(std::string("resources/corpus/") + name);
        if (!std::filesystem::exists(path)) {
            result.error = "corpus file " + path + " is missing";
            return result;
        }
        inputs += (inputs.empty() ? "" : ",") + path;
    }
    const std::string prefix = scratch_dir() + "/trained";
    // Settings mirror the Llama / Gemma tokenizers: BPE, byte fallback, identity
    // normalisation, whitespace kept as is, digits split. One thread and no shuffling keep
    // the result identical from run to run.
    const std::string args =
        "--input=" + inputs + " --model_prefix=" + prefix +
        " --model_type=bpe --vocab_size=" + std::to_string(kTrainedVocabSize) +
        " --byte_fallback=true --character_coverage=0.9995 --split_digits=true"
        " --normalization_rule_name=identity --remove_extra_whitespaces=false"
        " --allow_whitespace_only_pieces=true --add_dummy_prefix=true"
        " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=3"
        " --control_symbols=<start_of_turn>,<end_of_turn>"
        " --hard_vocab_limit=false --num_threads=1 --shuffle_input_sentence=false"
        " --minloglevel=2";
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    if (!status.ok()) {
        result.error = "sentencepiece training failed: " + status.ToString();
        return result;
    }
    result.model_path = prefix + ".model";
    return result;
}

}  // namespace

const TrainedTokenizer& trained_tokenizer() {
    static const TrainedTokenizer result = train();
    return result;
}

tokenizer::Vocabulary trained_vocabulary() {
    const auto& trained = trained_tokenizer();
    if (trained.model_path.empty()) throw std::runtime_error(trained.error);
    std::ifstream in(trained.model_path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return tokenizer::parse_model_proto(bytes.str(), trained.model_path);
}

}  // namespace tokenscope::test
