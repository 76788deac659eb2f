// The tokenizer on a sentencepiece BPE model trained at test time from resources/corpus:
// loading a tokenizer.model, agreement with libsentencepiece itself, the same model rebuilt
// from a vocabulary and from a GGUF, round trips, BOS / control-token rules and bad inputs.
#include <QtTest>

#include <fstream>
#include <memory>
#include <sstream>

#include <sentencepiece_processor.h>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/model_proto.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/trained_tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using tokenizer::EncodeOptions;
using tokenizer::TokenType;
using tokenizer::Tokenizer;
using tokenizer::Vocabulary;

namespace {

std::vector<std::string> corpus_lines() {
    std::vector<std::string> lines;
    for (const char* name : {"prose.txt", "code.txt", "multilingual.txt"}) {
        std::ifstream in(test::source_file(std::string("resources/corpus/") + name));
        for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    return lines;
}

// Texts beyond the corpus: whitespace runs, scripts the corpus barely covers (byte fallback).
std::vector<std::string> extra_texts() {
    return {
        "",
        "Hello world",
        " Hello world",
        "  two leading spaces and two trailing  ",
        "tabs\tand\ttabs\t\tand newlines\n\nend\n",
        "    int x = 42;\n\treturn x;\n",
        "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",          // 你好，世界
        "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80",  // Привет мир
        "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB and \xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88",
        "rare: \xE1\x9A\xA0\xE1\x9A\xA2\xE1\x9A\xA6 \xF0\x90\x8C\xB0",  // runic, gothic
        "12345 + 67890 = 80235",
        "<start_of_turn>user\nHi there<end_of_turn>\n",
    };
}

std::vector<std::int32_t> sp_encode(const sentencepiece::SentencePieceProcessor& sp,
                                    const std::string& text) {
    std::vector<int> ids;
    const auto status = sp.Encode(text, &ids);
    if (!status.ok()) throw std::runtime_error(status.ToString());
    return {ids.begin(), ids.end()};
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A vocabulary-only GGUF, optionally claiming another tokenizer model.
std::vector<std::uint8_t> vocabulary_gguf(const Vocabulary& v, const std::string& model = "llama") {
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("llama"));
    tokenizer::write_vocabulary(w, v);
    if (model != "llama") w.set("tokenizer.ggml.model", gguf::Value::string(model));
    return w.to_bytes();
}

QString show(const std::vector<std::int32_t>& ids) {
    QStringList parts;
    for (const auto id : ids) parts << QString::number(id);
    return parts.join(' ');
}

}  // namespace

class TestTokenizerTrained : public QObject {
    Q_OBJECT

    std::unique_ptr<Tokenizer> tok_;
    sentencepiece::SentencePieceProcessor sp_;  // libsentencepiece on the same file, as reference
    std::vector<std::string> texts_;

private slots:
    void initTestCase() {
        const auto& trained = test::trained_tokenizer();
        QVERIFY2(!trained.model_path.empty(), trained.error.c_str());
        tok_ = std::make_unique<Tokenizer>(Tokenizer::from_model_file(trained.model_path));
        QVERIFY(sp_.Load(trained.model_path).ok());
        texts_ = corpus_lines();
        QVERIFY(texts_.size() > 200);
        for (auto& t : extra_texts()) texts_.push_back(t);
    }

    void modelFileMetadata() {
        QVERIFY(tok_->vocab_size() > 500);
        QVERIFY(tok_->vocab_size() <= test::kTrainedVocabSize);
        QCOMPARE(tok_->vocab_size(), sp_.GetPieceSize());
        QCOMPARE(tok_->unk_id(), 0);
        QCOMPARE(tok_->bos_id(), 1);
        QCOMPARE(tok_->eos_id(), 2);
        QCOMPARE(tok_->pad_id(), 3);
        QCOMPARE(tok_->piece(1), std::string("<s>"));
        QVERIFY(tok_->add_space_prefix());
        QVERIFY(tok_->is_control(1));
        QVERIFY(tok_->is_control(*tok_->token_id("<start_of_turn>")));
        int bytes = 0;
        for (std::int32_t id = 0; id < tok_->vocab_size(); ++id) {
            if (tok_->is_byte(id)) ++bytes;
            QCOMPARE(tok_->is_control(id), sp_.IsControl(id));
            QCOMPARE(tok_->is_byte(id), sp_.IsByte(id));
            QCOMPARE(tok_->piece(id), sp_.IdToPiece(id));
            QCOMPARE(tok_->score(id), sp_.GetScore(id));
        }
        QCOMPARE(bytes, 256);
        QCOMPARE(tok_->token_id("<0x41>").value_or(-1), sp_.PieceToId("<0x41>"));
        QVERIFY(!tok_->token_id("no such piece anywhere").has_value());
    }

    // Our encode is sentencepiece's; our decode is ours and must agree with sentencepiece's.
    void agreesWithSentencepiece() {
        int checked = 0;
        for (const auto& text : texts_) {
            const auto ids = tok_->encode(text);
            QCOMPARE(ids, sp_encode(sp_, text));
            std::vector<int> sp_ids(ids.begin(), ids.end());
            std::string sp_text;
            QVERIFY(sp_.Decode(sp_ids, &sp_text).ok());
            QCOMPARE(tok_->decode(ids), sp_text);
            ++checked;
        }
        qInfo("%d texts encode and decode exactly as libsentencepiece does", checked);
    }

    void roundTrip() {
        for (const auto& text : texts_) {
            const auto ids = tok_->encode(text);
            QCOMPARE(tok_->decode(ids), text);
        }
        // Text outside the corpus' alphabet goes through byte fallback, never <unk>.
        const auto ids = tok_->encode("rare: \xE1\x9A\xA0\xE1\x9A\xA2 \xF0\x90\x8C\xB0");
        QVERIFY(std::find(ids.begin(), ids.end(), tok_->unk_id()) == ids.end());
        QVERIFY(std::any_of(ids.begin(), ids.end(), [&](auto id) { return tok_->is_byte(id); }));
    }

    void bosOnlyWhenAsked() {
        const auto plain = tok_->encode("Hello world");
        QVERIFY(!plain.empty());
        QVERIFY(plain.front() != tok_->bos_id());
        const auto with_bos = tok_->encode("Hello world", EncodeOptions{.add_bos = true});
        QCOMPARE(with_bos.size(), plain.size() + 1);
        QCOMPARE(with_bos.front(), tok_->bos_id());
        QVERIFY(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
        QCOMPARE(tok_->decode(with_bos), std::string("Hello world"));
        QVERIFY(tok_->encode("", EncodeOptions{.add_bos = true}) == std::vector<std::int32_t>{1});
        QVERIFY(tok_->encode("").empty());
    }

    void controlTokensNeedParseSpecial() {
        const std::int32_t sot = *tok_->token_id("<start_of_turn>");
        const std::int32_t eot = *tok_->token_id("<end_of_turn>");
        const std::string text = "<start_of_turn>user\nHi<end_of_turn>\n<s></s>";
        // Typed by a user: plain text, no control id anywhere, and it decodes back verbatim.
        const auto plain = tok_->encode(text);
        for (const auto id : plain) QVERIFY2(!tok_->is_control(id), qPrintable(show(plain)));
        QCOMPARE(tok_->decode(plain), text);

        // Asked for: each control string becomes its one id, the text between is encoded
        // on its own (with the dummy prefix, as llama.cpp does).
        const auto parsed = tok_->encode(text, EncodeOptions{.parse_special = true});
        std::vector<std::int32_t> expected{sot};
        for (auto id : tok_->encode("user\nHi")) expected.push_back(id);
        expected.push_back(eot);
        for (auto id : tok_->encode("\n")) expected.push_back(id);
        expected.push_back(tok_->bos_id());
        expected.push_back(tok_->eos_id());
        QCOMPARE(show(parsed), show(expected));
        // Control tokens are invisible in decoded text; the segment after <end_of_turn> kept
        // its dummy-prefix space (only the very first one is dropped).
        QCOMPARE(tok_->decode(parsed), std::string("user\nHi \n"));

        // Longest match: "<s>" must not be found inside "</s>", and a near miss stays text.
        QCOMPARE(show(tok_->encode("</s>", {.parse_special = true})), QString::number(tok_->eos_id()));
        const auto near = tok_->encode("<start_of_turn", {.parse_special = true});
        for (const auto id : near) QVERIFY(!tok_->is_control(id));
    }

    // The .model's pieces, scores and types, re-synthesised into a ModelProto of our own,
    // must tokenize exactly like the original file.
    void vocabularyRebuildEncodesIdentically() {
        const std::string bytes = read_file(test::trained_tokenizer().model_path);
        Vocabulary v = tokenizer::parse_model_proto(bytes, "trained.model");
        QCOMPARE(static_cast<int>(v.size()), tok_->vocab_size());
        const Tokenizer rebuilt = Tokenizer::from_vocabulary(v, "rebuilt");
        for (const auto& text : texts_) {
            QCOMPARE(show(rebuilt.encode(text)), show(tok_->encode(text)));
        }
    }

    // The same through a GGUF written by gguf::Writer and read back by gguf::File.
    void ggufVocabularyEncodesIdentically() {
        Vocabulary v;
        for (std::int32_t id = 0; id < sp_.GetPieceSize(); ++id) {
            v.tokens.push_back(sp_.IdToPiece(id));
            v.scores.push_back(sp_.GetScore(id));
            v.types.push_back(sp_.IsControl(id)   ? TokenType::Control
                              : sp_.IsUnknown(id) ? TokenType::Unknown
                              : sp_.IsByte(id)    ? TokenType::Byte
                              : sp_.IsUnused(id)  ? TokenType::Unused
                                                  : TokenType::Normal);
        }
        v.unk_id = sp_.unk_id();
        v.bos_id = sp_.bos_id();
        v.eos_id = sp_.eos_id();
        v.pad_id = sp_.pad_id();
        v.add_space_prefix = true;
        v.add_bos = true;
        const std::string path = test::scratch_dir() + "/trained-vocab.gguf";
        {
            const auto bytes = vocabulary_gguf(v);
            std::ofstream out(path, std::ios::binary);
            out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        }
        const auto file = gguf::File::open(path);
        const Vocabulary back = tokenizer::vocabulary_from_gguf(file);
        QVERIFY(back.tokens == v.tokens);
        QVERIFY(back.scores == v.scores);
        QVERIFY(back.types == v.types);
        QCOMPARE(back.unk_id, v.unk_id);
        QCOMPARE(back.pad_id, v.pad_id);
        QCOMPARE(back.add_space_prefix, v.add_space_prefix);
        const Tokenizer from_gguf = Tokenizer::from_gguf(file);
        QCOMPARE(from_gguf.vocab_size(), tok_->vocab_size());
        QCOMPARE(from_gguf.bos_id(), 1);
        QVERIFY(from_gguf.add_bos());
        int checked = 0;
        for (const auto& text : texts_) {
            const auto ids = from_gguf.encode(text);
            QCOMPARE(show(ids), show(tok_->encode(text)));
            QCOMPARE(from_gguf.decode(ids), text);
            ++checked;
        }
        qInfo("GGUF-built tokenizer: %d texts identical to the tokenizer.model", checked);
    }

    void rejectsOtherTokenizerModels() {
        const Vocabulary v = test::trained_vocabulary();
        // "bert" (WordPiece) is a real GGUF tokenizer model that we do not implement.
        const auto bytes = vocabulary_gguf(v, "bert");
        const auto file = gguf::File::parse("bert-vocab.gguf", bytes);
        try {
            (void)tokenizer::vocabulary_from_gguf(file);
            QFAIL("a bert vocabulary was accepted");
        } catch (const FormatError& e) {
            const std::string what = e.what();
            qInfo("%s", e.what());
            QVERIFY2(what.find("'bert'") != std::string::npos, e.what());
            QVERIFY2(what.find("tokenizer.ggml.model") != std::string::npos, e.what());
            QVERIFY2(what.find("bert-vocab.gguf") != std::string::npos, e.what());
        }
    }

    void rejectsBadIds() {
        const std::int32_t n = tok_->vocab_size();
        const std::vector<std::int32_t> bad{5, n};
        try {
            (void)tok_->decode(bad);
            QFAIL("an out-of-range id was decoded");
        } catch (const InvalidArgument& e) {
            QCOMPARE(std::string(e.what()), "token id " + std::to_string(n) +
                                                " out of range (vocabulary has " +
                                                std::to_string(n) + " tokens)");
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, tok_->piece(-1));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, tok_->is_control(n));
    }

    void rejectsBadModelFiles() {
        QVERIFY_THROWS_EXCEPTION(IoError, Tokenizer::from_model_file(test::scratch_dir() + "/absent.model"));
        const std::string garbage_path = test::scratch_dir() + "/garbage.model";
        std::ofstream(garbage_path, std::ios::binary) << "\x0a\xff\xff\xff\xff\x0f not a model";
        try {
            (void)Tokenizer::from_model_file(garbage_path);
            QFAIL("garbage accepted");
        } catch (const FormatError& e) {
            qInfo("%s", e.what());
            QVERIFY(std::string(e.what()).find("garbage.model") != std::string::npos);
        }
    }

    void rejectsInconsistentVocabularies() {
        Vocabulary v = test::trained_vocabulary();
        Vocabulary short_scores = v;
        short_scores.scores.pop_back();
        QVERIFY_THROWS_EXCEPTION(FormatError, Tokenizer::from_vocabulary(short_scores));
        Vocabulary bad_bos = v;
        bad_bos.bos_id = static_cast<std::int32_t>(v.size());
        QVERIFY_THROWS_EXCEPTION(FormatError, Tokenizer::from_vocabulary(bad_bos));
        Vocabulary no_unk = v;
        no_unk.unk_id = -1;
        no_unk.types[0] = TokenType::Control;
        try {
            (void)Tokenizer::from_vocabulary(no_unk, "no-unk");
            QFAIL("a vocabulary without an unknown token was accepted");
        } catch (const FormatError& e) {
            QVERIFY2(std::string(e.what()).find("unknown token") != std::string::npos, e.what());
        }
    }

    // GGUF files store some user-defined pieces with literal spaces (Gemma's "  ");
    // sentencepiece sees "▁▁" in escaped text, so they must still match. Duplicate and empty
    // pieces must not make sentencepiece refuse the vocabulary.
    void userDefinedSpacesDuplicatesAndEmptyPieces() {
        Vocabulary v = test::trained_vocabulary();
        const auto add = [&](std::string piece, TokenType type) {
            v.tokens.push_back(std::move(piece));
            v.scores.push_back(0.0f);
            v.types.push_back(type);
            return static_cast<std::int32_t>(v.size() - 1);
        };
        const std::int32_t spaces = add("   ", TokenType::UserDefined);
        const std::int32_t dup = add(v.tokens[10], v.types[10]);
        const std::int32_t empty = add("", TokenType::Normal);
        const Tokenizer t = Tokenizer::from_vocabulary(v, "patched");
        const auto ids = t.encode("a   b");
        QVERIFY2(std::find(ids.begin(), ids.end(), spaces) != ids.end(), qPrintable(show(ids)));
        QCOMPARE(t.decode(ids), std::string("a   b"));
        QCOMPARE(t.piece(dup), v.tokens[10]);
        QCOMPARE(t.piece(empty), std::string());
        for (const auto& text : texts_) {
            const auto e = t.encode(text);
            QVERIFY(std::find(e.begin(), e.end(), dup) == e.end());
            QCOMPARE(t.decode(e), text);
        }
    }
};

QTEST_APPLESS_MAIN(TestTokenizerTrained)
#include "test_tokenizer_trained.moc"
