// ModelServer: the app's OpenAI-compatible server (see model_server.h).
#include "model_server.h"

#include <QFileInfo>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>

#include "api_server.h"
#include "runtime/engine.h"

namespace tokenscope::app {

ModelServer::ModelServer(QObject* parent) : QObject(parent) {
    qRegisterMetaType<ServeSettings>();
    connect(&starting_, &QFutureWatcher<StartResult>::finished, this, [this] {
        StartResult r = starting_.result();
        if (!r.server) {
            state_ = State::Stopped;
            emit failed(r.error);
            return;
        }
        server_ = std::move(r.server);
        url_ = r.url;
        state_ = State::Running;
        emit started(r.url);
    });
    connect(&stopping_, &QFutureWatcher<void>::finished, this, [this] {
        state_ = State::Stopped;
        emit stopped();
    });
}

ModelServer::~ModelServer() {
    // The app is closing: a start in flight ends first, then the server stops here (stop()
    // ends open streams at once, so this does not wait for replies to finish).
    starting_.waitForFinished();
    stopping_.waitForFinished();
    std::shared_ptr<server::ApiServer> server = std::move(server_);
    // A start that finished just now has not reached the finished handler: its server is here.
    if (!server && state_ == State::Starting) server = starting_.result().server;
    if (server) server->stop();
}

ModelServer::StartResult ModelServer::start_server(QString model_path, LoadOptions load,
                                                   ServeSettings settings) {
    StartResult r;
    try {
        server::ServerOptions o;
        o.host = settings.host.toStdString();
        o.port = settings.port;
        o.api_key = settings.api_key.toStdString();
        o.loop.parallel = std::max(1, settings.parallel);
        o.model_id = QFileInfo(model_path).completeBaseName().toStdString();
        server::require_safe_bind(o);  // before spending seconds loading the model
        runtime::EngineOptions engine_opts = engine_options(load);
        engine_opts.speculation = {};  // requests choose; the app's own setting is for its chat
        auto engine = runtime::Engine::load(model_path.toStdString(), engine_opts);
        auto server = std::make_shared<server::ApiServer>(std::move(engine), o);
        const int port = server->start();
        const QString host =
            settings.host.contains(':') ? "[" + settings.host + "]" : settings.host;
        r.url = QStringLiteral("http://%1:%2").arg(host).arg(port);
        r.server = std::move(server);
    } catch (const std::exception& e) {
        r.error = QString::fromUtf8(e.what());
    }
    return r;
}

void ModelServer::start(const QString& model_path, const LoadOptions& load,
                        const ServeSettings& settings) {
    if (state_ != State::Stopped) return;
    state_ = State::Starting;
    model_ = model_path;
    key_ = settings.api_key;
    starting_.setFuture(QtConcurrent::run(&ModelServer::start_server, model_path, load, settings));
}

void ModelServer::stop() {
    if (state_ != State::Running) return;
    state_ = State::Stopping;
    std::shared_ptr<server::ApiServer> server = std::move(server_);
    stopping_.setFuture(QtConcurrent::run([server] { server->stop(); }));
}

}  // namespace tokenscope::app
