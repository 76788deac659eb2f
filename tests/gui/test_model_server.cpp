// File › Serve this model…: the ModelServer loads the model on a pool thread and serves the
// OpenAI API on loopback, checked with an independent HTTP client (cpp-httplib's) while the
// GUI thread stays free; it refuses a public bind without a key and a missing file with
// messages that name them; the window's actions follow the model and the server's state, the
// status bar shows the address, and closing the window while serving returns promptly.
#include <httplib.h>

#include <QAction>
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <nlohmann/json.hpp>

#include "main_window.h"
#include "model_server.h"
#include "reference/tiny_model.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::ModelServer;
using app::ServeSettings;

namespace {
int port_of(const QString& url) {
    return url.section(':', -1).toInt();
}

// GET or POST on 127.0.0.1:port; status 0 when nothing answered.
std::pair<int, std::string> http(int port, const std::string& path, const std::string& body = {},
                                 const std::string& key = {}) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(5);
    client.set_read_timeout(30);
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    auto r = body.empty() ? client.Get(path, headers)
                          : client.Post(path, headers, body, "application/json");
    if (!r) return {0, {}};
    return {r->status, r->body};
}
}  // namespace

class TestModelServer : public QObject {
    Q_OBJECT
    QString model_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        model_ =
            QString::fromStdString(test::tiny_model_path("serve_llama", test::TinyModelSpec{}));
    }

    void servesTheOpenAiApiAndStops() {
        ModelServer server;
        QSignalSpy started(&server, &ModelServer::started);
        QSignalSpy failed(&server, &ModelServer::failed);
        QSignalSpy stopped(&server, &ModelServer::stopped);
        ServeSettings settings;
        settings.port = 0;  // any free port
        settings.api_key = "sekrit";
        app::LoadOptions load;
        load.threads = 1;
        load.kv_capacity_tokens = 256;
        server.start(model_, load, settings);
        QCOMPARE(server.state(), ModelServer::State::Starting);  // loading is off this thread
        QTRY_VERIFY_WITH_TIMEOUT(started.count() + failed.count() > 0, 30000);
        QCOMPARE(failed.count(), 0);
        QVERIFY(server.running());
        const QString url = started[0][0].toString();
        QVERIFY2(url.startsWith("http://127.0.0.1:"), qPrintable(url));
        const int port = port_of(url);
        QVERIFY(port > 0);

        QCOMPARE(http(port, "/health").first, 200);
        QCOMPARE(http(port, "/v1/models").first, 401);  // the key is required
        const auto [models_status, models] = http(port, "/v1/models", {}, "sekrit");
        QCOMPARE(models_status, 200);
        QCOMPARE(nlohmann::json::parse(models)["data"][0]["id"].get<std::string>(),
                 std::string("serve_llama"));  // the file's name without .gguf
        const auto [status, body] =
            http(port, "/v1/completions",
                 R"({"model":"serve_llama","prompt":"Once upon a time","max_tokens":4,)"
                 R"("temperature":0})",
                 "sekrit");
        QVERIFY2(status == 200, body.c_str());
        const auto reply = nlohmann::json::parse(body);
        QVERIFY(reply["choices"][0]["text"].is_string());
        QVERIFY(reply["usage"]["completion_tokens"].get<int>() >= 1);
        QVERIFY(reply["usage"]["completion_tokens"].get<int>() <= 4);

        server.stop();
        QCOMPARE(server.state(), ModelServer::State::Stopping);
        QTRY_VERIFY_WITH_TIMEOUT(stopped.count() == 1, 10000);
        QCOMPARE(server.state(), ModelServer::State::Stopped);
        QCOMPARE(http(port, "/health").first, 0);  // the port is closed
    }

    void refusesAPublicBindWithoutAKey() {
        ModelServer server;
        QSignalSpy failed(&server, &ModelServer::failed);
        ServeSettings settings;
        settings.host = "0.0.0.0";
        settings.port = 0;
        server.start(model_, app::LoadOptions{}, settings);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 10000);
        const QString message = failed[0][0].toString();
        QVERIFY2(message.contains("0.0.0.0") && message.contains("API key"), qPrintable(message));
        QCOMPARE(server.state(), ModelServer::State::Stopped);
    }

    void aMissingFileFailsWithItsName() {
        ModelServer server;
        QSignalSpy failed(&server, &ModelServer::failed);
        const QString missing = QString::fromStdString(test::scratch_dir()) + "/no-such.gguf";
        ServeSettings settings;
        settings.port = 0;
        server.start(missing, app::LoadOptions{}, settings);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 10000);
        QVERIFY2(failed[0][0].toString().contains(missing), qPrintable(failed[0][0].toString()));
    }

    // The window: Serve is enabled once the model is loaded, the status bar shows the address
    // while serving, Stop serving ends it, and closing while serving does not hang.
    void windowServesTheLoadedModel() {
        app::MainWindowOptions options;
        options.model_path = model_;
        options.store = test::scratch_dir() + "/serve_window.sqlite";
        options.load.threads = 1;
        auto w = std::make_unique<app::MainWindow>(options);
        w->show();
        QTRY_VERIFY_WITH_TIMEOUT(w->modelReady(), 30000);
        auto* serve = w->findChild<QAction*>("serveModel");
        auto* stop = w->findChild<QAction*>("stopServing");
        auto* status = w->findChild<QLabel*>("serveStatus");
        QVERIFY(serve && stop && status);
        QTRY_VERIFY(serve->isEnabled());
        QVERIFY(!stop->isEnabled());
        QVERIFY(w->modelServer());
        QSignalSpy started(w->modelServer(), &ModelServer::started);
        ServeSettings settings;
        settings.port = 0;
        w->serveModel(settings);
        QVERIFY(!serve->isEnabled());  // one server at a time
        QTRY_VERIFY_WITH_TIMEOUT(started.count() == 1, 30000);
        QVERIFY(stop->isEnabled());
        QVERIFY(status->isVisible());
        const QString url = started[0][0].toString();
        QVERIFY2(status->text().contains(url), qPrintable(status->text()));
        QCOMPARE(http(port_of(url), "/health").first, 200);

        // The app's own chat keeps working while it serves.
        QSignalSpy done(w.get(), &app::MainWindow::generationDone);
        w->sendMessage("Hello while serving");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);

        stop->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!status->isVisible(), 10000);
        QVERIFY(serve->isEnabled());
        QCOMPARE(http(port_of(url), "/health").first, 0);

        // Serving again, then closing the window: the server stops with it.
        QSignalSpy again(w->modelServer(), &ModelServer::started);
        w->serveModel(settings);
        QTRY_VERIFY_WITH_TIMEOUT(again.count() == 1, 30000);
        const int port = port_of(again[0][0].toString());
        QElapsedTimer clock;
        clock.start();
        w->close();
        w.reset();
        qInfo("close + teardown while serving: %lld ms", static_cast<long long>(clock.elapsed()));
        QCOMPARE(http(port, "/health").first, 0);
    }
};

QTEST_MAIN(TestModelServer)
#include "test_model_server.moc"
