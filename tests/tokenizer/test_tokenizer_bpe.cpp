// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the vocabulary-only GGUFs of
// ../shared/testdata/bpe with llama.cpp's test strings, whose expected ids came from each
// model's reference Hugging Face tokenizer. Every string of every file must give exactly those
// ids and decode back to itself. Also: special-token rules, streaming of split characters, and
// one-line errors for bad vocabularies.
#include <QtTest>

#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using tokenizer::Tokenizer;
using tokenizer::TokenType;
using tokenizer::Vocabulary;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

QString show(const std::vector<std::int32_t>& ids) {
    QStringList parts;
    for (const auto id : ids) parts << QString::number(id);
    return parts.join(' ');
}

std::vector<std::string> read_texts(const std::string& path) {
    const std::string inp = read_file(path);
    const std::string separator = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (std::size_t pos = 0;;) {
        const std::size_t next = inp.find(separator, pos);
        if (next == std::string::npos) break;
        texts.push_back(inp.substr(pos, next - pos));
        pos = next + separator.size();
    }
    return texts;
}

std::vector<std::vector<std::int32_t>> read_ids(const std::string& path) {
    std::vector<std::vector<std::int32_t>> expected;
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::vector<std::int32_t> ids;
        for (std::int32_t id; fields >> id;) ids.push_back(id);
        expected.push_back(ids);
    }
    return expected;
}

std::string stream(const Tokenizer& tok, const std::vector<std::int32_t>& ids,
                   std::size_t* max_pending = nullptr) {
    tokenizer::StreamingDetokenizer d(tok);
    std::string out;
    for (const auto id : ids) {
        out += d.push(id);
        if (max_pending) *max_pending = std::max(*max_pending, d.pending_bytes());
    }
    return out + d.flush();
}

// A tiny byte-level vocabulary: the 256 byte spellings in byte order (so byte b is token b),
// then "ab", "abc", an added token and a control token, with merges "a b" and "ab c".
Vocabulary tiny_vocabulary() {
    Vocabulary v;
    v.model = tokenizer::TokenizerModel::ByteLevelBpe;
    v.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
        // GPT-2's table, written out independently of engine/tokenizer/byte_level.cpp.
        const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        static int shifted = 0;
        if (b == 0) shifted = 0;
        const int cp = self ? b : 0x100 + shifted++;
        std::string s;
        if (cp < 0x80)
            s = std::string(1, static_cast<char>(cp));
        else
            s = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
        v.tokens.push_back(s);
    }
    v.tokens.insert(v.tokens.end(), {"ab", "abc", "<tool>", "<|end|>"});
    v.scores.assign(v.tokens.size(), 0.0f);
    v.types.assign(v.tokens.size(), TokenType::Normal);
    v.types[258] = TokenType::UserDefined;
    v.types[259] = TokenType::Control;
    v.eos_id = 259;
    v.add_space_prefix = false;
    v.merges = {"a b", "ab c"};
    return v;
}

void expect_format_error(const Vocabulary& v, const std::vector<std::string>& needles) {
    try {
        (void)Tokenizer::from_vocabulary(v, "tiny.gguf");
        QFAIL("the vocabulary was accepted");
    } catch (const FormatError& e) {
        const std::string what = e.what();
        qInfo("%s", e.what());
        QVERIFY2(what.find('\n') == std::string::npos, e.what());
        for (const auto& needle : needles)
            QVERIFY2(what.find(needle) != std::string::npos,
                     qPrintable(QString::fromStdString(what + " lacks " + needle)));
    }
}

}  // namespace

class TestTokenizerBpe : public QObject {
    Q_OBJECT

    std::string dir_;

    std::unique_ptr<Tokenizer> load(const std::string& name) {
        const auto file = gguf::File::open(dir_ + "/ggml-vocab-" + name + ".gguf");
        return std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
    }

  private slots:
    void initTestCase() {
        dir_ = test::shared_testdata("bpe");
        if (dir_.empty())
            QSKIP("../shared/testdata/bpe is absent: the byte-level BPE vector tests need it");
    }

    void referenceVectors_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("pre");
        QTest::addColumn<int>("tokens");
        // Names, pre-tokenizers and sizes as ../shared/testdata/README.md lists them.
        QTest::newRow("llama-bpe") << "llama-bpe"
                                   << "llama-bpe" << 128256;
        QTest::newRow("qwen2") << "qwen2"
                               << "qwen2" << 151936;
        QTest::newRow("qwen35") << "qwen35"
                                << "qwen35" << 151936;
        QTest::newRow("gpt-2") << "gpt-2"
                               << "gpt-2" << 50257;
        QTest::newRow("deepseek-llm") << "deepseek-llm"
                                      << "deepseek-llm" << 102400;
        QTest::newRow("starcoder") << "starcoder"
                                   << "starcoder" << 49152;
        QTest::newRow("falcon") << "falcon"
                                << "falcon" << 65024;
        QTest::newRow("command-r") << "command-r"
                                   << "command-r" << 256000;
    }

    void referenceVectors() {
        QFETCH(QString, name);
        QFETCH(QString, pre);
        QFETCH(int, tokens);
        const std::string base = dir_ + "/ggml-vocab-" + name.toStdString() + ".gguf";
        const auto tok = load(name.toStdString());
        QCOMPARE(tok->vocab_size(), tokens);
        QCOMPARE(QString::fromStdString(tok->pre_tokenizer()), pre);
        QCOMPARE(tok->vocabulary().model, tokenizer::TokenizerModel::ByteLevelBpe);

        const auto texts = read_texts(base + ".inp");
        const auto expected = read_ids(base + ".out");
        QVERIFY(texts.size() >= 40);
        QCOMPARE(expected.size(), texts.size());
        int matches = 0, round_trips = 0, streamed = 0;
        for (std::size_t i = 0; i < texts.size(); ++i) {
            const auto ids = tok->encode(texts[i]);
            if (ids == expected[i])
                ++matches;
            else
                qWarning("%s vector %zu '%s': got [%s], expected [%s]", qPrintable(name), i,
                         QByteArray::fromStdString(texts[i]).toPercentEncoding(" ").constData(),
                         qPrintable(show(ids)), qPrintable(show(expected[i])));
            // Decoding the reference ids (not ours) must give the text back.
            if (tok->decode(expected[i]) == texts[i])
                ++round_trips;
            else
                qWarning("%s vector %zu does not round-trip: '%s'", qPrintable(name), i,
                         QByteArray::fromStdString(tok->decode(expected[i]))
                             .toPercentEncoding(" ")
                             .constData());
            if (stream(*tok, expected[i]) == texts[i]) ++streamed;
        }
        qInfo("%s: %d of %zu vectors give exactly the reference ids; %d round-trip; %d stream",
              qPrintable(name), matches, texts.size(), round_trips, streamed);
        QCOMPARE(matches, static_cast<int>(texts.size()));
        QCOMPARE(round_trips, static_cast<int>(texts.size()));
        QCOMPARE(streamed, static_cast<int>(texts.size()));

        // Again, now that the word cache holds every word, and after emptying it.
        int cached = 0, cleared = 0;
        for (std::size_t i = 0; i < texts.size(); ++i)
            if (tok->encode(texts[i]) == expected[i]) ++cached;
        Tokenizer::clear_thread_caches();
        for (std::size_t i = 0; i < texts.size(); ++i)
            if (tok->encode(texts[i]) == expected[i]) ++cleared;
        QCOMPARE(cached, static_cast<int>(texts.size()));
        QCOMPARE(cleared, static_cast<int>(texts.size()));
    }

    void smollmSplitsLikeStarcoder() {
        // SmolLM2's GGUFs say "smollm"; its tokenizer.json has StarCoder's pre-tokenizer (the
        // shared README says so), so the StarCoder vectors must hold under that name too.
        const std::string base = dir_ + "/ggml-vocab-starcoder.gguf";
        const auto file = gguf::File::open(base);
        Vocabulary v = tokenizer::vocabulary_from_gguf(file);
        QCOMPARE(v.pre, std::string("starcoder"));
        v.pre = "smollm";
        const Tokenizer tok = Tokenizer::from_vocabulary(std::move(v), base);
        QCOMPARE(tok.pre_tokenizer(), std::string("smollm"));
        const auto texts = read_texts(base + ".inp");
        const auto expected = read_ids(base + ".out");
        int matches = 0;
        for (std::size_t i = 0; i < texts.size(); ++i)
            if (tok.encode(texts[i]) == expected[i]) ++matches;
        QCOMPARE(matches, static_cast<int>(texts.size()));
    }

    void concurrentEncoding() {
        // One tokenizer, two threads (each with its own match state and word cache).
        const auto tok = load("qwen2");
        const std::string base = dir_ + "/ggml-vocab-qwen2.gguf";
        const auto texts = read_texts(base + ".inp");
        const auto expected = read_ids(base + ".out");
        int good[2] = {0, 0};
        const auto work = [&](int t) {
            for (int round = 0; round < 20; ++round)
                for (std::size_t i = 0; i < texts.size(); ++i)
                    if (tok->encode(texts[i]) == expected[i]) ++good[t];
        };
        std::thread a(work, 0), b(work, 1);
        a.join();
        b.join();
        QCOMPARE(good[0], static_cast<int>(20 * texts.size()));
        QCOMPARE(good[1], static_cast<int>(20 * texts.size()));
    }

    void llama3Metadata() {
        const auto tok = load("llama-bpe");
        // Llama 3's special tokens (ids from its tokenizer_config.json).
        QCOMPARE(tok->piece(128000), std::string("<|begin_of_text|>"));
        QCOMPARE(tok->bos_id(), 128000);
        QVERIFY(tok->is_control(128000));
        QVERIFY(tok->add_bos());
        QVERIFY(!tok->add_space_prefix());
        QCOMPARE(tok->token_id("\xC4\xA0world").value_or(-1), 1917);  // "Ġworld"
    }

    void controlTokensNeedParseSpecial() {
        const auto tok = load("llama-bpe");
        const std::string text = "<|begin_of_text|>hi<|eot_id|>";
        const auto plain = tok->encode(text);
        for (const auto id : plain) QVERIFY2(!tok->is_control(id), qPrintable(show(plain)));
        QCOMPARE(tok->decode(plain), text);
        const auto parsed = tok->encode(text, {.parse_special = true});
        QCOMPARE(show(parsed), QString("128000 6151 128009"));  // "hi" is 6151 in Llama 3
        QCOMPARE(tok->decode(parsed), std::string("hi"));       // control tokens are invisible
        QCOMPARE(show(tok->encode("hi", {.add_bos = true})), QString("128000 6151"));
    }

    void streamsSplitCharacters() {
        const auto tok = load("gpt-2");
        // GPT-2 spells these characters with tokens that each hold part of a UTF-8 sequence.
        for (const std::string text :
             {"\xF0\x9F\xA6\x99 llama", "\xE4\xBD\xA0\xE5\xA5\xBD", "caf\xC3\xA9 \xE2\x82\xAC"}) {
            const auto ids = tok->encode(text);
            std::size_t max_pending = 0;
            QCOMPARE(stream(*tok, ids, &max_pending), text);
            QCOMPARE(tok->decode(ids), text);
            if (text.front() == '\xF0') QVERIFY2(max_pending > 0, qPrintable(show(ids)));
        }
        // A partial character alone is held back, then comes out as U+FFFD (one per byte, as
        // utf8::sanitize replaces them) at flush.
        const auto ids = tok->encode("\xF0\x9F\xA6\x99");
        QVERIFY(ids.size() > 1);
        tokenizer::StreamingDetokenizer d(*tok);
        QCOMPARE(d.push(ids.front()), std::string());
        QVERIFY(d.pending_bytes() > 0);
        const std::string rest = d.flush();
        QVERIFY(!rest.empty());
        QCOMPARE(QString::fromStdString(rest).remove(QChar(0xFFFD)), QString());
    }

    void invalidUtf8IsReplaced() {
        const auto tok = load("gpt-2");
        const auto ids =
            tok->encode(std::string("a\xFF"
                                    "b"));
        QCOMPARE(tok->decode(ids), std::string("a\xEF\xBF\xBD"
                                               "b"));
    }

    void addedTokensMatchWithoutParseSpecial() {
        const Tokenizer tok = Tokenizer::from_vocabulary(tiny_vocabulary(), "tiny.gguf");
        QCOMPARE(show(tok.encode("abc")), QString("257"));
        QCOMPARE(show(tok.encode("ab")), QString("256"));
        QCOMPARE(show(tok.encode("abd")), QString("256 100"));  // 'd' is byte 0x64
        // The user-defined token is matched in plain text, the control token is not.
        QCOMPARE(show(tok.encode("abc<tool>")), QString("257 258"));
        const auto plain = tok.encode("<|end|>");
        QVERIFY(std::find(plain.begin(), plain.end(), 259) == plain.end());
        QCOMPARE(show(tok.encode("<|end|>", {.parse_special = true})), QString("259"));
        QCOMPARE(tok.decode(tok.encode("x<tool>y")), std::string("x<tool>y"));
    }

    void spacePrefix() {
        Vocabulary v = tiny_vocabulary();
        v.add_space_prefix = true;
        const Tokenizer tok = Tokenizer::from_vocabulary(v, "tiny.gguf");
        QCOMPARE(show(tok.encode("abc")), QString("32 257"));  // ' ' is byte 0x20, its own token
        QCOMPARE(tok.decode(tok.encode("abc")), std::string("abc"));
    }

    void badMerges() {
        Vocabulary v = tiny_vocabulary();
        v.merges = {"a b", "abc"};
        expect_format_error(v, {"tiny.gguf", "tokenizer.ggml.merges", "entry 1", "'abc'"});
        v.merges = {"a b", "ab  c"};
        expect_format_error(v, {"tokenizer.ggml.merges", "entry 1"});
        v.merges = {"a b", "ab zz"};
        expect_format_error(v,
                            {"tokenizer.ggml.merges", "entry 1", "'zz' is not in the vocabulary"});
        v.merges = {"b c"};  // both pieces exist, "bc" does not
        expect_format_error(v, {"entry 0", "'bc' is not in the vocabulary"});
    }

    void unknownPreTokenizer() {
        Vocabulary v = tiny_vocabulary();
        v.pre = "my-new-model";
        expect_format_error(v, {"tiny.gguf", "tokenizer.ggml.pre", "'my-new-model'"});
    }

    void ggufRoundTripAndMissingPre() {
        gguf::Writer w;
        tokenizer::write_vocabulary(w, tiny_vocabulary());
        const auto bytes = w.to_bytes();
        const auto file = gguf::File::parse("tiny.gguf", bytes);
        const Tokenizer tok = Tokenizer::from_gguf(file);
        QCOMPARE(show(tok.encode("abc")), QString("257"));
        QVERIFY(!tok.add_bos());

        gguf::Writer no_pre;
        Vocabulary v = tiny_vocabulary();
        tokenizer::write_vocabulary(no_pre, v);
        gguf::Writer stripped;
        const auto all = gguf::File::parse("tiny.gguf", no_pre.to_bytes());
        for (const auto& [key, value] : all.metadata())
            if (key != "tokenizer.ggml.pre") stripped.set(key, value);
        const auto stripped_bytes = stripped.to_bytes();
        const auto file2 = gguf::File::parse("no-pre.gguf", stripped_bytes);
        try {
            (void)Tokenizer::from_gguf(file2);
            QFAIL("a BPE vocabulary without tokenizer.ggml.pre was accepted");
        } catch (const FormatError& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("no-pre.gguf") != std::string::npos, e.what());
            QVERIFY2(what.find("tokenizer.ggml.pre") != std::string::npos, e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestTokenizerBpe)
#include "test_tokenizer_bpe.moc"
