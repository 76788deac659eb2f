#include "server_timeline_window.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QTimer>
#include <QVBoxLayout>

#include "batch_timeline_view.h"
#include "remote_engine.h"

namespace tokenscope::app {

namespace {
constexpr int kPollMs = 500;
}

ServerTimelinePoller::ServerTimelinePoller() = default;
ServerTimelinePoller::~ServerTimelinePoller() = default;

void ServerTimelinePoller::setServer(const QString& url, const QString& api_key) {
    url_ = url;
    key_ = api_key;
    engine_.reset();
}

void ServerTimelinePoller::poll(quint64 since) {
    if (url_.isEmpty()) return;
    try {
        if (!engine_) {
            remote::RemoteOptions o;
            o.url = url_.toStdString();
            o.api_key = key_.toStdString();
            o.connect_timeout_s = 3;
            o.read_timeout_s = 5;
            auto engine = std::make_unique<remote::RemoteEngine>(o);
            engine->connect();
            if (!engine->is_tokenscope()) {
                emit failed(tr("%1 is not a tokenscope server: its scheduler is not visible "
                               "through the OpenAI API.")
                                .arg(url_));
                return;  // asked again at the next poll (the server may be replaced)
            }
            engine_ = std::move(engine);
        }
        const auto page = engine_->schedule(since);
        if (!page) {
            engine_.reset();  // reconnect next time
            emit failed(tr("%1 did not answer GET /tokenscope/v1/schedule.").arg(url_));
            return;
        }
        emit this->page(url_, QByteArray::fromStdString(page->dump()));
    } catch (const std::exception& e) {
        engine_.reset();
        emit failed(QString::fromUtf8(e.what()));
    }
}

ServerTimelineWindow::ServerTimelineWindow(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Server timeline: continuous batching of real requests"));
    setObjectName(QStringLiteral("serverTimeline"));
    setWindowFlag(Qt::Window);
    auto* root = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    source_ = new QLabel(this);
    source_->setObjectName(QStringLiteral("timelineSource"));
    source_->setWordWrap(true);
    source_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(source_, 1);
    pause_ = new QPushButton(tr("&Pause"), this);
    pause_->setCheckable(true);
    pause_->setToolTip(tr("Stop asking the server for new steps (the server keeps its last 512)"));
    connect(pause_, &QPushButton::toggled, this, &ServerTimelineWindow::setPaused);
    top->addWidget(pause_);
    root->addLayout(top);
    status_ = new QLabel(this);
    status_->setObjectName(QStringLiteral("timelineStatus"));
    status_->setWordWrap(true);
    root->addWidget(status_);

    view_ = new ui::BatchTimelineView(this);
    scroll_ = new QScrollArea(this);
    scroll_->setWidget(view_);
    scroll_->setWidgetResizable(true);
    scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    root->addWidget(scroll_, 1);
    view_->installExportMenu(QStringLiteral("server-timeline"));

    poller_ = new ServerTimelinePoller;
    poller_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, poller_, &QObject::deleteLater);
    thread_.start();
    connect(poller_, &ServerTimelinePoller::page, this, &ServerTimelineWindow::apply);
    connect(poller_, &ServerTimelinePoller::failed, this, [this](const QString& why) {
        in_flight_ = false;
        status_->setText(tr("Not reachable: %1").arg(why));
    });
    timer_ = new QTimer(this);
    timer_->setInterval(kPollMs);
    connect(timer_, &QTimer::timeout, this, &ServerTimelineWindow::pollNow);

    const QRect avail =
        parentWidget() ? parentWidget()->screen()->availableGeometry() : QRect(0, 0, 1280, 720);
    resize(std::min(1000, avail.width() * 9 / 10), std::min(520, avail.height() * 8 / 10));
    watch({}, {}, {});
}

ServerTimelineWindow::~ServerTimelineWindow() {
    timer_->stop();
    thread_.quit();
    thread_.wait();
}

void ServerTimelineWindow::watch(const QString& url, const QString& api_key, const QString& what) {
    url_ = url;
    model_ = ServerTimelineModel();
    view_->setData({});
    in_flight_ = false;
    QMetaObject::invokeMethod(poller_, "setServer", Qt::QueuedConnection, Q_ARG(QString, url),
                              Q_ARG(QString, api_key));
    if (url.isEmpty()) {
        timer_->stop();
        source_->setText(
            tr("No tokenscope server to watch. Start one with File › Serve this model…, or "
               "connect to a `tokenscope-cli serve` with File › Connect to server…; then every "
               "request it runs (from any client) appears here, step by step."));
        status_->clear();
        return;
    }
    source_->setText(tr("%1 at %2: one row per request, one column per engine step; the bars "
                        "above are the tokens each step computed (prefill chunks stand out).")
                         .arg(what, url));
    status_->setText(tr("Connecting…"));
    if (!paused_) timer_->start();
    pollNow();
}

void ServerTimelineWindow::setPaused(bool paused) {
    paused_ = paused;
    if (pause_->isChecked() != paused) pause_->setChecked(paused);
    if (paused)
        timer_->stop();
    else if (!url_.isEmpty())
        timer_->start();
}

void ServerTimelineWindow::pollNow() {
    if (in_flight_ || url_.isEmpty()) return;
    in_flight_ = true;
    QMetaObject::invokeMethod(poller_, "poll", Qt::QueuedConnection,
                              Q_ARG(quint64, quint64(model_.next())));
}

void ServerTimelineWindow::apply(const QString& from, const QByteArray& page) {
    in_flight_ = false;
    if (from != url_) return;  // asked of the server watched before
    QString error;
    const auto json = nlohmann::json::parse(page.toStdString(), nullptr, false);
    const std::size_t before = model_.stepCount();
    const std::uint64_t next_before = model_.next();
    if (!model_.add(json, &error)) {
        status_->setText(tr("The server's answer was not a schedule: %1").arg(error));
        return;
    }
    if (model_.next() != next_before || before == 0) refresh();
    emit updated();
}

void ServerTimelineWindow::refresh() {
    const auto shown =
        std::size_t(ui::BatchTimelineView::stepsThatFit(scroll_->viewport()->width()));
    view_->setData(model_.data(shown));
    status_->setText(model_.summary(shown));
}

void ServerTimelineWindow::resizeEvent(QResizeEvent* event) {
    QDialog::resizeEvent(event);
    if (model_.stepCount() > 0) refresh();
}

QString ServerTimelineWindow::statusText() const {
    return status_->text();
}

}  // namespace tokenscope::app
