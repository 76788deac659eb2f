#pragma once
// sentencepiece's ModelProto in protobuf wire format, written and read by hand: Debian's
// libsentencepiece-dev ships no protobuf headers, and we only need a handful of fields.
// Field numbers follow the public sentencepiece_model.proto:
//   ModelProto      pieces=1 (SentencePiece: piece=1, score=2, type=3), trainer_spec=2,
//                   normalizer_spec=3
//   TrainerSpec     model_type=3 (BPE=2), vocab_size=4, allow_whitespace_only_pieces=26,
//                   byte_fallback=35, unk_id=40, bos_id=41, eos_id=42, pad_id=43,
//                   unk_piece=45, bos_piece=46, eos_piece=47, pad_piece=48
//   NormalizerSpec  name=1, add_dummy_prefix=3, remove_extra_whitespaces=4,
//                   escape_whitespaces=5
#include <string>
#include <string_view>

#include "tokenizer/vocabulary.h"

namespace tokenscope::tokenizer {

// Serialises a BPE ModelProto that makes sentencepiece tokenize exactly as the vocabulary's
// model did: identity normalisation, whitespace kept as is, a dummy prefix only when
// add_space_prefix. The pieces are adapted where sentencepiece would otherwise reject or
// mis-match them (see the .cpp); token ids never change. Throws FormatError (prefixed with
// `origin`) when no unknown token can be identified.
std::string build_model_proto(const Vocabulary& vocabulary, const std::string& origin);

// Reads the fields above back from a serialized ModelProto (a tokenizer.model file).
// Absent fields take the proto's defaults. Throws FormatError naming `origin` and the byte
// offset on malformed input.
Vocabulary parse_model_proto(std::string_view bytes, const std::string& origin);

}  // namespace tokenscope::tokenizer
