// StreamingDetokenizer: only complete, well-formed UTF-8 ever leaves push(); characters split
// over byte-fallback tokens are joined; hopeless bytes become U+FFFD; and the concatenated
// stream equals Tokenizer::decode of the same ids. Uses the tokenizer trained at test time.
#include <QtTest>

#include <memory>
#include <random>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/trained_tokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

using namespace tokenscope;
using tokenizer::StreamingDetokenizer;
using tokenizer::Tokenizer;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

std::string stream(const Tokenizer& tok, const std::vector<std::int32_t>& ids,
                   bool* all_valid = nullptr) {
    StreamingDetokenizer detok(tok);
    std::string out;
    for (const auto id : ids) {
        const std::string piece = detok.push(id);
        if (all_valid && !utf8::is_valid(piece)) *all_valid = false;
        out += piece;
    }
    const std::string rest = detok.flush();
    if (all_valid && !utf8::is_valid(rest)) *all_valid = false;
    return out + rest;
}

}  // namespace

class TestTokenizerDetokenizer : public QObject {
    Q_OBJECT

    std::unique_ptr<Tokenizer> tok_;

    std::int32_t byte_id(unsigned value) const {
        char piece[8];
        std::snprintf(piece, sizeof piece, "<0x%02X>", value);
        const auto id = tok_->token_id(piece);
        if (!id) throw std::runtime_error(std::string("no byte piece ") + piece);
        return *id;
    }

private slots:
    void initTestCase() {
        const auto& trained = test::trained_tokenizer();
        QVERIFY2(!trained.model_path.empty(), trained.error.c_str());
        tok_ = std::make_unique<Tokenizer>(Tokenizer::from_model_file(trained.model_path));
    }

    void holdsSplitCharacters() {
        StreamingDetokenizer d(*tok_);
        // U+4F60 你 = E4 BD A0: nothing until the third byte.
        QCOMPARE(d.push(byte_id(0xE4)), std::string());
        QCOMPARE(d.pending_bytes(), std::size_t{1});
        QCOMPARE(d.push(byte_id(0xBD)), std::string());
        QCOMPARE(d.push(byte_id(0xA0)), std::string("\xE4\xBD\xA0"));
        QCOMPARE(d.pending_bytes(), std::size_t{0});
        // A 4-byte emoji, then plain text right after.
        for (unsigned b : {0xF0u, 0x9Fu, 0x98u}) QCOMPARE(d.push(byte_id(b)), std::string());
        QCOMPARE(d.push(byte_id(0x80)), std::string("\xF0\x9F\x98\x80"));
        QCOMPARE(d.flush(), std::string());
    }

    void replacesHopelessBytes() {
        StreamingDetokenizer d(*tok_);
        QCOMPARE(d.push(byte_id(0xFF)), kReplacement);  // never valid anywhere
        QCOMPARE(d.push(byte_id(0x80)), kReplacement);  // stray continuation byte
        QCOMPARE(d.push(byte_id(0xE4)), std::string());
        // 'A' cannot continue E4: the held byte becomes U+FFFD and 'A' follows at once.
        QCOMPARE(d.push(byte_id(0x41)), kReplacement + "A");
        // An incomplete tail at the end of the stream.
        QCOMPARE(d.push(byte_id(0xF0)), std::string());
        QCOMPARE(d.push(byte_id(0x9F)), std::string());
        QCOMPARE(d.flush(), kReplacement + kReplacement);
        QCOMPARE(d.pending_bytes(), std::size_t{0});
    }

    void leadingSpaceRule() {
        // The dummy prefix is dropped from the first visible token only, also after BOS.
        auto ids = tok_->encode("Hello world, hello again", {.add_bos = true});
        QCOMPARE(stream(*tok_, ids), std::string("Hello world, hello again"));
        StreamingDetokenizer d(*tok_);
        std::string first;
        for (auto id : ids) first += d.push(id);
        d.reset();
        std::string second;
        for (auto id : tok_->encode(" again")) second += d.push(id);
        QCOMPARE(first + d.flush(), std::string("Hello world, hello again"));
        QCOMPARE(second, std::string(" again"));
    }

    void rejectsBadIdWithoutLosingState() {
        StreamingDetokenizer d(*tok_);
        QCOMPARE(d.push(byte_id(0xE4)), std::string());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, d.push(tok_->vocab_size()));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, d.push(-1));
        QCOMPARE(d.push(byte_id(0xBD)), std::string());
        QCOMPARE(d.push(byte_id(0xA0)), std::string("\xE4\xBD\xA0"));
    }

    void textsStreamExactly() {
        for (const std::string text :
             {"plain text", "  spaced   out  ", "tabs\tand\nnewlines\n\n",
              "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
              "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
              "\xE1\x9A\xA0\xE1\x9A\xA2\xE1\x9A\xA6 \xF0\x90\x8C\xB0\xF0\x90\x8C\xB1"}) {
            const auto ids = tok_->encode(text);
            bool valid = true;
            QCOMPARE(stream(*tok_, ids, &valid), text);
            QVERIFY(valid);
        }
    }

    // Seeded random id sequences, most of them byte tokens (the hard case), some of them
    // control and ordinary tokens: every push() is valid UTF-8 and the whole stream is exactly
    // decode(), which is the sanitised concatenation.
    void randomSequences() {
        std::mt19937 rng(20240611);
        std::vector<std::int32_t> bytes, others;
        for (std::int32_t id = 0; id < tok_->vocab_size(); ++id)
            (tok_->is_byte(id) ? bytes : others).push_back(id);
        QCOMPARE(bytes.size(), std::size_t{256});
        // Lead bytes of multi-byte sequences and continuation bytes, to make near-valid runs.
        std::vector<std::int32_t> utf8_ish;
        for (unsigned b = 0x80; b <= 0xF4; ++b) utf8_ish.push_back(byte_id(b));

        int sequences = 0, pushes = 0, replaced = 0;
        for (int round = 0; round < 3000; ++round) {
            std::vector<std::int32_t> ids;
            const int length = std::uniform_int_distribution<int>(0, 24)(rng);
            const int mode = round % 3;  // 0: bytes only, 1: mostly bytes, 2: mixed
            for (int i = 0; i < length; ++i) {
                const int r = std::uniform_int_distribution<int>(0, 99)(rng);
                if (mode == 0 || (mode == 1 && r < 80) || (mode == 2 && r < 40)) {
                    const auto& pool = r % 2 ? utf8_ish : bytes;
                    ids.push_back(pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)]);
                } else {
                    ids.push_back(others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(rng)]);
                }
            }
            StreamingDetokenizer d(*tok_);
            std::string out;
            for (const auto id : ids) {
                const std::string piece = d.push(id);
                ++pushes;
                if (!utf8::is_valid(piece))
                    QFAIL(qPrintable(QString("invalid UTF-8 from push() in round %1").arg(round)));
                out += piece;
            }
            const std::string rest = d.flush();
            QVERIFY(utf8::is_valid(rest));
            out += rest;
            const std::string decoded = tok_->decode(ids);
            QVERIFY(utf8::is_valid(decoded));
            if (out != decoded) QFAIL(qPrintable(QString("round %1: stream != decode").arg(round)));
            if (out.find(kReplacement) != std::string::npos) ++replaced;
            ++sequences;
        }
        qInfo("%d random sequences (%d pushes, %d with U+FFFD): all valid, all equal to decode()",
              sequences, pushes, replaced);
    }
};

QTEST_APPLESS_MAIN(TestTokenizerDetokenizer)
#include "test_tokenizer_detokenizer.moc"
