#pragma once
// The main window: conversations on the left, the chat in the middle, the inspection panels
// as dock widgets the user can rearrange (the layout is restored on the next start; View >
// Reset layout brings back the default for this screen). It owns the InferenceWorker's thread
// and the ConversationStore, and wires them to the ui/ widgets.
//
// Fitting the screen: every panel sits in a scroll area, so no panel's content sets a large
// minimum size; on screens below 1500x900 all panels share the right dock area in two tab
// groups, so the chat keeps the full height (usable at 1280x720).
//
// Conversations and generation: one conversation generates at a time (one engine). The user
// may switch to another conversation meanwhile; the answer keeps streaming into its own
// conversation (shown again, with what streamed so far, when the user switches back), and is
// saved there. Panels that describe one conversation (token, sampling step, attention,
// metrics) are cleared on a switch and show that conversation's data only.
//
// Every reply is saved with its token trace (each token's probability and the candidates
// before and after the sampling settings) and how it ended, so token inspection and colouring
// by probability work on any reply, also after a restart.
#include <QHash>
#include <QMainWindow>
#include <QPointer>
#include <QThread>
#include <filesystem>
#include <memory>
#include <optional>

#include "conversation_store.h"
#include "inference_worker.h"
#include "message_document.h"
#include "panel_data.h"
#include "settings_dialog.h"

class QDockWidget;
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
class StepView;
class HeadGrid;
class HeadOverview;
}  // namespace tokenscope::ui

namespace tokenscope::app {

class ModelServer;
class QuantLabWindow;
class BatchDemoWindow;

class ServerTimelineWindow;
struct ServeSettings;

struct MainWindowOptions {
    QString model_path;           // empty: the default model, if installed
    std::filesystem::path store;  // the conversation database
    LoadOptions load;
    RemoteSettings remote;  // url set: connect to this server at start instead of a local model
};

class MainWindow : public QMainWindow {
    Q_OBJECT

  public:
    explicit MainWindow(MainWindowOptions options, QWidget* parent = nullptr);
    ~MainWindow() override;

    bool modelReady() const { return model_ready_; }
    bool generating() const { return generating_; }
    qint64 currentConversation() const { return conversation_; }
    // The conversation being generated, -1 when idle.
    qint64 generatingConversation() const { return generating_ ? generating_conversation_ : -1; }
    ui::ChatView* chatView() const { return chat_; }
    ui::ConversationList* conversationList() const { return conversations_; }
    ui::SamplingPanel* samplingPanel() const { return sampling_; }
    ui::TokenInspector* tokenInspector() const { return inspector_; }
    ui::MetricsView* metricsView() const { return metrics_; }
    ui::AttentionHeatmap* attentionView() const { return attention_; }
    // Teaching mode (main_window_teaching.cpp).
    ui::StepView* stepView() const { return step_view_; }
    ui::HeadGrid* headGrid() const { return head_grid_; }
    ui::HeadOverview* headOverview() const { return head_overview_; }
    QAction* stepAction() const { return step_action_; }
    // True while a step-mode reply is paused between steps (or taking one).
    bool stepping() const { return stepping_; }
    // The worker (lives on its own thread); tests emit its signals to replay a sequence.
    InferenceWorker* worker() const { return worker_; }
    // The model line of the status bar.
    QString statusText() const;
    // File > Models (filled when it opens; tests call scanModels() and wait for modelsScanned).
    QMenu* modelsMenu() const { return models_menu_; }
    void scanModels() { scan_models_folder(); }
    // True when the constructor restored a saved window geometry.
    bool restoredGeometry() const { return restored_geometry_; }
    // The window at a size that fits the screen's available area (at most 1500x950).
    void fitToScreen();
    // Whether the compact (all panels on the right, tabbed) default layout fits this window.
    bool compactLayout() const;
    // The assistant reply's footer line: how it ended, tokens, speed, time to first token.
    static QString replyNote(const QString& finish_reason, int tokens, double tokens_per_s,
                             double ttft_ms);

    // Chatting with a server (File › Connect to server…) rather than a local model.
    bool remoteMode() const { return remote_; }

    // File › Serve this model… (main_window_serve.cpp): the local model over the OpenAI API,
    // in this process. Null in builds without the server (no cpp-httplib).
    ModelServer* modelServer() const { return model_server_; }
    // Starts serving the current local model with `settings` (the dialog's, or a test's).
    void serveModel(const ServeSettings& settings);

  public slots:
    void openModel(const QString& path);
    // File › Connect to server… (main_window_remote.cpp): the dialog, then connectRemote.
    void connectToServer();
    // Connects the worker to `settings`' server and remembers it (QSettings "remote/...").
    void connectRemote(const tokenscope::app::RemoteSettings& settings);
    // File › Back to local model: the last local model, or the open dialog.
    void useLocalModel();
    // File › Serve this model…: the dialog, then serveModel. File › Stop serving.
    void showServeDialog();
    void stopServing();
    void sendMessage(const QString& text);
    void stopGeneration();
    void regenerate();
    void newConversation();
    void selectConversation(qint64 id);
    // Asks for confirmation (a window-modal dialog named "confirmDelete"), then deletes; the
    // deletion can be undone (Edit > Undo delete, or the status bar's Undo) until the next one.
    void deleteConversation(qint64 id);
    void undoDelete();
    // The default dock layout for the window's current size, every panel shown.
    void resetLayout();
    // Step mode: one token and pause. With a step-mode reply running: its next token; while
    // idle: sends the input box's text as a step-mode reply and takes its first step (prefill).
    void step();
    // Tools › Quantization lab… (main_window_quant.cpp): the window, created once, set to the
    // current model.
    void showQuantizationLab();
    // Tools › Batch demo… (main_window_batch.cpp): continuous batching on the current model.
    void showBatchDemo();
    // Export the conversation on screen (or all of them) to `path`: Markdown for .md, JSON
    // otherwise; import a JSON export. false and a message box on failure. The menu entries
    // ask for the path; tests call these directly.
    bool exportConversationTo(const QString& path, bool all = false);
    bool importConversationsFrom(const QString& path);
    // Edit › Settings… (Ctrl+,): the dialog, non-blocking; on OK the settings are saved and,
    // when a model setting changed, the window offers to reload the model.
    void showSettings();
    // QSettings over the command line's defaults (settings_dialog.h).
    AppSettings current_settings() const;
    // The folder File › Models lists: Settings' choice, else the default.
    QString models_folder() const;
    // The options the next model load uses (Settings over the command line).
    LoadOptions load_options() const;
    // Shows the version `step` (-1 / +1) away of the reply at `message_index` (the "‹ ›" of
    // alternative replies).
    void showReplyVersion(int message_index, int step);
    // Tools › Server timeline…: the live scheduler of the served or connected server.
    void showServerTimeline();

  signals:
    void modelReadyChanged(bool ready);
    void generationDone();
    void modelsScanned();

  protected:
    void closeEvent(QCloseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

  private:
    void build_menus();
    void build_docks();
    // Puts every dock in its default area (compact: all on the right, two tab groups).
    void place_docks(bool compact);
    void apply_dock_sizes();
    void connect_worker();
    // Speculative decoding (main_window_speculation.cpp): the sampling panel's controls, the
    // worker's engine reload, QSettings, the chat legend and the live k.
    void connect_speculation();
    // Teaching mode (main_window_teaching.cpp): the Step and Heads docks, Tools menu, wiring.
    void build_teaching();
    void place_teaching_docks();
    void refresh_head_views();
    void give_room(QDockWidget* dock);
    // Remote mode (main_window_remote.cpp): File menu entries, and the panels that need the
    // engine's internals saying what the server does not expose.
    void build_remote_menu(QMenu* file);
    void build_quant_lab_menu(QMenu* tools);
    void build_batch_demo_menu(QMenu* tools);
    // Edit › Settings… (main_window_settings.cpp).
    void build_settings_action(QMenu* edit);
    // File › Export conversation / Export all / Import (main_window_export.cpp).
    void build_export_menu(QMenu* file);
    // View › Theme (main_window_theme.cpp); applies the remembered theme.
    void build_theme_menu(QMenu* view);
    void build_serve_menu(QMenu* file);
    void update_serve_actions();
    void apply_remote_mode(const ui::ModelInfoData& info);
    QString attention_placeholder() const;
    void apply_speculation(const ui::SpeculationSettings& settings);
    void refresh_conversations();
    void start_generation();
    void on_generation_finished(qint64 conversation, const QString& text, const QString& reason,
                                bool complete);
    // Saves the streamed answer (text, trace, finish reason, speed); returns the message id.
    qint64 save_answer(qint64 conversation, const QString& text, const QString& reason,
                       bool complete);
    QVector<ui::ChatMessage> load_messages(qint64 conversation);
    void clear_conversation_panels();
    void delete_now(qint64 id);
    void update_content_matches();
    void keep_chat_wide();
    void set_model_status(const QString& text);
    void show_error(const QString& title, const QString& message);
    void remember_recent(const QString& path);
    void rebuild_recent_menu();
    // File > Models: the models folder, scanned off the GUI thread each time the menu opens.
    void scan_models_folder();
    void rebuild_models_menu();
    QVector<ChatTurn> turns_for(qint64 conversation);

    MainWindowOptions options_;
    std::unique_ptr<ConversationStore> store_;
    // Token traces are written off the GUI thread; each stays here until it is on disk, so a
    // conversation opened meanwhile still shows it.
    QThread trace_thread_;
    class TraceWriter* trace_writer_ = nullptr;
    QHash<qint64, QVector<ui::TokenData>> pending_traces_;
    // A reply's tokens: from pending_traces_ or the database (throws FormatError if damaged).
    QVector<ui::TokenData> tokens_of(qint64 message_id);
    void write_trace(qint64 message_id, const QVector<ui::TokenData>& tokens);
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
    QMenu* models_menu_ = nullptr;
    QMenu* help_menu_ = nullptr;  // menus built later go before it, so Help stays last
    bool models_scanning_ = false;
    struct ModelEntry {
        QString path, name, details, error;
        bool instruct = false;
    };
    QVector<ModelEntry> models_;  // the last scan
    QToolButton* undo_button_ = nullptr;
    QAction* undo_action_ = nullptr;
    QTimer* undo_timer_ = nullptr;
    QList<QDockWidget*> docks_;  // sampling, token, attention, kv, metrics, memory, model

    ui::SamplingSettings settings_;
    qint64 conversation_ = -1;             // the conversation shown
    qint64 generating_conversation_ = -1;  // the conversation being (or last) generated
    int regenerated_version_ = 0;
    int generated_tokens() const;  // of the reply streaming (answer_tokens_ with a token id) // the
                                   // version number the reply being regenerated gets
    QString answer_text_;  // what has streamed so far, saved if the window closes mid-answer
    QVector<ui::TokenData> answer_tokens_;  // the streamed tokens: the trace saved with the answer
    bool answer_shown_ = false;             // the streaming answer is in the chat view
    ui::MetricsData last_metrics_;          // of the generation of generating_conversation_
    // A deleted conversation, kept for Undo.
    struct DeletedConversation {
        Conversation conversation;
        QList<Message> messages;
        QList<QVector<ui::TokenData>> traces;  // per message
    };
    std::optional<DeletedConversation> deleted_;
    QString model_status_;  // the status bar's model line while a model is loaded
    bool restored_geometry_ = false;
    bool restored_state_ = false;
    bool laid_out_ = false;  // the default layout was applied once the window had its size
    // The newest token for the inspector and the distribution chart, shown once per frame.
    std::optional<ui::TokenData> latest_token_;
    // The newest token for a panel that was tabbed away, shown when it becomes visible.
    std::optional<ui::TokenData> inspector_pending_;
    std::optional<ui::TokenData> sampling_pending_;
    QTimer* token_panels_timer_ = nullptr;
    bool remote_ = false;            // the worker chats with a server
    bool remote_internals_ = false;  // ... and it is tokenscope-cli serve
    QAction* local_action_ = nullptr;
    ModelServer* model_server_ = nullptr;
    QAction* serve_action_ = nullptr;
    QAction* stop_serving_action_ = nullptr;
    QLabel* serve_status_ = nullptr;
    bool model_ready_ = false;
    bool generating_ = false;
    QString model_path_;
    // What the next reply comes from, as stored with the conversation: the model file, or
    // "MODEL on URL" for a server. Set when a model is ready.
    QString model_source_;
    ui::ModelInfoData model_info_data_;  // the model in use, as last loaded
    QuantLabWindow* quant_lab_ = nullptr;
    BatchDemoWindow* batch_demo_ = nullptr;
    ServerTimelineWindow* server_timeline_ = nullptr;
    RemoteSettings remote_settings_;  // the server last connected to (its key included)
    // A speculation change made while a reply streams: applied when it finishes (it reloads
    // the engine, which would end the reply).
    std::optional<ui::SpeculationSettings> pending_speculation_;
    ui::StepView* step_view_ = nullptr;
    ui::HeadGrid* head_grid_ = nullptr;
    ui::HeadOverview* head_overview_ = nullptr;
    QList<QDockWidget*> teaching_docks_;  // step, heads
    QAction* step_action_ = nullptr;
    bool stepping_ = false;     // the running (or next) reply is in step mode
    bool step_queued_ = false;  // a stepOnce is on its way to the worker
    int pending_head_ = -1;  // the overview's chosen head, enlarged once its layer's grid arrives
};

}  // namespace tokenscope::app
