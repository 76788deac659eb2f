#pragma once
// Tools › Server timeline…: the scheduler timeline of a tokenscope server's real requests (the
// app's own "Serve this model", or `tokenscope-cli serve` the app is connected to), live. The
// window polls GET /tokenscope/v1/schedule twice a second on a thread of its own
// (ServerTimelinePoller: HTTP never runs on the GUI thread), keeps the steps in a
// ServerTimelineModel and draws the newest steps that fit the window's width with the Batch
// demo's BatchTimelineView (no sideways scrolling: it would take the row labels out of sight).
#include <QDialog>
#include <QThread>
#include <memory>

#include "server_timeline_model.h"

class QLabel;
class QPushButton;
class QScrollArea;
class QTimer;

namespace tokenscope::remote {
class RemoteEngine;
}

namespace tokenscope::ui {
class BatchTimelineView;
}

namespace tokenscope::app {

class ServerTimelinePoller : public QObject {
    Q_OBJECT
  public:
    ServerTimelinePoller();
    ~ServerTimelinePoller() override;
  public slots:
    // Forgets the previous server; the next poll connects to this one.
    void setServer(const QString& url, const QString& api_key);
    // One GET of the steps from `since` on: emits page() or failed().
    void poll(quint64 since);
  signals:
    void page(const QString& url, const QByteArray& json);
    void failed(const QString& why);

  private:
    QString url_, key_;
    std::unique_ptr<remote::RemoteEngine> engine_;
};

class ServerTimelineWindow : public QDialog {
    Q_OBJECT
  public:
    explicit ServerTimelineWindow(QWidget* parent = nullptr);
    ~ServerTimelineWindow() override;

    // Starts watching a server (clears what another one showed). An empty URL: no server to
    // watch, and the window says how to get one.
    void watch(const QString& url, const QString& api_key, const QString& what);
    QString url() const { return url_; }
    bool paused() const { return paused_; }
    void setPaused(bool paused);
    const ServerTimelineModel& model() const { return model_; }
    ui::BatchTimelineView* timeline() const { return view_; }
    QString statusText() const;

  signals:
    // Each answer applied (tests wait on it).
    void updated();

  protected:
    void resizeEvent(QResizeEvent* event) override;

  private:
    void pollNow();
    // Draws the newest steps that fit the width (so that the row labels stay in sight).
    void refresh();
    void apply(const QString& from, const QByteArray& page);

    QString url_;
    ServerTimelineModel model_;
    QLabel* source_ = nullptr;
    QLabel* status_ = nullptr;
    QPushButton* pause_ = nullptr;
    QScrollArea* scroll_ = nullptr;
    ui::BatchTimelineView* view_ = nullptr;
    QTimer* timer_ = nullptr;
    QThread thread_;
    ServerTimelinePoller* poller_ = nullptr;
    bool in_flight_ = false;
    bool paused_ = false;
};

}  // namespace tokenscope::app
