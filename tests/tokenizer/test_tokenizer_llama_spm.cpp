// The Llama / Llama 2 sentencepiece vocabulary from ../shared/testdata/llama-spm, built from
// its GGUF: all 46 of llama.cpp's test strings must give exactly the reference ids.
#include <QtTest>

#include <fstream>
#include <memory>
#include <sstream>

#include "gguf/file.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;

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

}  // namespace

class TestTokenizerLlamaSpm : public QObject {
    Q_OBJECT

    std::string gguf_path_;
    std::unique_ptr<gguf::File> file_;
    std::unique_ptr<Tokenizer> tok_;

private slots:
    void initTestCase() {
        gguf_path_ = test::shared_testdata("llama-spm/ggml-vocab-llama-spm.gguf");
        if (gguf_path_.empty())
            QSKIP("../shared/testdata/llama-spm is absent: the llama-spm vocabulary tests need it");
        file_ = std::make_unique<gguf::File>(gguf::File::open(gguf_path_));
        tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
    }

    void metadata() {
        QCOMPARE(tok_->vocab_size(), 32000);
        QCOMPARE(tok_->bos_id(), 1);
        QCOMPARE(tok_->eos_id(), 2);
        QCOMPARE(tok_->unk_id(), 0);
        QVERIFY(tok_->add_bos());
        QVERIFY(tok_->add_space_prefix());
        QCOMPARE(tok_->piece(1), std::string("<s>"));
        QVERIFY(tok_->is_control(1));
        QVERIFY(tok_->is_byte(3));
        QCOMPARE(tok_->token_id("\xE2\x96\x81Hello").value_or(-1), 15043);
    }

    void referenceVectors() {
        const std::string inp = read_file(gguf_path_ + ".inp");
        const std::string out = read_file(gguf_path_ + ".out");
        std::vector<std::string> texts;
        const std::string separator = "\n__ggml_vocab_test__\n";
        for (std::size_t pos = 0;;) {
            const std::size_t next = inp.find(separator, pos);
            if (next == std::string::npos) {
                QVERIFY2(pos == inp.size(), "text after the last separator");
                break;
            }
            texts.push_back(inp.substr(pos, next - pos));
            pos = next + separator.size();
        }
        std::vector<std::vector<std::int32_t>> expected;
        std::istringstream lines(out);
        for (std::string line; std::getline(lines, line);) {
            std::istringstream fields(line);
            std::vector<std::int32_t> ids;
            for (std::int32_t id; fields >> id;) ids.push_back(id);
            expected.push_back(ids);
        }
        QCOMPARE(texts.size(), std::size_t{46});
        QCOMPARE(expected.size(), texts.size());

        int matches = 0, round_trips = 0;
        for (std::size_t i = 0; i < texts.size(); ++i) {
            const auto ids = tok_->encode(texts[i]);
            if (ids == expected[i]) {
                ++matches;
            } else {
                qWarning("vector %zu %s: got [%s], expected [%s]", i,
                         QByteArray::fromStdString(texts[i]).toPercentEncoding(" ").constData(),
                         qPrintable(show(ids)), qPrintable(show(expected[i])));
            }
            if (tok_->decode(ids) == texts[i]) ++round_trips;
            else
                qWarning("vector %zu does not round-trip: %s", i,
                         QByteArray::fromStdString(tok_->decode(ids)).toPercentEncoding(" ").constData());
        }
        qInfo("llama-spm: %d of %zu vectors give exactly the reference ids; %d round-trip",
              matches, texts.size(), round_trips);
        QCOMPARE(matches, 46);
        QCOMPARE(round_trips, 46);
    }

    void bosOnlyWhenAsked() {
        QCOMPARE(show(tok_->encode("Hello world")), QString("15043 3186"));
        QCOMPARE(show(tok_->encode("Hello world", {.add_bos = true})), QString("1 15043 3186"));
    }

    void controlTokensNeedParseSpecial() {
        const std::string text = "<s>[INST] hi [/INST]</s>";
        const auto plain = tok_->encode(text);
        for (const auto id : plain) QVERIFY2(!tok_->is_control(id), qPrintable(show(plain)));
        QCOMPARE(tok_->decode(plain), text);
        const auto parsed = tok_->encode(text, {.parse_special = true});
        QCOMPARE(parsed.front(), 1);
        QCOMPARE(parsed.back(), 2);
        for (std::size_t i = 1; i + 1 < parsed.size(); ++i) QVERIFY(!tok_->is_control(parsed[i]));
        // The text between is encoded as its own sentencepiece input, as llama.cpp does.
        std::vector<std::int32_t> expected{1};
        for (auto id : tok_->encode("[INST] hi [/INST]")) expected.push_back(id);
        expected.push_back(2);
        QCOMPARE(show(parsed), show(expected));
    }

    void streamsLikeDecode() {
        for (const std::string text : {"Hello world", " this is \xF0\x9F\xA6\x99.cpp",
                                       "\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B", "\t\n  x"}) {
            const auto ids = tok_->encode(text, {.add_bos = true});
            tokenizer::StreamingDetokenizer d(*tok_);
            std::string out;
            for (const auto id : ids) out += d.push(id);
            out += d.flush();
            QCOMPARE(out, text);
        }
    }
};

QTEST_APPLESS_MAIN(TestTokenizerLlamaSpm)
#include "test_tokenizer_llama_spm.moc"
