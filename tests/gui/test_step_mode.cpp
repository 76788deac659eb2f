// Step mode with a tiny model: the InferenceWorker on its own thread produces exactly one token
// per stepOnce (and none while paused), the first step is the prefill with its n x n block for
// every head, later steps one row each with costs from the model's numbers, and a stepped
// greedy reply equals the streamed one. Then the window: each click on Step (and each F10)
// adds exactly one token, Stop ends the paused reply, and the head views fill.
// The worker emits on its own thread, where a QSignalSpy records at once: QSignalSpy::wait()
// counts only emissions during the wait and loses a fast one, so waits poll count() instead.
#include <QDockWidget>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QThread>
#include <QToolButton>
#include <QtTest>

#include "chat_view.h"
#include "head_grid.h"
#include "head_overview.h"
#include "inference_worker.h"
#include "main_window.h"
#include "reference/tiny_model.h"
#include "step_view.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::ChatTurn;
using app::InferenceWorker;

class TestStepMode : public QObject {
    Q_OBJECT

    QThread thread_;
    InferenceWorker* worker_ = nullptr;
    QString model_;
    test::TinyModelSpec spec_;

    void call(const char* method, qint64 conversation, int max_tokens) {
        ui::SamplingSettings s;
        s.temperature = 0.0f;
        s.max_tokens = max_tokens;
        const QVector<ChatTurn> turns{{"user", "Tell me about the little robot"}};
        QVERIFY(QMetaObject::invokeMethod(worker_, method, Qt::QueuedConnection,
                                          Q_ARG(qint64, conversation),
                                          Q_ARG(QVector<tokenscope::app::ChatTurn>, turns),
                                          Q_ARG(tokenscope::ui::SamplingSettings, s)));
    }
    void step_once() {
        QVERIFY(QMetaObject::invokeMethod(worker_, "stepOnce", Qt::QueuedConnection));
    }

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        app::register_worker_types();
        model_ = QString::fromStdString(test::tiny_model_path("step_llama", spec_));
        worker_ = new InferenceWorker;
        worker_->moveToThread(&thread_);
        connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
        thread_.start();
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        app::LoadOptions options;
        options.threads = 2;
        options.kv_capacity_tokens = 512;
        QVERIFY(QMetaObject::invokeMethod(worker_, "loadModel", Qt::QueuedConnection,
                                          Q_ARG(QString, model_),
                                          Q_ARG(tokenscope::app::LoadOptions, options)));
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() > 0, 30000);
    }
    void cleanupTestCase() {
        thread_.quit();
        thread_.wait();
    }

    // One token per stepOnce, none in between; the reply ends after max_tokens steps.
    void oneTokenPerStep() {
        QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
        QSignalSpy steps(worker_, &InferenceWorker::stepTaken);
        QSignalSpy started(worker_, &InferenceWorker::generationStarted);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        QSignalSpy kv(worker_, &InferenceWorker::kvChanged);
        call("beginStepping", 11, 4);
        QTRY_VERIFY_WITH_TIMEOUT(started.count() > 0, 10000);
        const int prompt_tokens = started[0][1].toInt();
        QTest::qWait(300);
        QCOMPARE(tokens.count(), 0);  // paused: nothing happens without a step
        QString stepped;
        for (int i = 1; i <= 4; ++i) {
            const int kv_before = kv.count();
            step_once();
            QTRY_COMPARE_WITH_TIMEOUT(steps.count(), i, 20000);
            QCOMPARE(tokens.count(), i);
            QTest::qWait(100);
            QCOMPARE(tokens.count(), i);  // and no more until the next step
            const auto step = steps.last()[1].value<ui::StepData>();
            stepped += tokens.last()[1].value<ui::TokenData>().text;
            QCOMPARE(step.index, i - 1);
            QCOMPARE(step.token.id, tokens.last()[1].value<ui::TokenData>().id);
            QCOMPARE(step.attention.heads.size(), qsizetype(spec_.heads));
            QVERIFY(step.flops > 0 && step.weight_bytes > 0 && step.kv_write_bytes > 0);
            // Attention's FLOPs, counted by hand for this model (no sliding window): per query
            // row and key it sees, 2 x head_dim for the score and 2 x head_dim for the weighted
            // sum, in every head and layer. The prefill's rows see 1..n keys, a decode row all.
            const double per_key = 4.0 * double(spec_.head_dim * spec_.heads * spec_.layers);
            const double keys = i == 1 ? double(prompt_tokens) * double(prompt_tokens + 1) / 2
                                       : double(prompt_tokens + i - 1);
            QCOMPARE(step.attention_flops, per_key * keys);
            QVERIFY(!step.token.before.isEmpty());
            // The KV view's highlight: the step's write ends at the position the step reports
            // (counted from the attention rows, not from the cache), in the slot that position
            // has in its block, in a block of the same sequence.
            QTRY_VERIFY_WITH_TIMEOUT(kv.count() > kv_before, 10000);
            const auto map = kv.last()[0].value<ui::KvBlockMapData>();
            QCOMPARE(map.last_count, i == 1 ? prompt_tokens : 1);
            QCOMPARE(qint64(map.last_position + map.last_count - 1), step.kv_position);
            QCOMPARE(map.last_slot, int(step.kv_position % map.block_size));
            QVERIFY(map.last_block >= 0 && map.last_block < map.block_owner.size());
            QCOMPARE(map.block_owner[map.last_block], map.last_owner);
            if (i == 1) {
                // Prefill: every prompt token at once, an n x n lower triangle per head.
                QVERIFY(step.prefill);
                QCOMPARE(step.inputs.size(), prompt_tokens);
                QCOMPARE(step.attention.first_query, 0);
                QCOMPARE(step.attention.rows(), prompt_tokens);
                for (const auto& head : step.attention.heads)
                    for (int q = 0; q < head.size(); ++q)
                        QCOMPARE(head[q].size(), qsizetype(q + 1));
                QCOMPARE(step.kv_position, qint64(prompt_tokens - 1));
            } else {
                // Decode: the previous token alone, one row over every key so far.
                QVERIFY(!step.prefill);
                QCOMPARE(step.inputs.size(), 1);
                QCOMPARE(step.attention.rows(), 1);
                QCOMPARE(step.attention.keys(), prompt_tokens + i - 1);
                QCOMPARE(step.kv_position, qint64(prompt_tokens + i - 2));
                const auto prev = steps[steps.count() - 2][1].value<ui::StepData>();
                QVERIFY(step.flops < prev.flops ||
                        i > 2);  // a decode step is far cheaper than the prefill
                double sum = 0;
                for (float w : step.attention.heads[0][0]) sum += w;
                QVERIFY(std::abs(sum - 1.0) < 5e-3);
            }
        }
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
        QCOMPARE(finished[0][0].toLongLong(), qint64(11));
        QCOMPARE(finished[0][1].toString(), stepped);
        QVERIFY(finished[0][3].toBool());
        step_once();  // after the end: nothing
        QTest::qWait(200);
        QCOMPARE(tokens.count(), 4);

        // The same request streamed gives the same greedy text.
        QSignalSpy streamed(worker_, &InferenceWorker::generationFinished);
        call("generate", 12, 4);
        QTRY_VERIFY_WITH_TIMEOUT(streamed.count() > 0, 20000);
        QCOMPARE(streamed[0][1].toString(), stepped);
    }

    // Stop while paused: the next stepOnce cancels, the partial reply ends as stopped.
    void stopEndsAPausedReply() {
        QSignalSpy steps(worker_, &InferenceWorker::stepTaken);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        call("beginStepping", 13, 50);
        step_once();
        QTRY_COMPARE_WITH_TIMEOUT(steps.count(), 1, 20000);
        worker_->stop();
        step_once();
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 10000);
        QVERIFY(!finished[0][3].toBool());
        // The engine is free for the next reply.
        QSignalSpy again(worker_, &InferenceWorker::generationFinished);
        call("generate", 14, 2);
        QTRY_VERIFY_WITH_TIMEOUT(again.count() > 0, 20000);
        QVERIFY(again[0][3].toBool());
    }

    // The head views' data: every head of a layer, entropy and distance of every layer x head.
    void headGridAndOverview() {
        QSignalSpy grid(worker_, &InferenceWorker::headGridChanged);
        QSignalSpy overview(worker_, &InferenceWorker::headOverviewChanged);
        QVERIFY(QMetaObject::invokeMethod(worker_, "requestHeadGrid", Qt::QueuedConnection,
                                          Q_ARG(int, 1)));
        QVERIFY(QMetaObject::invokeMethod(worker_, "requestHeadOverview", Qt::QueuedConnection));
        QTRY_VERIFY_WITH_TIMEOUT(overview.count() > 0, 10000);
        QCOMPARE(grid.count(), 1);
        const auto g = grid[0][0].value<ui::HeadGridData>();
        QCOMPARE(g.layer, 1);
        QCOMPARE(g.heads.size(), qsizetype(spec_.heads));
        QVERIFY(g.rows() > 3);
        QCOMPARE(g.first_query, 0);
        const auto o = overview[0][0].value<ui::HeadOverviewData>();
        QCOMPARE(o.layers, int(spec_.layers));
        QCOMPARE(o.heads, int(spec_.heads));
        QCOMPARE(o.entropy.size(), qsizetype(spec_.layers * spec_.heads));
        for (int i = 0; i < o.entropy.size(); ++i) {
            // 0 <= entropy <= log2(keys); distance between 0 and the context length.
            QVERIFY(o.entropy[i] >= 0 && o.entropy[i] <= std::log2(double(o.rows)) + 1e-3);
            QVERIFY(o.distance[i] >= 0 && o.distance[i] < o.rows);
        }
    }

    // The window: Step sends the typed message and takes the prefill step; each further
    // click, and F10, adds exactly one token; Stop ends the reply.
    void windowStepButtonOneTokenPerClick() {
        app::MainWindowOptions o;
        o.model_path = model_;
        o.store = std::filesystem::path(test::scratch_dir()) / "step_store.sqlite";
        std::filesystem::remove(o.store);
        o.load.threads = 1;
        o.load.kv_capacity_tokens = 1024;
        app::MainWindow w(o);
        w.resize(1280, 720);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.modelReady(), 30000);
        QSignalSpy tokens(w.worker(), &InferenceWorker::tokenGenerated);
        QSignalSpy done(&w, &app::MainWindow::generationDone);
        w.chatView()->input()->setPlainText("Tell me a story");
        QToolButton* button = w.stepView()->stepButton();
        QTest::mouseClick(button, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(w.stepView()->stepCount(), 1, 20000);
        QCOMPARE(tokens.count(), 1);
        QVERIFY(w.stepping());
        QVERIFY(w.stepView()->titleText().startsWith("Prefill"));
        for (int i = 2; i <= 3; ++i) {
            QTest::mouseClick(button, Qt::LeftButton);
            QTRY_COMPARE_WITH_TIMEOUT(w.stepView()->stepCount(), i, 20000);
            QTest::qWait(150);
            QCOMPARE(tokens.count(), i);
        }
        // F10 (an application-wide shortcut) steps too.
        w.activateWindow();
        w.stepAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.stepView()->stepCount(), 4, 20000);
        QCOMPARE(tokens.count(), 4);
        QVERIFY(w.stepView()->titleText().startsWith("Decode"));
        // Back and forward browse the steps taken without generating.
        QTest::mouseClick(w.stepView()->backButton(), Qt::LeftButton);
        QCOMPARE(w.stepView()->currentStep(), 2);
        QTest::mouseClick(w.stepView()->forwardButton(), Qt::LeftButton);
        QCOMPARE(w.stepView()->currentStep(), 3);
        QCOMPARE(tokens.count(), 4);
        w.stopGeneration();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 20000);
        QVERIFY(!w.stepping());
        QCOMPARE(w.chatView()->messageCount(), 2);
    }
};

QTEST_MAIN(TestStepMode)
#include "test_step_mode.moc"
