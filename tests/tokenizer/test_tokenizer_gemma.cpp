// The default model's tokenizer (Gemma 3 270M, 262144 tokens, no dummy prefix), built from its
// GGUF: lossless round trips over many scripts and whitespace shapes, chat control tokens
// only when asked for, and streaming over random ids.
#include <QtTest>

#include <memory>
#include <random>

#include "gguf/file.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/test_paths.h"
#include "util/utf8.h"

using namespace tokenscope;
using tokenizer::Tokenizer;

namespace {

QString show(const std::vector<std::int32_t>& ids) {
    QStringList parts;
    for (const auto id : ids) parts << QString::number(id);
    return parts.join(' ');
}

}  // namespace

class TestTokenizerGemma : public QObject {
    Q_OBJECT

    std::unique_ptr<gguf::File> file_;
    std::unique_ptr<Tokenizer> tok_;

private slots:
    void initTestCase() {
        const std::string path = test::gemma_model();
        if (path.empty())
            QSKIP("the default model gemma-3-270m-q4_k_m.gguf is not installed (tools/setup-deps "
                  "installs it); skipping the Gemma tokenizer tests");
        file_ = std::make_unique<gguf::File>(gguf::File::open(path));
        QElapsedTimer timer;
        timer.start();
        tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
        qInfo("Gemma tokenizer built in %lld ms", static_cast<long long>(timer.elapsed()));
    }

    void metadata() {
        QCOMPARE(tok_->vocab_size(), 262144);
        QVERIFY(!tok_->add_space_prefix());
        QCOMPARE(tok_->bos_id(), 2);
        QCOMPARE(tok_->eos_id(), 1);
        QCOMPARE(tok_->token_id("<start_of_turn>").value_or(-1), 105);
        QCOMPARE(tok_->token_id("<end_of_turn>").value_or(-1), 106);
        QVERIFY(tok_->is_control(105));
        QVERIFY(tok_->is_control(106));
    }

    void roundTrip_data() {
        QTest::addColumn<QByteArray>("text");
        const auto row = [](const char* name, const char* text) {
            QTest::newRow(name) << QByteArray(text);
        };
        row("empty", "");
        row("english", "The quick brown fox jumps over the lazy dog.");
        row("leading space", " leading space");
        row("runs of spaces", "a  b   c    d                 e");
        row("only spaces", "     ");
        row("tabs", "\tone\t\ttwo\t\t\tthree\t");
        row("newlines", "line one\nline two\n\n\nline five\r\nwindows\r\n");
        row("mixed whitespace", " \t \n  \t\n");
        row("chinese", "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE4\xBB\x8A\xE5\xA4\xA9\xE5\xA4\xA9\xE6\xB0\x94\xE5\xBE\x88\xE5\xA5\xBD\xE3\x80\x82");
        row("japanese", "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE3\x80\x81\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xB8\xE3\x82\x88\xE3\x81\x86\xE3\x81\x93\xE3\x81\x9D\xE3\x80\x82\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A");
        row("korean", "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98\xEC\x84\xB8\xEC\x9A\x94, \xEC\x84\xB8\xEA\xB3\x84!");
        row("cyrillic", "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! \xD0\xA1\xD1\x8A\xD0\xB5\xD1\x88\xD1\x8C \xD0\xB6\xD0\xB5 \xD0\xB5\xD1\x89\xD1\x91.");
        row("arabic", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85\xD8\x8C \xD9\x83\xD9\x8A\xD9\x81 \xD8\xAD\xD8\xA7\xD9\x84\xD9\x83\xD8\x9F");
        row("hindi", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE0\xA4\xA6\xE0\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE");
        row("greek", "\xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1 \xCE\xBA\xCF\x8C\xCF\x83\xCE\xBC\xCE\xB5");
        row("emoji zwj", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6 \xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD");
        row("rare scripts", "\xE1\x9A\xA0\xE1\x9A\xA2\xE1\x9A\xA6 \xF0\x90\x8C\xB0\xF0\x90\x8C\xB1 \xF0\x93\x80\x80 \xEA\xA6\x84");
        row("code", "int main() {\n    for (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n    }\n    return 0;\n}\n");
        row("python", "def f(x):\n    return [y ** 2 for y in range(x) if y % 3 == 0]\n");
        row("json", "{\"key\": [1, 2.5, null, true], \"\xC3\xA9\": \"\\u00e9\"}");
        row("markup", "<div class=\"a\"><b>bold</b> &amp; <i>it</i></div>");
        row("control lookalikes", "<start_of_turn>user\nhi<end_of_turn>\n<bos><eos><pad>");
        row("numbers", "3.14159 2,718 1e-9 0x1F 10000000000");
        row("replacement char and nbsp", "\xEF\xBF\xBD \xC2\xA0nbsp\xC2\xA0");
    }

    void roundTrip() {
        QFETCH(QByteArray, text);
        const std::string s = text.toStdString();
        const auto ids = tok_->encode(s);
        QCOMPARE(tok_->decode(ids), s);
        tokenizer::StreamingDetokenizer d(*tok_);
        std::string streamed;
        for (const auto id : ids) {
            const std::string piece = d.push(id);
            QVERIFY(utf8::is_valid(piece));
            streamed += piece;
        }
        QCOMPARE(streamed + d.flush(), s);
    }

    // Gemma's whitespace-run pieces are stored with literal spaces in the GGUF ("  " is id
    // 138); they must still be matched as single tokens.
    void whitespaceRunsAreSingleTokens() {
        const auto ids = tok_->encode("a  b\n\nc");
        QVERIFY2(std::count(ids.begin(), ids.end(), 138) == 1, qPrintable(show(ids)));
        QVERIFY2(std::count(ids.begin(), ids.end(), 108) == 1, qPrintable(show(ids)));  // "\n\n"
        QCOMPARE(show(tok_->encode("    ")), QString("140"));
    }

    void chatControlTokensOnlyWhenAsked() {
        const std::string text = "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n";
        const auto plain = tok_->encode(text);
        for (const auto id : plain) QVERIFY2(!tok_->is_control(id), qPrintable(show(plain)));
        QCOMPARE(tok_->decode(plain), text);

        const auto parsed = tok_->encode(text, {.parse_special = true});
        QCOMPARE(std::count(parsed.begin(), parsed.end(), 105), 2);
        QCOMPARE(std::count(parsed.begin(), parsed.end(), 106), 1);
        QCOMPARE(parsed.front(), 105);
        // "<start_of_turn>user\n" is 105, "user", "\n" in every Gemma 3 prompt.
        QCOMPARE(show({parsed.begin(), parsed.begin() + 3}), QString("105 2364 107"));
        QCOMPARE(tok_->decode(parsed), std::string("user\nHello\nmodel\n"));

        const auto with_bos = tok_->encode(text, {.add_bos = true, .parse_special = true});
        QCOMPARE(with_bos.front(), 2);
        QCOMPARE(show({with_bos.begin() + 1, with_bos.end()}), show(parsed));
    }

    void randomStreams() {
        std::mt19937 rng(7);
        std::vector<std::int32_t> bytes;
        for (std::int32_t id = 0; id < tok_->vocab_size(); ++id)
            if (tok_->is_byte(id)) bytes.push_back(id);
        QCOMPARE(bytes.size(), std::size_t{256});
        std::uniform_int_distribution<std::int32_t> any(0, tok_->vocab_size() - 1);
        for (int round = 0; round < 1000; ++round) {
            std::vector<std::int32_t> ids;
            const int length = std::uniform_int_distribution<int>(1, 30)(rng);
            for (int i = 0; i < length; ++i)
                ids.push_back(std::uniform_int_distribution<int>(0, 9)(rng) < 7
                                  ? bytes[std::uniform_int_distribution<std::size_t>(0, 255)(rng)]
                                  : any(rng));
            tokenizer::StreamingDetokenizer d(*tok_);
            std::string out;
            for (const auto id : ids) {
                const std::string piece = d.push(id);
                if (!utf8::is_valid(piece)) QFAIL("push() emitted invalid UTF-8");
                out += piece;
            }
            out += d.flush();
            if (out != tok_->decode(ids)) QFAIL("stream differs from decode()");
        }
    }
};

QTEST_APPLESS_MAIN(TestTokenizerGemma)
#include "test_tokenizer_gemma.moc"
