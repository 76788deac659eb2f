#pragma once
// The small tokenizer that test fixtures use: sentencepiece BPE with byte fallback, trained at
// test time on resources/corpus/. Tiny test models take their vocabulary from it.
#include <string>

#include "tokenizer/vocabulary.h"

namespace tokenscope::test {

struct TrainedTokenizer {
    std::string model_path;  // tokenizer.model in scratch_dir(); "" when training failed
    std::string error;       // why it failed
};

// Trains once per process (later calls return the same result). Deterministic: the same
// corpus gives the same vocabulary. Control symbols <start_of_turn> and <end_of_turn> are
// included so chat templates can be tested with it.
const TrainedTokenizer& trained_tokenizer();

// The trained model's vocabulary (pieces, scores, types, special ids), ready for
// tokenizer::write_vocabulary into a test GGUF. Throws when training failed.
tokenizer::Vocabulary trained_vocabulary();

// Vocabulary size asked of the trainer.
inline constexpr int kTrainedVocabSize = 800;

}  // namespace tokenscope::test
