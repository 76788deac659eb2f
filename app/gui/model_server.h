#pragma once
// "Serve this model" (File menu): the OpenAI-compatible server of `tokenscope-cli serve`
// (app/server) inside the app, on a second engine loaded from the same file (the weights are
// memory-mapped, so the two engines share their pages; each has its own KV cache and threads).
// Loading takes seconds and stopping joins the server's threads, so both run on a pool thread;
// the GUI thread only starts them and receives started / failed / stopped.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <memory>

#include "inference_worker.h"

namespace tokenscope::server {
class ApiServer;
}  // namespace tokenscope::server

namespace tokenscope::app {

struct ServeSettings {
    QString host = "127.0.0.1";  // another address needs an API key (the server refuses it)
    int port = 8080;             // 0: any free port
    QString api_key;             // empty: none (loopback only)
    int parallel = 4;            // requests decoded together (continuous batching)
};

class ModelServer : public QObject {
    Q_OBJECT

  public:
    enum class State { Stopped, Starting, Running, Stopping };

    explicit ModelServer(QObject* parent = nullptr);
    ~ModelServer() override;  // stops a running server and waits for a start in flight
    ModelServer(const ModelServer&) = delete;
    ModelServer& operator=(const ModelServer&) = delete;

    State state() const { return state_; }
    bool running() const { return state_ == State::Running; }
    QString modelPath() const { return model_; }  // what it serves
    // Where it listens ("http://127.0.0.1:8080") and the key it asks for; empty unless running.
    QString url() const { return running() ? url_ : QString(); }
    QString apiKey() const { return key_; }

  public slots:
    // Ignored unless stopped. Emits started(url) or failed(message).
    void start(const QString& model_path, const tokenscope::app::LoadOptions& load,
               const tokenscope::app::ServeSettings& settings);
    // Ends open streams and closes the port; emits stopped(). Ignored unless running.
    void stop();

  signals:
    void started(const QString& url);
    void failed(const QString& message);
    void stopped();

  private:
    struct StartResult {
        std::shared_ptr<server::ApiServer> server;
        QString url;
        QString error;
    };
    static StartResult start_server(QString model_path, LoadOptions load, ServeSettings settings);

    State state_ = State::Stopped;
    QString model_;
    QString url_;
    QString key_;
    std::shared_ptr<server::ApiServer> server_;
    QFutureWatcher<StartResult> starting_;
    QFutureWatcher<void> stopping_;
};

}  // namespace tokenscope::app

Q_DECLARE_METATYPE(tokenscope::app::ServeSettings)
