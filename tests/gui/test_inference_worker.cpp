// The InferenceWorker on its own QThread, driven only through queued calls and observed
// through QSignalSpy, with a tiny test model: load progress, streamed tokens, finish, stop,
// multi-turn reuse, panel data, and a precise error for a bad file.
#include <QSignalSpy>
#include <QThread>
#include <QtTest>

#include "gguf/file.h"
#include "inference_worker.h"
#include "inspect/attention_capture.h"
#include "model_summary.h"
#include "reference/tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::ChatTurn;
using app::InferenceWorker;

class TestInferenceWorker : public QObject {
    Q_OBJECT

    QThread thread_;
    InferenceWorker* worker_ = nullptr;
    QString model_;

    void load(const QString& path) {
        app::LoadOptions options;
        options.threads = 2;
        options.kv_capacity_tokens = 512;
        options.kv_type = "f16";
        QVERIFY(QMetaObject::invokeMethod(worker_, "loadModel", Qt::QueuedConnection,
                                          Q_ARG(QString, path),
                                          Q_ARG(tokenscope::app::LoadOptions, options)));
    }
    void generate(qint64 conversation, const QVector<ChatTurn>& turns, int max_tokens = 8,
                  bool think = true) {
        ui::SamplingSettings s;
        s.temperature = 0.0f;
        s.max_tokens = max_tokens;
        s.think = think;
        QVERIFY(QMetaObject::invokeMethod(worker_, "generate", Qt::QueuedConnection,
                                          Q_ARG(qint64, conversation),
                                          Q_ARG(QVector<tokenscope::app::ChatTurn>, turns),
                                          Q_ARG(tokenscope::ui::SamplingSettings, s)));
    }

  private slots:
    // Token labels and candidates show text, not vocabulary pieces: byte-level BPE's "Ġ"/"Ċ"
    // become a space and a newline, SentencePiece's "▁" a space, control tokens keep their
    // name, and a byte that is only part of a character shows as <0x..>. Expected strings are
    // the pieces' meaning under the GPT-2 byte mapping and SentencePiece's convention.
    // The Heads overview's running sums: updated a few rows at a time they give the same bits
    // as one update over all rows, they start over when the rows shrink or the owner changes,
    // and they match values worked out by hand. Rows (weights exact in f16): head 0 puts all
    // weight on key 0 (entropy 0, distance q), head 1 half on q and half on q - 1 (1 bit, 0.5),
    // head 2 a quarter on each of q - 3..q (2 bits, 1.5) from q = 3 and all on q before.
    void headStatisticsAddOnlyNewRows() {
        const int layers = 2, heads = 3;
        auto fill = [&](inspect::AttentionCapture& c, qint64 rows, float head0_key0) {
            c.prepare_rows(rows);
            for (int l = 0; l < layers; ++l) {
                for (qint64 q = 0; q < rows; ++q) {
                    std::vector<float> w0(std::size_t(q + 1), 0.0f), w1 = w0, w2 = w0;
                    w0[0] = head0_key0;
                    if (q >= 1)
                        w1[std::size_t(q)] = w1[std::size_t(q - 1)] = 0.5f;
                    else
                        w1[0] = 1.0f;
                    if (q >= 3) {
                        for (qint64 k = q - 3; k <= q; ++k) w2[std::size_t(k)] = 0.25f;
                    } else {
                        w2[std::size_t(q)] = 1.0f;
                    }
                    c.set_row(l, 0, q, 0, w0);
                    c.set_row(l, 1, q, 0, w1);
                    c.set_row(l, 2, q, 0, w2);
                }
            }
        };
        inspect::CaptureSpec spec;
        spec.enabled = true;
        inspect::AttentionCapture capture(spec, layers, heads);
        fill(capture, 40, 1.0f);
        app::HeadStatistics stepwise;
        stepwise.update(capture, layers, heads, 10, 1);
        stepwise.update(capture, layers, heads, 25, 1);
        const ui::HeadOverviewData a = stepwise.update(capture, layers, heads, 40, 1);
        app::HeadStatistics at_once;
        const ui::HeadOverviewData b = at_once.update(capture, layers, heads, 40, 1);
        QCOMPARE(a.rows, 40);
        QCOMPARE(a.entropy, b.entropy);
        QCOMPARE(a.distance, b.distance);
        // Rows 2..39 (38 rows): head 0 distance (2 + 39) / 2; head 2 has 37 rows of 2 bits and
        // 1.5 back, and row 2 with 0 of both.
        for (int l = 0; l < layers; ++l) {
            QCOMPARE(a.entropy[l * heads + 0], 0.0f);
            QCOMPARE(a.distance[l * heads + 0], 20.5f);
            QCOMPARE(a.entropy[l * heads + 1], 1.0f);
            QCOMPARE(a.distance[l * heads + 1], 0.5f);
            QCOMPARE(a.entropy[l * heads + 2], float(37.0 * 2.0 / 38.0));
            QCOMPARE(a.distance[l * heads + 2], float(37.0 * 1.5 / 38.0));
        }
        // Fewer rows (an edited turn truncated the capture) and new contents: summed again.
        fill(capture, 20, 1.0f);
        const ui::HeadOverviewData c = stepwise.update(capture, layers, heads, 20, 1);
        QCOMPARE(c.entropy, app::HeadStatistics().update(capture, layers, heads, 20, 1).entropy);
        QCOMPARE(c.distance[0], float((2.0 + 19.0) / 2.0));
        // Another request: the rows may hold other weights at the same positions.
        fill(capture, 40, 0.5f);  // head 0: half the weight on key 0, the rest nowhere
        const ui::HeadOverviewData d = stepwise.update(capture, layers, heads, 40, 2);
        QCOMPARE(d.distance[0], 10.25f);
        QCOMPARE(d.entropy[0], 0.5f);  // -0.5 log2 0.5
    }

    void displayTokenShowsText() {
        const std::string bpe_path = test::shared_testdata("bpe/ggml-vocab-llama-bpe.gguf");
        const std::string spm_path = test::shared_testdata("llama-spm/ggml-vocab-llama-spm.gguf");
        if (bpe_path.empty() || spm_path.empty()) QSKIP("../shared/testdata is absent");
        const auto bpe_file = gguf::File::open(bpe_path);
        const auto bpe = tokenizer::Tokenizer::from_gguf(bpe_file);
        const auto world = bpe.encode(" world", {});
        QCOMPARE(world.size(), std::size_t(1));
        QCOMPARE(QString::fromStdString(bpe.piece(world[0])), QString::fromUtf8("\u0120world"));
        QCOMPARE(app::display_token(bpe, world[0]), QStringLiteral(" world"));
        const auto newline = bpe.encode("\n", {});
        QCOMPARE(app::display_token(bpe, newline[0]), QStringLiteral("\n"));
        // "€" is three bytes; llama-bpe has a token for the whole character, but a lone
        // continuation byte token (0x82) is a part of one.
        const auto part = bpe.encode("\xe2\x82\xac", {});
        QCOMPARE(part.size(), std::size_t(1));
        QCOMPARE(app::display_token(bpe, part[0]), QString::fromUtf8("\xe2\x82\xac"));
        bool found_partial = false;
        for (std::int32_t id = 0; id < 300 && !found_partial; ++id) {
            if (bpe.token_bytes(id, false) == std::string_view("\x82", 1)) {
                QCOMPARE(app::display_token(bpe, id), QStringLiteral("<0x82>"));
                found_partial = true;
            }
        }
        QVERIFY(found_partial);
        const auto control = bpe.encode("<|begin_of_text|>", {.parse_special = true});
        QCOMPARE(control.size(), std::size_t(1));
        QCOMPARE(app::display_token(bpe, control[0]), QStringLiteral("<|begin_of_text|>"));

        const auto spm_file = gguf::File::open(spm_path);
        const auto spm = tokenizer::Tokenizer::from_gguf(spm_file);
        const auto hello = spm.encode(" Hello", {});
        QCOMPARE(app::display_token(spm, hello.back()), QStringLiteral(" Hello"));
    }

    void initTestCase() {
        app::register_worker_types();
        model_ =
            QString::fromStdString(test::tiny_model_path("worker_llama", test::TinyModelSpec{}));
        worker_ = new InferenceWorker;
        worker_->moveToThread(&thread_);
        connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
        thread_.start();
    }

    void cleanupTestCase() {
        worker_->stop();
        thread_.quit();
        QVERIFY(thread_.wait(10000));
    }

    void badFileGivesThePreciseError() {
        const QString bad = QString::fromStdString(test::scratch_dir()) + "/bad.gguf";
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("GGUF\x03\x00\x00\x00garbage");
        f.close();
        QSignalSpy failed(worker_, &InferenceWorker::loadFailed);
        QSignalSpy progress(worker_, &InferenceWorker::loadProgress);
        load(bad);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 10000);
        const QString message = failed.at(0).at(0).toString();
        QVERIFY2(message.startsWith(bad + ": offset "), qPrintable(message));
    }

    // Cancel while the weights are being read: the default model is large enough for the
    // read to be in progress when the flag is set.
    void cancelLoad() {
        const std::string big = test::gemma_model();
        if (big.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        QSignalSpy cancelled(worker_, &InferenceWorker::loadCancelled);
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy progress(worker_, &InferenceWorker::loadProgress);
        load(QString::fromStdString(big));
        QTRY_VERIFY_WITH_TIMEOUT(progress.count() >= 1, 10000);
        worker_->cancelLoad();
        QTRY_VERIFY_WITH_TIMEOUT(cancelled.count() + loaded.count() >= 1, 60000);
        QCOMPARE(cancelled.count(), 1);
        QCOMPARE(loaded.count(), 0);
    }

    void loadReportsProgressAndModelInfo() {
        QSignalSpy progress(worker_, &InferenceWorker::loadProgress);
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy kv(worker_, &InferenceWorker::kvChanged);
        load(model_);
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() >= 1, 20000);
        QVERIFY(progress.count() >= 3);
        QCOMPARE(progress.last().at(0).toInt(), 100);
        const auto info = loaded.at(0).at(0).value<ui::ModelInfoData>();
        QCOMPARE(info.architecture, QString("llama"));
        QCOMPARE(info.layers, qint64{2});
        QVERIFY(info.parameters > 0);
        QVERIFY(kv.count() >= 1);
        QCOMPARE(kv.last().at(0).value<ui::KvBlockMapData>().tokens_used, qint64{0});
    }

    void generateStreamsTokensAndFinishes() {
        QSignalSpy started(worker_, &InferenceWorker::generationStarted);
        QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        QSignalSpy metrics(worker_, &InferenceWorker::metricsChanged);
        QSignalSpy attention(worker_, &InferenceWorker::attentionChanged);
        generate(1, {{"user", "Tell me a story"}}, 6);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 20000);
        QCOMPARE(started.count(), 1);
        QVERIFY(tokens.count() >= 1 && tokens.count() <= 6);
        const auto first = tokens.at(0).at(1).value<ui::TokenData>();
        QVERIFY(first.probability > 0.0f);
        QCOMPARE(first.before.size(), 20);
        QString streamed;
        for (const auto& t : tokens) streamed += t.at(1).value<ui::TokenData>().text;
        QCOMPARE(finished.at(0).at(1).toString(), streamed);
        QVERIFY(finished.at(0).at(3).toBool());  // complete
        QVERIFY(metrics.count() >= 1);
        QVERIFY(metrics.last().at(0).value<ui::MetricsData>().ttft_ms > 0);
        QVERIFY(attention.count() >= 1);
        const auto a = attention.last().at(0).value<ui::AttentionData>();
        QCOMPARE(a.rows.size(), a.labels.size());
        QVERIFY(a.rows.size() > 3);
    }

    // What streams is what is saved, to the last character: ten greedy replies to different
    // prompts, and the pieces (id-less ones included, which carry no candidates) spell the
    // finished text every time. (The finishing event may release text of its own with no
    // token; it used to reach the saved text but not the chat. This test has not caught that
    // case on this model; the window suites did, now and then, and have not since.)
    void streamedPiecesSpellTheSavedText() {
        for (int reply = 0; reply < 10; ++reply) {
            QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
            QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
            // Greedy: a different prompt for each reply, so that the ten end differently.
            generate(100 + reply, {{"user", QStringLiteral("Go on, part %1").arg(reply)}}, 300);
            QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 20000);
            QString streamed;
            for (const auto& t : tokens) {
                const auto token = t.at(1).value<ui::TokenData>();
                streamed += token.text;
                if (token.id < 0) QVERIFY(token.before.isEmpty());
            }
            QCOMPARE(streamed, finished.at(0).at(1).toString());
        }
    }

    // The second turn of the same conversation reuses the cache.
    void secondTurnReusesTheCache() {
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        QSignalSpy metrics(worker_, &InferenceWorker::metricsChanged);
        generate(2, {{"user", "Hello"}}, 4);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 20000);
        const QString answer = finished.at(0).at(1).toString();
        metrics.clear();
        generate(2, {{"user", "Hello"}, {"assistant", answer}, {"user", "And again"}}, 4);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 2, 20000);
        const auto m = metrics.last().at(0).value<ui::MetricsData>();
        QVERIFY2(m.reused_tokens > 0 && m.reused_tokens < m.prompt_tokens,
                 qPrintable(QString("%1 of %2").arg(m.reused_tokens).arg(m.prompt_tokens)));
    }

    // stop() from the GUI thread ends a long generation promptly with the partial text.
    void stopEndsGenerationWithPartialText() {
        QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        generate(3, {{"user", "Go on forever"}}, 100000);
        QTRY_VERIFY_WITH_TIMEOUT(tokens.count() >= 1, 20000);
        QElapsedTimer t;
        t.start();
        worker_->stop();
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 10000);
        qInfo("stop took %lld ms", static_cast<long long>(t.elapsed()));
        QVERIFY(t.elapsed() < 2000);
        QCOMPARE(finished.at(0).at(2).toString(), QString("cancelled"));
        QVERIFY(!finished.at(0).at(3).toBool());
        QVERIFY(tokens.count() < 100000);
    }

    // A model whose chat template cannot be parsed, or refuses a conversation: the user gets
    // one line (promptNotice), the built-in format is used, and the reply still comes.
    void badChatTemplatesFallBackAndSaySo() {
        test::TinyModelSpec broken;
        broken.chat_template = "<|im_start|>{% for m in messages %}{{ m.content }}";
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy notices(worker_, &InferenceWorker::promptNotice);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        load(QString::fromStdString(test::tiny_model_path("worker_broken_template", broken)));
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 20000);
        QTRY_VERIFY_WITH_TIMEOUT(notices.count() == 1, 5000);
        QString notice = notices.at(0).at(0).toString();
        QVERIFY2(notice.contains("line 1") && notice.contains("endfor") && !notice.contains('\n'),
                 qPrintable(notice));
        QVERIFY(loaded.at(0).at(0).value<ui::ModelInfoData>().chat_template.contains("failed"));
        generate(10, {{"user", "Hi"}}, 3);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 20000);
        QVERIFY(finished.at(0).at(3).toBool());

        test::TinyModelSpec raising;
        raising.chat_template =
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
            "supported') }}{% endif %}"
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor "
            "%}";
        loaded.clear();
        notices.clear();
        finished.clear();
        load(QString::fromStdString(test::tiny_model_path("worker_raising_template", raising)));
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 20000);
        QCOMPARE(loaded.at(0).at(0).value<ui::ModelInfoData>().chat_template,
                 QStringLiteral("model's own (chatml family)"));
        generate(11, {{"user", "Hi"}}, 3);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 20000);
        QCOMPARE(notices.count(), 0);  // accepted: no notice
        generate(12, {{"system", "Be brief."}, {"user", "Hi"}}, 3);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 2, 20000);
        QCOMPARE(notices.count(), 1);
        notice = notices.at(0).at(0).toString();
        QVERIFY2(notice.contains("System role not supported") && notice.contains("chatml"),
                 qPrintable(notice));
        QVERIFY(finished.at(1).at(3).toBool());
    }

    // A template with Qwen 3's enable_thinking switch: the model is reported as having one, and
    // the setting reaches the template (here "off" writes a longer prompt: 'no thinking' text).
    void thinkingSettingReachesTheTemplate() {
        test::TinyModelSpec spec;
        spec.chat_template =
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor "
            "%}"
            "<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}"
            "<think>\n\n</think>\n\n the answer comes at once {% endif %}";
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy started(worker_, &InferenceWorker::generationStarted);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        load(QString::fromStdString(test::tiny_model_path("worker_thinking_template", spec)));
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 20000);
        QVERIFY(loaded.at(0).at(0).value<ui::ModelInfoData>().supports_thinking);
        generate(20, {{"user", "Hi"}}, 2, true);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 20000);
        generate(21, {{"user", "Hi"}}, 2, false);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 2, 20000);
        const int with_thinking = started.at(0).at(1).toInt();
        const int without = started.at(1).at(1).toInt();
        QVERIFY2(without > with_thinking,
                 qPrintable(QString("%1 vs %2").arg(without).arg(with_thinking)));
        // A model without the switch is reported as such.
        loaded.clear();
        load(model_);
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 20000);
        QVERIFY(!loaded.at(0).at(0).value<ui::ModelInfoData>().supports_thinking);
    }

    // Speculation on the real default model: prompt lookup gives the same greedy text as plain
    // decoding; a verification step's several tokens all arrive, in order, each with its origin
    // and the step they share; per-token latency shares the step's time; the metrics report
    // acceptance. A draft with another vocabulary is refused with a clear message and the
    // engine keeps running. Last in this suite: it leaves SmolLM2 loaded.
    void speculationLookupMatchesPlainAndDeliversEveryToken() {
        const std::string smol = test::smollm2_model();
        if (smol.empty()) QSKIP("SmolLM2-135M-Instruct is not installed (run tools/setup-deps)");
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy applied(worker_, &InferenceWorker::speculationApplied);
        QSignalSpy failed(worker_, &InferenceWorker::speculationFailed);
        load(QString::fromStdString(smol));
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(applied.count() == 1, 10000);
        QCOMPARE(applied.last().at(0).value<ui::SpeculationSettings>().mode,
                 ui::SpeculationSettings::Mode::Off);
        const QVector<ChatTurn> turns{
            {"user",
             "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog "
             "near the river bank."}};
        auto run = [&](qint64 conversation, QList<ui::TokenData>& tokens, QString& text,
                       ui::MetricsData& metrics) {
            QSignalSpy token_spy(worker_, &InferenceWorker::tokenGenerated);
            QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
            QSignalSpy metrics_spy(worker_, &InferenceWorker::metricsChanged);
            generate(conversation, turns, 32, false);
            QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 120000);
            for (const auto& t : token_spy) tokens << t.at(1).value<ui::TokenData>();
            text = finished.at(0).at(1).toString();
            metrics = metrics_spy.last().at(0).value<ui::MetricsData>();
        };
        QList<ui::TokenData> plain_tokens;
        QString plain_text;
        ui::MetricsData plain_metrics;
        run(301, plain_tokens, plain_text, plain_metrics);
        QVERIFY(!plain_metrics.speculating);
        for (const auto& t : plain_tokens) QCOMPARE(t.origin, ui::TokenOrigin::Plain);

        ui::SpeculationSettings lookup;
        lookup.mode = ui::SpeculationSettings::Mode::Lookup;
        lookup.max_k = 8;
        QVERIFY(QMetaObject::invokeMethod(worker_, "setSpeculation", Qt::QueuedConnection,
                                          Q_ARG(tokenscope::ui::SpeculationSettings, lookup)));
        QTRY_VERIFY_WITH_TIMEOUT(applied.count() == 2, 60000);
        QCOMPARE(applied.last().at(0).value<ui::SpeculationSettings>(), lookup);
        QCOMPARE(failed.count(), 0);
        // The switch kept the engine and its cached conversation: asking conversation 301
        // again prefills only what differs from its cached tokens, and greedy text is the same.
        {
            QList<ui::TokenData> again;
            QString again_text;
            ui::MetricsData again_metrics;
            run(301, again, again_text, again_metrics);
            QCOMPARE(again_text, plain_text);
            QVERIFY2(again_metrics.reused_tokens > 0 &&
                         again_metrics.reused_tokens >= again_metrics.prompt_tokens - 1,
                     qPrintable(QStringLiteral("%1 of %2 prompt tokens reused")
                                    .arg(again_metrics.reused_tokens)
                                    .arg(again_metrics.prompt_tokens)));
        }

        QList<ui::TokenData> tokens;
        QString text;
        ui::MetricsData metrics;
        run(302, tokens, text, metrics);
        QCOMPARE(text, plain_text);
        QCOMPARE(tokens.size(), plain_tokens.size());
        QString streamed;
        for (qsizetype i = 0; i < tokens.size(); ++i) {
            streamed += tokens[i].text;
            QCOMPARE(tokens[i].id, plain_tokens[i].id);
        }
        QCOMPARE(streamed, text);
        // Every token of a verification step arrived, consecutively, sharing the step.
        int accepted = 0;
        int multi_token_steps = 0;
        for (qsizetype i = 0; i < tokens.size();) {
            const auto step = tokens[i].speculation;
            if (!step) {
                QCOMPARE(tokens[i].origin, ui::TokenOrigin::Plain);
                ++i;
                continue;
            }
            qsizetype n = 0;
            while (i + n < tokens.size() && tokens[i + n].speculation == step) ++n;
            // The step's tokens: its accepted proposals, then the model's own (unless the reply
            // ended inside the step).
            QVERIFY2(n == step->tokens || i + n == tokens.size(),
                     qPrintable(QStringLiteral("%1 of %2").arg(n).arg(step->tokens)));
            for (qsizetype j = 0; j < n; ++j) {
                if (j < step->accepted) {
                    QCOMPARE(tokens[i + j].origin, ui::TokenOrigin::Accepted);
                    QCOMPARE(tokens[i + j].id, step->proposed[j].id);
                    ++accepted;
                } else {
                    QVERIFY(tokens[i + j].origin == ui::TokenOrigin::Corrected ||
                            tokens[i + j].origin == ui::TokenOrigin::Bonus);
                }
            }
            if (n > 1) ++multi_token_steps;
            i += n;
        }
        QVERIFY2(multi_token_steps >= 1, "no verification step produced more than one token");
        QVERIFY(accepted >= 1);
        QVERIFY(metrics.speculating);
        QVERIFY(metrics.proposed > 0);
        QCOMPARE(metrics.accepted, qint64(accepted));
        QVERIFY(metrics.verifications >= multi_token_steps);
        QVERIFY(metrics.verify_step_ms > 0);
        QVERIFY(metrics.tokens_per_verification > 1.0);
        QVERIFY(metrics.decode_bytes_per_token > 0);
        // One latency value per token, a step's time shared among its tokens.
        QCOMPARE(metrics.token_ms.size(), tokens.size());

        // A draft with another vocabulary (the tiny test model): refused, engine kept.
        ui::SpeculationSettings draft;
        draft.mode = ui::SpeculationSettings::Mode::Draft;
        draft.draft_path = model_;
        QVERIFY(QMetaObject::invokeMethod(worker_, "setSpeculation", Qt::QueuedConnection,
                                          Q_ARG(tokenscope::ui::SpeculationSettings, draft)));
        QTRY_VERIFY_WITH_TIMEOUT(applied.count() == 3, 60000);
        QCOMPARE(failed.count(), 1);
        const QString message = failed.at(0).at(0).toString();
        QVERIFY2(message.contains(QStringLiteral("same vocabulary")), qPrintable(message));
        QCOMPARE(applied.last().at(0).value<ui::SpeculationSettings>(), lookup);
        QList<ui::TokenData> again;
        QString again_text;
        ui::MetricsData again_metrics;
        run(303, again, again_text, again_metrics);
        QCOMPARE(again_text, plain_text);
    }
};

QTEST_GUILESS_MAIN(TestInferenceWorker)
#include "test_inference_worker.moc"
