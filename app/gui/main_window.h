#pragma once
// The main window: conversations on the left, the chat in the middle, the inspection panels
// as dock widgets the user can rearrange (the layout is restored on the next start). It owns
// the InferenceWorker's thread and the ConversationStore, and wires them to the ui/ widgets.
#include <QMainWindow>
#include <QPointer>
#include <QThread>
#include <filesystem>
#include <memory>
#include <optional>

#include "conversation_store.h"
#include "inference_worker.h"
#include "panel_data.h"

class QLabel;
class QLineEdit;
class QProgressBar;
class QToolButton;
class QMenu;
class QTimer;

namespace tokenscope::ui {
class AttentionHeatmap;
class ChatView;
class ConversationList;
class KvCacheView;
class MemoryBudgetView;
class MetricsView;
class ModelInfoView;
class SamplingPanel;
class TokenInspector;
}  // namespace tokenscope::ui

namespace tokenscope::app {

struct MainWindowOptions {
    QString model_path;           // empty: the default model, if installed
    std::filesystem::path store;  // the conversation database
    LoadOptions load;
};

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(MainWindowOptions options, QWidget* parent = nullptr);
    ~MainWindow() override;

    bool modelReady() const { return model_ready_; }
    bool generating() const { return generating_; }
    qint64 currentConversation() const { return conversation_; }
    ui::ChatView* chatView() const { return chat_; }

public slots:
    void openModel(const QString& path);
    void sendMessage(const QString& text);
    void stopGeneration();
    void regenerate();
    void newConversation();
    void selectConversation(qint64 id);

signals:
    void modelReadyChanged(bool ready);
    void generationDone();

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void build_menus();
    void build_docks();
    void connect_worker();
    void refresh_conversations();
    void start_generation();
    void on_generation_finished(qint64 conversation, const QString& text, const QString& reason, bool complete);
    void show_error(const QString& title, const QString& message);
    void remember_recent(const QString& path);
    void rebuild_recent_menu();
    QVector<ChatTurn> turns_for(qint64 conversation);

    MainWindowOptions options_;
    std::unique_ptr<ConversationStore> store_;
    QThread worker_thread_;
    InferenceWorker* worker_ = nullptr;  // lives on worker_thread_

    ui::ChatView* chat_ = nullptr;
    ui::ConversationList* conversations_ = nullptr;
    ui::SamplingPanel* sampling_ = nullptr;
    ui::TokenInspector* inspector_ = nullptr;
    ui::KvCacheView* kv_ = nullptr;
    ui::AttentionHeatmap* attention_ = nullptr;
    ui::MetricsView* metrics_ = nullptr;
    ui::MemoryBudgetView* memory_ = nullptr;
    ui::ModelInfoView* model_info_ = nullptr;
    QLineEdit* system_prompt_ = nullptr;
    QLabel* status_model_ = nullptr;
    QProgressBar* load_progress_ = nullptr;
    QToolButton* load_cancel_ = nullptr;
    QMenu* recent_menu_ = nullptr;

    ui::SamplingSettings settings_;
    qint64 conversation_ = -1;
    qint64 answer_message_ = -1;  // the assistant message being written
    QString answer_text_;         // what has streamed so far, saved if the window closes mid-answer
    // The newest token for the inspector and the distribution chart, shown once per frame.
    std::optional<ui::TokenData> latest_token_;
    QTimer* token_panels_timer_ = nullptr;
    bool model_ready_ = false;
    bool generating_ = false;
    QString model_path_;
};

}  // namespace tokenscope::app
