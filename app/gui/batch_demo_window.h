#pragma once
// Tools › Batch demo…: several prompts submitted to a second engine on the current model, a few
// steps apart, run through its continuous batching; the scheduler timeline (BatchTimelineView)
// shows every step, and the summary the aggregate speed against one request alone. A small KV
// cache and token budget make chunked prefill and preemption visible. The engine runs on a
// thread of its own (BatchDemoJob); the window only draws.
#include <QDialog>
#include <QThread>
#include <atomic>

#include "batch_timeline_view.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace tokenscope::app {

struct BatchDemoSettings {
    QString model_path;
    QStringList prompts;
    int max_tokens = 24;
    int token_budget = 32;
    int kv_tokens = 256;
    int stagger_steps = 3;
    int threads = 1;
};

// Loads the model, runs runtime::run_batch_demo, and hands back the timeline.
class BatchDemoJob : public QObject {
    Q_OBJECT
  public:
    void stop() { stop_.store(true); }
    void arm() { stop_.store(false); }
  public slots:
    void run(const tokenscope::app::BatchDemoSettings& settings);
  signals:
    void progress(int step);
    void finished(const tokenscope::ui::BatchTimelineData& timeline, const QString& summary,
                  const QString& error);

  private:
    std::atomic<bool> stop_{false};
};

class BatchDemoWindow : public QDialog {
    Q_OBJECT
  public:
    explicit BatchDemoWindow(QWidget* parent = nullptr);
    ~BatchDemoWindow() override;

    void setModelPath(const QString& path) { model_path_ = path; }
    BatchDemoSettings settings() const;
    void setPrompts(const QStringList& prompts);
    void setLimits(int max_tokens, int token_budget, int kv_tokens, int stagger_steps);
    bool running() const { return running_; }
    ui::BatchTimelineView* timeline() const { return view_; }
    QString summary() const;

  public slots:
    void start();
    void stop();

  signals:
    void runFinished(const QString& error);

  protected:
    void closeEvent(QCloseEvent* event) override;

  private:
    void set_running(bool running);

    QThread thread_;
    BatchDemoJob* job_ = nullptr;
    bool running_ = false;
    QString model_path_;
    QPlainTextEdit* prompts_ = nullptr;
    QSpinBox* max_tokens_ = nullptr;
    QSpinBox* budget_ = nullptr;
    QSpinBox* kv_tokens_ = nullptr;
    QSpinBox* stagger_ = nullptr;
    QPushButton* run_ = nullptr;
    QPushButton* stop_ = nullptr;
    QLabel* summary_ = nullptr;
    ui::BatchTimelineView* view_ = nullptr;
};

}  // namespace tokenscope::app

Q_DECLARE_METATYPE(tokenscope::app::BatchDemoSettings)
Q_DECLARE_METATYPE(tokenscope::ui::BatchTimelineData)
