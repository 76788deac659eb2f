// tokenscope-cli as a user runs it: a real process, real files. Bad input of every kind ends
// with exit status 1 and exactly one line on stderr that names the problem; never a crash or
// a hang.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QtTest>
#include <random>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tensor/type.h"
#include "util/byte_format.h"
#include "util/cli_process.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {

using Result = test::CliResult;

Result run_cli(const QStringList& args, int timeout_ms = 30000) {
    return test::run_process(TOKENSCOPE_CLI, args, {}, timeout_ms);
}

QString describe(const Result& r) {
    return QString("exit %1%2, stderr: %3")
        .arg(r.exit_code)
        .arg(r.crashed ? " (crashed)" : "")
        .arg(r.err);
}

void write_file(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(bytes), bytes.size());
}

// A small but complete model-shaped GGUF written by our writer.
QByteArray small_model() {
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("llama"));
    w.set("llama.block_count", gguf::Value::u32(2));
    w.set("llama.embedding_length", gguf::Value::u32(64));
    w.set("llama.attention.head_count", gguf::Value::u32(4));
    w.set("llama.attention.head_count_kv", gguf::Value::u32(2));
    w.set("llama.context_length", gguf::Value::u32(128));
    w.set("tokenizer.ggml.tokens", gguf::Value::strings({"<unk>", "<s>", "</s>", "a"}));
    std::vector<std::uint8_t> f32(64 * 4 * 4), q8(tensor::row_bytes(tensor::Type::Q8_0, 64) * 4);
    for (std::size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<std::uint8_t>(i);
    w.add_tensor("token_embd.weight", tensor::Type::F32, {64, 4}, std::span(f32).first(64 * 4 * 4));
    w.add_tensor("blk.0.attn_q.weight", tensor::Type::Q8_0, {64, 4}, q8);
    const auto bytes = w.to_bytes();
    return QByteArray(reinterpret_cast<const char*>(bytes.data()),
                      static_cast<qsizetype>(bytes.size()));
}

}  // namespace

class TestCli : public QObject {
    Q_OBJECT

  private:
    // Exit status 1, one line on stderr that starts with the program's error prefix and
    // contains every fragment.
    void expect_error(const QStringList& args, const QStringList& fragments) {
        const Result r = run_cli(args);
        QVERIFY2(!r.crashed, qPrintable(describe(r)));
        QVERIFY2(r.exit_code == 1, qPrintable(describe(r)));
        QVERIFY2(r.err.startsWith("tokenscope-cli: error: "), qPrintable(r.err));
        QVERIFY2(r.err.count('\n') == 1 && r.err.endsWith('\n'),
                 qPrintable("not one line: " + r.err));
        for (const auto& f : fragments)
            QVERIFY2(r.err.contains(f), qPrintable(r.err + " -- expected " + f));
    }

    QString dir_;

  private slots:
    void initTestCase() { dir_ = QString::fromStdString(test::scratch_dir()); }

    // TOKENSCOPE_SIMD caps the kernel level for the process (benchmarks of the AVX2 path on an
    // AVX-512 machine); devices reports it. An unknown or unsupported value only warns.
    void simdCapFromTheEnvironment() {
        qputenv("TOKENSCOPE_SIMD", "scalar");
        const Result capped = run_cli({"devices", "--json"});
        qputenv("TOKENSCOPE_SIMD", "bogus");
        const Result bogus = run_cli({"devices"});
        qunsetenv("TOKENSCOPE_SIMD");
        const Result plain = run_cli({"devices", "--json"});
        QVERIFY2(capped.exit_code == 0, qPrintable(describe(capped)));
        QVERIFY2(capped.out.contains("\"kernels\":\"scalar\""), qPrintable(capped.out));
        QCOMPARE(bogus.exit_code, 0);
        QVERIFY2(bogus.err.contains("TOKENSCOPE_SIMD='bogus'"), qPrintable(bogus.err));
        QVERIFY(!bogus.out.contains("capped"));
        QCOMPARE(plain.exit_code, 0);
        // Uncapped, the kernels run at the best level the CPU has: AVX2 when it has AVX2.
        if (plain.out.contains("\"avx2\":true")) QVERIFY2(!plain.out.contains("\"kernels\":\"scalar\""), qPrintable(plain.out));
    }

    // render-template: the template text of a chat for a JSON context, and one clear line for
    // each kind of bad input.
    void renderTemplate() {
        const QString tmpl = dir_ + "/render.jinja";
        write_file(tmpl, "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<assistant>{% endif %}");
        const QString ctx = dir_ + "/render.json";
        write_file(ctx, R"({"messages": [{"role": "user", "content": "  Hi \u00e9 "}], "add_generation_prompt": true})");
        const Result ok = run_cli({"render-template", "--template", tmpl, "--context", ctx});
        QVERIFY2(ok.exit_code == 0, qPrintable(describe(ok)));
        QCOMPARE(ok.out, QString::fromUtf8("<user>Hi \u00e9\n<assistant>"));

        const QString bad_json = dir_ + "/render-bad.json";
        write_file(bad_json, R"({"messages": [1, 2,]})");
        expect_error({"render-template", "--template", tmpl, "--context", bad_json}, {"JSON", "at byte 19"});
        const QString raises = dir_ + "/raises.jinja";
        write_file(raises, "line one\n{{ raise_exception('roles must alternate') }}");
        expect_error({"render-template", "--template", raises, "--context", ctx},
                     {"chat template line 2", "raise_exception: roles must alternate"});
        const QString broken = dir_ + "/broken.jinja";
        write_file(broken, "{% if x %}never closed");
        expect_error({"render-template", "--template", broken, "--context", ctx}, {"chat template line 1", "endif"});
        expect_error({"render-template", "--context", ctx}, {"--template", "--model"});
    }

    void version() {
        const Result r = run_cli({"--version"});
        QCOMPARE(r.exit_code, 0);
        QVERIFY(r.out.startsWith("tokenscope-cli "));
    }

    void badArguments() {
        expect_error({}, {"no command given"});
        expect_error({"launch"}, {"unknown command 'launch'"});
        expect_error({"inspect"}, {"missing required option '--model'"});
        expect_error({"inspect", "--model"}, {"'--model' needs a value"});
        expect_error({"inspect", "--model", "x", "--colour"}, {"unknown option '--colour'"});
        expect_error({"inspect", "--model", "x", "stray"}, {"unexpected argument 'stray'"});
        expect_error({"inspect", "--model", "x", "--ram-gib", "lots"},
                     {"'--ram-gib' expects a number, got 'lots'"});
        expect_error({"inspect", "--model", "x", "--ram-gib", "-2"}, {"must be a positive number"});
        expect_error({"--log-level", "loud", "inspect"}, {"unknown log level 'loud'"});
        expect_error({"inspect", "--model", "/no/such/file.gguf"},
                     {"/no/such/file.gguf: cannot open"});
        expect_error({"inspect", "--model", dir_}, {"is a directory"});
        expect_error({"tokenize", "--model", "x"}, {"missing required option '--text'"});
    }

    void inspectSmallModel() {
        const QString path = dir_ + "/small.gguf";
        write_file(path, small_model());
        const Result text = run_cli({"inspect", "--model", path, "--ram-gib", "1"});
        QVERIFY2(text.exit_code == 0, qPrintable(describe(text)));
        QVERIFY(text.out.contains("blk.0.attn_q.weight  Q8_0  64 x 4"));
        // KV bytes per token by hand: 2 x 2 layers x 2 kv heads x (64/4 = 16) x 2 bytes = 256.
        QVERIFY2(text.out.contains("2 x 2 layers x 2 kv heads x 16 head dim x 2 bytes = 256 bytes"),
                 qPrintable(text.out));
        QVERIFY2(
            text.out.contains("longest context in 1.0 GiB: 128 tokens (the model's full context)"),
            qPrintable(text.out));

        const Result json = run_cli({"inspect", "--model", path, "--json"});
        QCOMPARE(json.exit_code, 0);
        QJsonParseError error{};
        const QJsonObject doc = QJsonDocument::fromJson(json.out.toUtf8(), &error).object();
        QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
        QCOMPARE(doc["tensors"].toArray().size(), 2);
        QCOMPARE(doc["tensors"].toArray()[1].toObject()["bytes"].toInt(), 4 * 68);
        QCOMPARE(doc["budget"].toObject()["kv_bytes_per_token"].toInt(), 256);
        QCOMPARE(doc["metadata"].toArray()[6].toObject()["value"].toObject()["length"].toInt(), 4);
    }

    // Issue 11, item 14: the app and the CLI showed available RAM by different definitions
    // and units ("24.1 GB" vs "23.5 GiB"). The CLI prints "available RAM" (MemAvailable) in GiB
    // through byte_format::binary, the function the app's memory panel uses (whose output
    // test_memory_budget_view compares with it), and measures the budget against it.
    void inspectAvailableRamInGiB() {
        const QString path = dir_ + "/small_ram.gguf";
        write_file(path, small_model());
        const Result r = run_cli({"inspect", "--model", path});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        const QRegularExpression available(
            R"(\n  available RAM: +(\d+(\.\d)? GiB) \(what new allocations get without swapping\)\n)");
        const QRegularExpressionMatch m = available.match(r.out);
        QVERIFY2(m.hasMatch(), qPrintable(r.out));
        QVERIFY2(r.out.contains("longest context in available RAM of " + m.captured(1) + ": "),
                 qPrintable(r.out));
        QVERIFY(!r.out.contains(" GB"));
        QVERIFY(!r.out.contains("RAM budget (--ram-gib)"));

        // --ram-gib sets the budget; it is printed by the same function.
        const std::uint64_t budget = 3ull * 1024 * 1024 * 1024 / 2;
        const Result given = run_cli({"inspect", "--model", path, "--ram-gib", "1.5"});
        QVERIFY2(given.exit_code == 0, qPrintable(describe(given)));
        const QString expected = QString::fromStdString(byte_format::binary(budget));
        QCOMPARE(expected, QStringLiteral("1.5 GiB"));
        QVERIFY2(given.out.contains("  RAM budget (--ram-gib):   " + expected + "\n"),
                 qPrintable(given.out));
        QVERIFY(given.out.contains("longest context in " + expected + ": 128 tokens"));
        QVERIFY(available.match(given.out).hasMatch());

        // JSON: the budget defaults to the available RAM, which is reported too.
        const Result json = run_cli({"inspect", "--model", path, "--json"});
        const QJsonObject doc =
            QJsonDocument::fromJson(json.out.toUtf8()).object()["budget"].toObject();
        QVERIFY(doc["available_ram_bytes"].toDouble() > 0);
        QCOMPARE(doc["ram_bytes"].toDouble(), doc["available_ram_bytes"].toDouble());
    }

    void inspectGemma() {
        const std::string model = test::gemma_model();
        if (model.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        const Result r =
            run_cli({"inspect", "--model", QString::fromStdString(model), "--ram-gib", "2"});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QVERIFY(r.out.contains("gemma3.attention.sliding_window"));
        QVERIFY(r.out.contains("token_embd.weight"));
        // 2 x 18 layers x 1 KV head x 256 x 2 bytes (hand calculation in test_gguf_real_files).
        QVERIFY2(
            r.out.contains("2 x 18 layers x 1 kv heads x 256 head dim x 2 bytes = 18432 bytes"),
            qPrintable(r.out));
        QVERIFY(r.out.contains("Tensor types"));
    }

    void tokenizeLlamaVocabulary() {
        const std::string vocab = test::shared_testdata("llama-spm/ggml-vocab-llama-spm.gguf");
        if (vocab.empty()) QSKIP("../shared/testdata/llama-spm is absent");
        const QString model = QString::fromStdString(vocab);
        // Expected ids: line 12 of ggml-vocab-llama-spm.gguf.out ("Hello world"), from the
        // reference tokenizer; BOS is id 1 per the test data's README.
        QCOMPARE(run_cli({"tokenize", "--model", model, "--text", "Hello world"}).out,
                 QString("15043 3186\n"));
        QCOMPARE(run_cli({"tokenize", "--model", model, "--text", "Hello world", "--bos"}).out,
                 QString("1 15043 3186\n"));
        // A user typing "<s>" gets plain text, not the BOS control token...
        const QStringList plain =
            run_cli({"tokenize", "--model", model, "--text", "<s>"}).out.trimmed().split(' ');
        QVERIFY2(plain.size() > 1 && !plain.contains("1"), qPrintable(plain.join(' ')));
        // ...unless special tokens are asked for.
        QCOMPARE(run_cli({"tokenize", "--model", model, "--text", "<s>", "--parse-special"}).out,
                 QString("1\n"));
        const Result json =
            run_cli({"tokenize", "--model", model, "--text", "Hello world", "--json"});
        const QJsonObject doc = QJsonDocument::fromJson(json.out.toUtf8()).object();
        QCOMPARE(doc["ids"].toArray().size(), 2);
        QCOMPARE(doc["pieces"].toArray()[0].toString(), QString::fromUtf8("\u2581Hello"));
    }

    void tokenizeNeedsAVocabulary() {
        const QString path = dir_ + "/no_vocab.gguf";
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        const auto bytes = w.to_bytes();
        write_file(path, QByteArray(reinterpret_cast<const char*>(bytes.data()),
                                    static_cast<qsizetype>(bytes.size())));
        expect_error({"tokenize", "--model", path, "--text", "hi"}, {path, "tokenizer.ggml.model"});
    }

    void tokenizeByteLevelBpe() {
        const std::string vocab = test::shared_testdata("bpe/ggml-vocab-gpt-2.gguf");
        if (vocab.empty()) QSKIP("../shared/testdata/bpe is absent");
        const QString model = QString::fromStdString(vocab);
        // Line 12 of ggml-vocab-gpt-2.gguf.out ("Hello world"), from the reference tokenizer.
        QCOMPARE(run_cli({"tokenize", "--model", model, "--text", "Hello world"}).out,
                 QString("15496 995\n"));
        const Result json =
            run_cli({"tokenize", "--model", model, "--text", "Hello world", "--json"});
        const QJsonObject doc = QJsonDocument::fromJson(json.out.toUtf8()).object();
        QCOMPARE(doc["pieces"].toArray()[1].toString(), QString::fromUtf8("\u0120world"));
        // --inp: every test string of the file, one line of ids each, as the .out file has
        // them (it writes a leading space per line, hence the trimming).
        const Result all = run_cli({"tokenize", "--model", model, "--inp", model + ".inp"});
        QVERIFY2(all.exit_code == 0, qPrintable(describe(all)));
        QFile out(model + ".out");
        QVERIFY(out.open(QIODevice::ReadOnly));
        const QStringList expected = QString::fromUtf8(out.readAll()).split('\n');
        const QStringList got = all.out.split('\n');
        QCOMPARE(got.size(), expected.size());
        for (qsizetype i = 0; i < got.size(); ++i) QCOMPARE(got[i].trimmed(), expected[i].trimmed());
    }

    void benchTokenizer() {
        const std::string vocab = test::shared_testdata("bpe/ggml-vocab-qwen2.gguf");
        if (vocab.empty()) QSKIP("../shared/testdata/bpe is absent");
        const QString text =
            QString::fromStdString(test::source_file("resources/text/tokenizer_cjk.txt"));
        QVERIFY(!text.isEmpty());
        const Result r = run_cli({"bench-tokenizer", "--model", QString::fromStdString(vocab),
                                  "--file", text, "--seconds", "0.2", "--json"},
                                 120000);
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(doc["tokenizer"].toString(), QString("gpt2"));
        QCOMPARE(doc["pre"].toString(), QString("qwen2"));
        QCOMPARE(doc["bytes"].toInteger(), QFileInfo(text).size());
        QVERIFY(doc["tokens"].toInteger() > 0);
        // A CJK character is 3 UTF-8 bytes; Qwen's vocabulary has whole words of them.
        QVERIFY(doc["tokens"].toInteger() < doc["bytes"].toInteger() / 2);
        QVERIFY(doc["encode_runs"].toInteger() >= 3);
        QVERIFY(doc["encode_mb_per_s"].toDouble() > 0.0);
        QVERIFY(doc["round_trip"].toBool());
        expect_error({"bench-tokenizer", "--model", QString::fromStdString(vocab), "--file",
                      dir_ + "/missing.txt"},
                     {"missing.txt", "cannot open"});
    }

    void tokenizeUnknownPreTokenizer() {
        const QString path = dir_ + "/unknown_pre.gguf";
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
        w.set("tokenizer.ggml.pre", gguf::Value::string("brand-new-pre"));
        w.set("tokenizer.ggml.tokens", gguf::Value::strings({"a", "b", "ab"}));
        w.set("tokenizer.ggml.merges", gguf::Value::strings({"a b"}));
        const auto bytes = w.to_bytes();
        write_file(path, QByteArray(reinterpret_cast<const char*>(bytes.data()),
                                    static_cast<qsizetype>(bytes.size())));
        expect_error({"tokenize", "--model", path, "--text", "hi"},
                     {path, "tokenizer.ggml.pre", "'brand-new-pre'"});
        // A merge naming a piece that is not in the vocabulary: file, key and index.
        w.set("tokenizer.ggml.pre", gguf::Value::string("gpt-2"));
        w.set("tokenizer.ggml.merges", gguf::Value::strings({"a b", "ab c"}));
        const auto bad_merge = w.to_bytes();
        write_file(path, QByteArray(reinterpret_cast<const char*>(bad_merge.data()),
                                    static_cast<qsizetype>(bad_merge.size())));
        expect_error({"tokenize", "--model", path, "--text", "hi"},
                     {path, "tokenizer.ggml.merges", "entry 1", "'c'"});
    }

    void tokenizeGemmaControlTokens() {
        const std::string model = test::gemma_model();
        if (model.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        const QString m = QString::fromStdString(model);
        // <start_of_turn> is id 105 and <end_of_turn> id 106 in this vocabulary (its token list).
        const Result special = run_cli({"tokenize", "--model", m, "--text",
                                        "<start_of_turn>user\nHi<end_of_turn>", "--parse-special"});
        const QStringList ids = special.out.trimmed().split(' ');
        QVERIFY2(ids.first() == "105" && ids.last() == "106", qPrintable(special.out));
        const Result plain =
            run_cli({"tokenize", "--model", m, "--text", "<start_of_turn>user\nHi<end_of_turn>"});
        QVERIFY2(!plain.out.trimmed().split(' ').contains("105") &&
                     !plain.out.trimmed().split(' ').contains("106"),
                 qPrintable(plain.out));
    }

    void inspectVocabularyOnly() {
        const std::string vocab = test::shared_testdata("llama-spm/ggml-vocab-llama-spm.gguf");
        if (vocab.empty()) QSKIP("../shared/testdata/llama-spm is absent");
        const Result r = run_cli({"inspect", "--model", QString::fromStdString(vocab)});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QVERIFY(r.out.contains("[string x 32000]"));
        QVERIFY(r.out.contains("weights:                  none (this file holds no tensors)"));
        // The file keeps Llama 2 7B's hyperparameters: 2 x 32 x 32 x 128 x 2 = 524288 bytes.
        QVERIFY2(
            r.out.contains("2 x 32 layers x 32 kv heads x 128 head dim x 2 bytes = 524288 bytes"),
            qPrintable(r.out));
    }

    void inspectFileWithoutModel() {
        const QString path = dir_ + "/no_model.gguf";
        gguf::Writer w;
        w.set("general.name", gguf::Value::string("just a name"));
        const auto bytes = w.to_bytes();
        write_file(path, QByteArray(reinterpret_cast<const char*>(bytes.data()),
                                    static_cast<qsizetype>(bytes.size())));
        const Result r = run_cli({"inspect", "--model", path});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QVERIFY(r.out.contains("n/a (no model hyperparameters in this file)"));
    }

    // The corpus of broken files: every truncation point class, header corruptions and seeded
    // random byte flips. Every file gets a one-line error (or, for flips that happen to leave
    // a valid file, success) and never a crash.
    void corruptedCorpus() {
        const QByteArray valid = small_model();
        const gguf::File parsed =
            gguf::File::parse("x", std::span(reinterpret_cast<const std::uint8_t*>(valid.data()),
                                             static_cast<std::size_t>(valid.size())));
        const int data_offset = static_cast<int>(parsed.data_offset());
        QDir().mkpath(dir_ + "/corpus");
        int files = 0, rejected = 0;
        auto check = [&](const QByteArray& bytes, const QString& name, bool must_fail) {
            const QString path = dir_ + "/corpus/" + name + ".gguf";
            write_file(path, bytes);
            const Result r = run_cli({"inspect", "--model", path});
            ++files;
            QVERIFY2(!r.crashed, qPrintable(name + ": " + describe(r)));
            if (r.exit_code == 0 && !must_fail) return;
            QVERIFY2(r.exit_code == 1, qPrintable(name + ": " + describe(r)));
            // Truncations are caught by the reader and name the offset; a flip may also make a
            // value the budget rejects (e.g. zero heads), which names the key instead.
            const QString prefix =
                "tokenscope-cli: error: " + path + (must_fail ? ": offset " : ": ");
            QVERIFY2(r.err.startsWith(prefix), qPrintable(name + ": " + r.err));
            QVERIFY2(r.err.count('\n') == 1, qPrintable(name + ": " + r.err));
            ++rejected;
        };
        const auto& last = parsed.tensors().back();
        const int data_end = data_offset + static_cast<int>(last.offset + last.byte_size);
        for (int cut : {0, 3, 4, 7, 8, 15, 16, 23, 24, 30, 60, 100, 200, data_offset - 1,
                        data_offset + 10, data_end - 1}) {
            check(valid.left(cut), QString("truncated_%1").arg(cut), true);
        }
        std::mt19937 rng(20261130);
        for (int i = 0; i < 120; ++i) {
            QByteArray bytes = valid;
            for (int k = 0; k < 1 + i % 3; ++k)
                bytes[static_cast<int>(rng() % data_offset)] = static_cast<char>(rng());
            check(bytes, QString("flipped_%1").arg(i), false);
        }
        qInfo("corrupted corpus: %d files, %d rejected with a one-line error, none crashed", files,
              rejected);
        QVERIFY(rejected >= 16 + 60);
    }

    void truncatedGemmaHeaders() {
        const std::string model = test::gemma_model();
        if (model.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        QFile in(QString::fromStdString(model));
        QVERIFY(in.open(QIODevice::ReadOnly));
        const gguf::File file = gguf::File::open(model);
        const qint64 data_offset = static_cast<qint64>(file.data_offset());
        const QByteArray head = in.read(data_offset + 4096);
        for (qint64 cut : {qint64{20}, qint64{1000}, qint64{100000}, data_offset / 2,
                           data_offset - 1, data_offset + 4096}) {
            const QString path = dir_ + QString("/gemma_cut_%1.gguf").arg(cut);
            write_file(path, head.left(cut));
            expect_error({"inspect", "--model", path}, {path + ": offset "});
        }
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
