// The InferenceWorker in remote mode on its own thread, against our OpenAI server in-process on
// a tiny model, through QSignalSpy: connecting (modelLoaded with info.remote), streamed tokens
// with the server's candidates, generationFinished, Stop while streaming (the server frees the
// request's KV blocks), the KV and metrics panels, a refused port; and the main window's
// remote mode: the panels that need internals say what the server does not expose.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <QComboBox>
#include <QLabel>
#include "api_server.h"

#include "attention_heatmap.h"
#include "connect_dialog.h"
#include "conversation_store.h"
#include "inference_worker.h"
#include "kv_cache_view.h"
#include "main_window.h"
#include "remote_panels.h"
#include "server/tiny_server.h"

using namespace tokenscope;
using app::ChatTurn;
using app::InferenceWorker;

namespace {

std::unique_ptr<server::ApiServer> make_server(std::chrono::milliseconds step_pause) {
    return test::start_tiny_server(
        [&](server::ServerOptions& o) { o.loop.step_pause = step_pause; });
}

}  // namespace

class TestRemoteWorker : public QObject {
    Q_OBJECT

    QThread thread_;
    InferenceWorker* worker_ = nullptr;
    std::unique_ptr<server::ApiServer> server_;
    QString url_;

    void connectTo(const QString& url) {
        QVERIFY(QMetaObject::invokeMethod(
            worker_, "connectRemote", Qt::QueuedConnection,
            Q_ARG(tokenscope::app::RemoteSettings, (app::RemoteSettings{url, {}, {}}))));
    }
    void generate(const QString& user, int max_tokens) {
        ui::SamplingSettings s;
        s.temperature = 0.0f;
        s.max_tokens = max_tokens;
        QVERIFY(QMetaObject::invokeMethod(
            worker_, "generate", Qt::QueuedConnection, Q_ARG(qint64, 7),
            Q_ARG(QVector<tokenscope::app::ChatTurn>, (QVector<ChatTurn>{{"user", user}})),
            Q_ARG(tokenscope::ui::SamplingSettings, s)));
    }

  private slots:
    void initTestCase() {
        app::register_worker_types();
        server_ = make_server(std::chrono::milliseconds(5));
        url_ = QString("http://127.0.0.1:%1/v1").arg(server_->port());
        worker_ = new InferenceWorker;
        worker_->moveToThread(&thread_);
        connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
        thread_.start();
    }
    void cleanupTestCase() {
        worker_->stop();
        thread_.quit();
        thread_.wait();
        server_.reset();
    }

    void refusedPortFails() {
        QSignalSpy failed(worker_, &InferenceWorker::loadFailed);
        connectTo("http://127.0.0.1:1/v1");
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() > 0, 10000);
        QVERIFY(failed.first().first().toString().contains("127.0.0.1:1"));
    }

    void connectsAndStreams() {
        QSignalSpy loaded(worker_, &InferenceWorker::modelLoaded);
        QSignalSpy kv(worker_, &InferenceWorker::kvChanged);
        connectTo(url_);
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() > 0, 10000);
        const auto info = loaded.first().first().value<ui::ModelInfoData>();
        QVERIFY(info.remote);
        QVERIFY(info.remote_internals);
        QCOMPARE(info.name, QString("tiny"));
        QTRY_VERIFY_WITH_TIMEOUT(kv.count() >= 1, 5000);

        QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        QSignalSpy metrics(worker_, &InferenceWorker::metricsChanged);
        QSignalSpy attention(worker_, &InferenceWorker::attentionChanged);
        generate("Tell me about the garden", 12);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 30000);
        QVERIFY(tokens.count() > 0);
        QString joined;
        for (const auto& args : tokens) {
            QCOMPARE(args.at(0).toLongLong(), 7);
            const auto t = args.at(1).value<ui::TokenData>();
            joined += t.text;
            QVERIFY(t.id >= 0);            // our server's extension: token ids
            QVERIFY(!t.before.isEmpty());  // ... and the candidates before and after shaping
            QVERIFY(t.source.isEmpty());   // the same two lists the local panel shows
        }
        const auto done = finished.first();
        QCOMPARE(done.at(1).toString(), joined);
        QVERIFY(done.at(3).toBool());  // complete
        QVERIFY(!metrics.isEmpty());
        const auto m = metrics.last().first().value<ui::MetricsData>();
        QVERIFY(m.ttft_ms > 0.0);
        QVERIFY(m.token_ms.size() == tokens.count());
        // The KV panel: the server's block map, freed again after the reply.
        const auto map = kv.last().first().value<ui::KvBlockMapData>();
        QVERIFY(!map.block_owner.isEmpty());
        QVERIFY(map.remote_note.contains("/tokenscope/v1/kv"));

        // The heatmap: the reply's attention from GET /tokenscope/v1/attention, an n x n lower
        // triangle over the prompt and the answer, each row a distribution; another layer and
        // head on request, as for a local model.
        QTRY_VERIFY_WITH_TIMEOUT(attention.count() > 0, 10000);
        const auto a = attention.last().first().value<ui::AttentionData>();
        QVERIFY(a.rows.size() > tokens.count());  // the prompt's rows and the answer's
        QCOMPARE(a.labels.size(), a.rows.size());
        for (int q = 0; q < a.rows.size(); ++q) {
            QCOMPARE(a.rows[q].size(), qsizetype(q + 1));
            double sum = 0;
            for (float w : a.rows[q]) sum += w;
            QVERIFY(std::abs(sum - 1.0) < 5e-3);
        }
        QVERIFY(QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection,
                                          Q_ARG(int, 1), Q_ARG(int, 3)));
        QTRY_VERIFY_WITH_TIMEOUT(attention.count() > 1, 10000);
        const auto one = attention.last().first().value<ui::AttentionData>();
        QCOMPARE(one.layer, 1);
        QCOMPARE(one.head, 3);
        QCOMPARE(one.rows.size(), a.rows.size());
        QVERIFY(one.rows != a.rows);  // one head is not the mean of four
    }

    // Stop closes the stream at once; the reply ends incomplete and the server's blocks return.
    void stopWhileStreaming() {
        QSignalSpy tokens(worker_, &InferenceWorker::tokenGenerated);
        QSignalSpy finished(worker_, &InferenceWorker::generationFinished);
        generate("Tell me a long story", 400);
        QTRY_VERIFY_WITH_TIMEOUT(tokens.count() > 0, 30000);
        worker_->stop();  // from this (the GUI) thread, as the window does
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 10000);
        QCOMPARE(finished.first().at(2).toString(), QString("cancelled"));
        QVERIFY(!finished.first().at(3).toBool());
        QVERIFY(tokens.count() < 400);
        QTRY_COMPARE_WITH_TIMEOUT(server_->loop().running(), 0, 10000);
    }

    // Panel data for a third-party server: probabilities from top_logprobs, no logits, the KV
    // usage gauge only, and notes saying what is not exposed.
    void thirdPartyPanelData() {
        remote::RemoteToken rt;
        rt.text = rt.token = " Paris";
        rt.logprob = std::log(0.5);
        rt.has_logprobs = true;
        rt.top = {{-1, " Paris", std::log(0.5), 0.5, std::nullopt},
                  {-1, " Lyon", std::log(0.25), 0.25, std::nullopt}};
        const auto t = app::remote_token_data(rt, false);
        QCOMPARE(t.probability, 0.5f);
        QCOMPARE(t.before.size(), 2);
        QCOMPARE(t.before[0].id, t.id);  // the chosen row
        QVERIFY(t.before[1].id != t.id);
        QVERIFY(std::isnan(t.before[0].logit));
        QVERIFY(t.source.contains("top_logprobs"));
        remote::ServerMetrics vllm;
        vllm.engine = "vllm";
        vllm.kv_usage = 0.42;
        vllm.requests_running = 3;
        const auto kv = app::remote_kv_from_metrics(vllm, {});
        ui::KvCacheView view;
        view.setData(kv);
        QCOMPARE(view.occupancy(), 0.42);
        QVERIFY(view.occupancyText().contains("42.0%"));
        QVERIFY(view.formulaText().contains("does not expose"));
        const auto none = app::remote_kv_from_metrics(std::nullopt, "this server has no /metrics");
        QVERIFY(none.remote_note.contains("no /metrics"));
    }

    // File › Connect to server…'s dialog lists the server's models off the GUI thread, and
    // shows the one-line error for a server that is not there.
    void connectDialogListsModels() {
        app::ConnectDialog dialog({url_, {}, {}}, false);
        QSignalSpy listed(&dialog, &app::ConnectDialog::modelsListed);
        QTRY_VERIFY_WITH_TIMEOUT(listed.count() > 0, 10000);
        QVERIFY(listed.first().first().toBool());
        QCOMPARE(dialog.modelBox()->currentText(), QString("tiny"));
        QCOMPARE(dialog.settings().model, QString("tiny"));
        app::ConnectDialog refused({"http://127.0.0.1:1", {}, {}}, false);
        QSignalSpy failed(&refused, &app::ConnectDialog::modelsListed);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() > 0, 10000);
        QVERIFY(!failed.first().first().toBool());
        QVERIFY(refused.statusLabel()->text().contains("connection refused"));
    }

    // The window connected to our server: the attention panel says what to expect, a reply
    // streams in, and its attention fills the heatmap afterwards.
    void mainWindowRemoteMode() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QStandardPaths::setTestModeEnabled(true);
        app::MainWindowOptions options;
        options.store = (dir.path() + "/c.sqlite").toStdString();
        options.model_path = dir.path() + "/none.gguf";  // no local model
        options.remote = {url_, {}, {}};
        app::MainWindow window(options);
        QSignalSpy ready(&window, &app::MainWindow::modelReadyChanged);
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() > 0, 10000);
        QVERIFY(window.remoteMode());
        QVERIFY(window.statusText().contains("remote: http://127.0.0.1"));
        QVERIFY2(window.attentionView()->placeholderText().contains("No attention yet"),
                 qPrintable(window.attentionView()->placeholderText()));
        QSignalSpy done(&window, &app::MainWindow::generationDone);
        window.sendMessage("hello");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() > 0, 30000);
        // The reply's attention arrives from GET /tokenscope/v1/attention after it ends.
        QTRY_VERIFY_WITH_TIMEOUT(!window.attentionView()->data().rows.isEmpty(), 10000);
        // The conversation records that a server answered it: its model and URL (the server's
        // base, without the /v1 the test connected with).
        app::ConversationStore store(options.store);
        const auto conversations = store.conversations();
        QCOMPARE(conversations.size(), 1);
        const QString base = url_.left(url_.lastIndexOf("/v1"));
        QVERIFY2(conversations[0].model_path.endsWith(" on " + base),
                 qPrintable(conversations[0].model_path));
    }
};

QTEST_MAIN(TestRemoteWorker)
#include "test_remote_worker.moc"
