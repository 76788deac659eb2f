#include "main_window.h"
#include "settings_dialog.h"
#include "shortcuts_dialog.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDesktopServices>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QResizeEvent>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QShowEvent>
#include <QSplitter>
#include <QStatusBar>
#include <QTabBar>
#include <QTimer>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <utility>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "conversation_list.h"
#include "inspect/model_card.h"
#include "kv_cache_view.h"
#include "memory_budget_view.h"
#include "metrics_view.h"
#include "model_info_view.h"
#include "sampling_panel.h"
#include "speculation_controls.h"
#include "token_inspector.h"
#include "trace_writer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/paths.h"

namespace tokenscope::app {

namespace {
constexpr int kMaxRecent = 8;
// How long the status bar offers Undo after a deletion (Edit > Undo delete stays until the
// next deletion).
constexpr int kUndoOfferMs = 20000;
// How long a note about the chat template (fallback format used) stays in the status bar.
constexpr int kPromptNoticeMs = 15000;
// Below this the default layout puts every panel on the right, in two tab groups.
constexpr int kCompactWidth = 1500;
constexpr int kCompactHeight = 900;

// A panel in a scroll area: its content keeps its natural size when the dock is small instead
// of forcing a minimum size on the whole window.
QWidget* scrollable(QWidget* panel, QWidget* parent) {
    auto* area = new QScrollArea(parent);
    area->setWidget(panel);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    area->setObjectName(panel->objectName().isEmpty() ? QString() : panel->objectName() + "Scroll");
    return area;
}

ui::MessageRole ui_role(Role role) {
    switch (role) {
        case Role::System:
            return ui::MessageRole::System;
        case Role::Assistant:
            return ui::MessageRole::Assistant;
        case Role::User:
            return ui::MessageRole::User;
    }
    return ui::MessageRole::User;
}
}  // namespace

MainWindow::MainWindow(MainWindowOptions options, QWidget* parent)
    : QMainWindow(parent), options_(std::move(options)) {
    register_worker_types();
    setWindowTitle("tokenscope");
    setAcceptDrops(true);
    setObjectName("MainWindow");
    store_ = std::make_unique<ConversationStore>(options_.store);
    // WAL checkpoints copy the log into the database and fsync it: the trace writer's
    // connection runs them, off the GUI thread.
    store_->set_wal_autocheckpoint(0);
    // Commits return without waiting for the disk; a thread of the store fsyncs them (an fsync
    // took 100-150 ms while another program wrote to the disk: a frozen window).
    store_->sync_in_background();

    // Centre: conversations | (system prompt, chat).
    auto* splitter = new QSplitter(this);
    conversations_ = new ui::ConversationList(splitter);
    auto* chat_column = new QWidget(splitter);
    auto* column = new QVBoxLayout(chat_column);
    column->setContentsMargins(0, 0, 0, 0);
    system_prompt_ = new QLineEdit(chat_column);
    system_prompt_->setPlaceholderText(tr("System prompt for this conversation (optional)"));
    column->addWidget(system_prompt_);
    chat_ = new ui::ChatView(chat_column);
    column->addWidget(chat_, 1);
    splitter->addWidget(conversations_);
    splitter->addWidget(chat_column);
    splitter->setStretchFactor(1, 1);
    splitter->setCollapsible(1, false);
    splitter->setSizes({220, 700});
    setCentralWidget(splitter);

    build_docks();
    build_menus();

    status_model_ = new QLabel(tr("No model"), this);
    load_progress_ = new QProgressBar(this);
    load_progress_->setMaximumWidth(220);
    load_progress_->hide();
    load_cancel_ = new QToolButton(this);
    load_cancel_->setText(tr("Cancel"));
    load_cancel_->hide();
    undo_button_ = new QToolButton(this);
    undo_button_->setObjectName("undoDelete");
    undo_button_->setText(tr("Undo delete"));
    undo_button_->hide();
    undo_timer_ = new QTimer(this);
    undo_timer_->setSingleShot(true);
    connect(undo_timer_, &QTimer::timeout, undo_button_, &QWidget::hide);
    connect(undo_button_, &QToolButton::clicked, this, &MainWindow::undoDelete);
    statusBar()->addWidget(status_model_, 1);
    statusBar()->addPermanentWidget(undo_button_);
    statusBar()->addPermanentWidget(load_progress_);
    statusBar()->addPermanentWidget(load_cancel_);

    register_trace_writer_types();
    trace_writer_ = new TraceWriter(options_.store);
    trace_writer_->moveToThread(&trace_thread_);
    connect(&trace_thread_, &QThread::finished, trace_writer_, &QObject::deleteLater);
    trace_thread_.setObjectName("trace-writer");
    trace_thread_.start();
    connect(trace_writer_, &TraceWriter::written, this,
            [this](qint64 id) { pending_traces_.remove(id); });
    connect(trace_writer_, &TraceWriter::failed, this, [this](qint64 id, const QString& message) {
        // The conversation was deleted before its trace reached the disk: nothing is lost.
        if (pending_traces_.remove(id))
            spdlog::warn("token trace of message {} not saved: {}", id, message.toStdString());
    });

    worker_ = new InferenceWorker;
    worker_->moveToThread(&worker_thread_);
    connect(&worker_thread_, &QThread::finished, worker_, &QObject::deleteLater);
    worker_thread_.setObjectName("inference");
    worker_thread_.start();
    connect_worker();
    connect_speculation();
    build_teaching();

    connect(chat_, &ui::ChatView::sendRequested, this, &MainWindow::sendMessage);
    connect(chat_, &ui::ChatView::stopRequested, this, &MainWindow::stopGeneration);
    connect(chat_, &ui::ChatView::regenerateRequested, this, &MainWindow::regenerate);
    connect(chat_, &ui::ChatView::versionRequested, this, &MainWindow::showReplyVersion);
    connect(chat_, &ui::ChatView::editRequested, this, [this](int index, const QString& text) {
        if (generating_ || conversation_ < 0) return;
        // Editing message `index` drops it and everything after; the engine keeps the shared
        // prefix of the cache and prefills the rest.
        store_->drop_reply_versions_after(conversation_, index - 1);
        store_->truncate_after(conversation_, index - 1);
        store_->append_message(conversation_, Role::User, text, true);
        selectConversation(conversation_);
        start_generation();
    });
    connect(chat_, &ui::ChatView::tokenSelected, this, [this](const ui::TokenData& token) {
        // The user's choice wins over the streaming token until the next reply starts.
        latest_token_.reset();
        inspector_pending_.reset();
        sampling_pending_.reset();
        inspector_->setToken(token);
        sampling_->showStep(token);
    });
    connect(system_prompt_, &QLineEdit::editingFinished, this, [this] {
        if (conversation_ >= 0) store_->set_system_prompt(conversation_, system_prompt_->text());
    });
    connect(conversations_, &ui::ConversationList::conversationSelected, this,
            &MainWindow::selectConversation);
    connect(conversations_, &ui::ConversationList::newRequested, this,
            &MainWindow::newConversation);
    connect(conversations_, &ui::ConversationList::renameRequested, this,
            [this](qint64 id, const QString& title) {
                if (!store_->conversation(id)) return;  // deleted meanwhile
                store_->rename(id, title);
                refresh_conversations();
            });
    connect(conversations_, &ui::ConversationList::deleteRequested, this,
            &MainWindow::deleteConversation);
    connect(conversations_, &ui::ConversationList::filterTextChanged, this,
            [this] { update_content_matches(); });
    connect(sampling_, &ui::SamplingPanel::settingsChanged, this,
            [this](const ui::SamplingSettings& s) { settings_ = s; });
    connect(attention_, &ui::AttentionHeatmap::selectionChanged, this, [this](int layer, int head) {
        QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection,
                                  Q_ARG(int, layer), Q_ARG(int, head));
    });
    {
        // Colouring by probability is a reading preference: it applies to every reply and
        // is remembered.
        QSettings view_settings;
        chat_->setColorByProbability(
            view_settings.value("view/color_by_probability", false).toBool());
        chat_->setShowTokenBoundaries(view_settings.value("view/token_boundaries", false).toBool());
        chat_->setRenderMarkdown(view_settings.value("view/markdown", true).toBool());
        connect(chat_, &ui::ChatView::renderMarkdownChanged, this,
                [](bool on) { QSettings().setValue("view/markdown", on); });
        connect(chat_, &ui::ChatView::colorByProbabilityChanged, this,
                [](bool on) { QSettings().setValue("view/color_by_probability", on); });
        connect(chat_, &ui::ChatView::showTokenBoundariesChanged, this,
                [](bool on) { QSettings().setValue("view/token_boundaries", on); });
    }
    connect(load_cancel_, &QToolButton::clicked, this, [this] { worker_->cancelLoad(); });

    QSettings settings;
    restored_geometry_ = restoreGeometry(settings.value("window/geometry").toByteArray());
    restored_state_ = restoreState(settings.value("window/state").toByteArray());
    settings_ = sampling_->settings();

    refresh_conversations();
    const QList<ConversationSummary> existing = store_->conversations();
    if (!existing.isEmpty()) selectConversation(existing.first().id);

    // A chat app starts with the cursor in the message box (not the search box).
    chat_->input()->setFocus();

    QString model = options_.model_path;
    if (model.isEmpty()) model = QString::fromStdString(paths::default_model().string());
    if (!options_.remote.url.isEmpty()) {
        connectRemote(options_.remote);
    } else if (QFileInfo::exists(model)) {
        openModel(model);
    } else {
        status_model_->setText(
            tr("No model: open a GGUF file (File > Open model…) or drop one here"));
    }
}

MainWindow::~MainWindow() {
    worker_->stop();
    worker_->cancelLoad();
    worker_thread_.quit();
    worker_thread_.wait();
    // Every trace queued so far reaches the disk before the window goes.
    trace_writer_->flush();
    trace_thread_.quit();
    trace_thread_.wait();
}

void MainWindow::build_docks() {
    auto dock = [this](QWidget* content, const QString& title, const QString& name) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name);  // saveState/restoreState key
        d->setWidget(content);
        d->setAllowedAreas(Qt::AllDockWidgetAreas);
        docks_.append(d);
        return d;
    };
    sampling_ = new ui::SamplingPanel(this);
    inspector_ = new ui::TokenInspector(this);
    kv_ = new ui::KvCacheView(this);
    attention_ = new ui::AttentionHeatmap(this);
    metrics_ = new ui::MetricsView(this);
    memory_ = new ui::MemoryBudgetView(this);
    model_info_ = new ui::ModelInfoView(this);
    dock(scrollable(sampling_, this), tr("Sampling"), "dock.sampling");
    dock(scrollable(inspector_, this), tr("Token"), "dock.token");
    // The heatmap scrolls and zooms itself: no second scroll area around it.
    dock(attention_, tr("Attention"), "dock.attention");
    dock(scrollable(kv_, this), tr("KV cache"), "dock.kv");
    dock(scrollable(metrics_, this), tr("Metrics"), "dock.metrics");
    dock(scrollable(memory_, this), tr("Memory"), "dock.memory");
    dock(scrollable(model_info_, this), tr("Model"), "dock.model");
    place_docks(compactLayout());
}

bool MainWindow::compactLayout() const {
    // Before the window has its size (in the constructor) the screen decides.
    QSize size = this->size();
    if (!isVisible() && screen()) size = size.boundedTo(screen()->availableGeometry().size());
    return size.width() < kCompactWidth || size.height() < kCompactHeight;
}

void MainWindow::place_docks(bool compact) {
    QDockWidget* sampling = docks_[0];
    QDockWidget* token = docks_[1];
    QDockWidget* attention = docks_[2];
    QDockWidget* kv = docks_[3];
    QDockWidget* metrics = docks_[4];
    QDockWidget* memory = docks_[5];
    QDockWidget* model = docks_[6];
    for (QDockWidget* d : docks_) {
        // Docked first: a floating dock that is only tabified stays floating.
        d->setFloating(false);
        removeDockWidget(d);
    }
    if (compact) {
        // Everything on the right in two tab groups: the chat keeps the whole height. Above,
        // the panels of numbers (sampling, token, model, metrics, memory); below, the views of
        // the forward pass (attention, KV cache, and the teaching docks). Split 5 / 2 + 2, so
        // that at 1280x720 every tab's title fits (4 + 6 had cut them to "St…", "Hea…").
        for (QDockWidget* d : docks_) addDockWidget(Qt::RightDockWidgetArea, d, Qt::Vertical);
        tabifyDockWidget(sampling, token);
        tabifyDockWidget(token, model);
        tabifyDockWidget(model, metrics);
        tabifyDockWidget(metrics, memory);
        tabifyDockWidget(attention, kv);
    } else {
        for (QDockWidget* d : {sampling, token, attention})
            addDockWidget(Qt::RightDockWidgetArea, d, Qt::Vertical);
        for (QDockWidget* d : {kv, metrics, memory, model})
            addDockWidget(Qt::BottomDockWidgetArea, d, Qt::Horizontal);
        tabifyDockWidget(sampling, token);
        tabifyDockWidget(metrics, memory);
        tabifyDockWidget(memory, model);
    }
    for (QDockWidget* d : docks_) d->show();
    if (!compact) metrics->raise();
    sampling->raise();
    attention->raise();
    place_teaching_docks();
    // Whole titles and scroll arrows rather than titles cut to a letter or two when a group
    // is narrow; the View menu lists every panel too.
    for (QTabBar* bar : findChildren<QTabBar*>(Qt::FindDirectChildrenOnly)) {
        bar->setElideMode(Qt::ElideNone);
        bar->setUsesScrollButtons(true);
    }
}

void MainWindow::resetLayout() {
    place_docks(compactLayout());
    apply_dock_sizes();
}

void MainWindow::apply_dock_sizes() {
    // The chat gets the larger share: panels take about a third of the width (and a quarter
    // of the height at the bottom in the wide layout).
    QList<QDockWidget*> right;
    QList<QDockWidget*> bottom;
    for (QDockWidget* d : docks_) {
        if (d->isFloating() || !d->isVisible()) continue;
        if (dockWidgetArea(d) == Qt::RightDockWidgetArea) right << d;
        if (dockWidgetArea(d) == Qt::BottomDockWidgetArea) bottom << d;
    }
    if (!right.isEmpty()) {
        resizeDocks({right.first()}, {std::max(300, width() * 32 / 100)}, Qt::Horizontal);
        // Sampling/token above, attention below; the heatmap gets the larger share.
        QDockWidget* top = docks_[0];
        QDockWidget* below = docks_[2];
        if (right.contains(top) && right.contains(below)) {
            const int h = std::max(200, height() - 90);
            resizeDocks({top, below}, {h * 45 / 100, h * 55 / 100}, Qt::Vertical);
        }
    }
    if (!bottom.isEmpty())
        resizeDocks({bottom.first()}, {std::max(160, height() / 4)}, Qt::Vertical);
}

void MainWindow::fitToScreen() {
    QSize size(1500, 950);
    if (screen()) {
        const QRect available = screen()->availableGeometry();
        // Leave room for the window frame the window manager adds.
        size = size.boundedTo(QSize(available.width() - 16, available.height() - 48));
        move(available.topLeft() + QPoint(8, 8));
    }
    resize(size);
}

void MainWindow::build_menus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, tr("Open model"), models_folder(), tr("GGUF models (*.gguf);;All files (*)"));
        if (!path.isEmpty()) openModel(path);
    });
    recent_menu_ = file->addMenu(tr("Open &recent"));
    rebuild_recent_menu();
    models_menu_ = file->addMenu(tr("&Models"));
    models_menu_->setToolTipsVisible(true);
    connect(models_menu_, &QMenu::aboutToShow, this, &MainWindow::scan_models_folder);
    rebuild_models_menu();
    build_remote_menu(file);
    build_serve_menu(file);
    // The KV cache element type is fixed when a model loads: choosing one reloads the model.
    QMenu* kv_type = file->addMenu(tr("&KV cache type"));
    auto* kv_group = new QActionGroup(kv_type);
    const QString current_kv = QSettings().value("model/kv_type", options_.load.kv_type).toString();
    for (const auto& [name, label] :
         {std::pair{"f16", tr("F16 (default)")},
          std::pair{"q8", tr("Q8 (int8 + scale per row: about half the memory)")},
          std::pair{"f32", tr("F32 (exact, twice F16)")}}) {
        QAction* a = kv_type->addAction(label);
        a->setCheckable(true);
        a->setChecked(current_kv == name);
        kv_group->addAction(a);
        connect(a, &QAction::triggered, this, [this, type = QString(name)] {
            QSettings().setValue("model/kv_type", type);
            if (!model_path_.isEmpty()) openModel(model_path_);
        });
    }
    file->addSeparator();
    file->addAction(tr("&New conversation"), QKeySequence::New, this, &MainWindow::newConversation);
    build_export_menu(file);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    undo_action_ = edit->addAction(tr("&Undo delete"), this, &MainWindow::undoDelete);
    undo_action_->setEnabled(false);
    build_settings_action(edit);
    QAction* find = edit->addAction(tr("&Find conversation…"), QKeySequence::Find, this, [this] {
        conversations_->searchBox()->setFocus();
        conversations_->searchBox()->selectAll();
    });
    (void)find;

    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* d : docks_) view->addAction(d->toggleViewAction());
    view->addSeparator();
    view->addAction(tr("&Reset layout"), this, &MainWindow::resetLayout);
    view->addSeparator();
    QAction* color = view->addAction(tr("Colour tokens by probability"));
    color->setCheckable(true);
    connect(color, &QAction::toggled, chat_, &ui::ChatView::setColorByProbability);
    connect(chat_, &ui::ChatView::colorByProbabilityChanged, color, &QAction::setChecked);
    QAction* boundaries = view->addAction(tr("Show token boundaries"));
    boundaries->setCheckable(true);
    connect(boundaries, &QAction::toggled, chat_, &ui::ChatView::setShowTokenBoundaries);
    connect(chat_, &ui::ChatView::showTokenBoundariesChanged, boundaries, &QAction::setChecked);
    QAction* markdown = view->addAction(tr("Render &markdown"));
    markdown->setCheckable(true);
    markdown->setChecked(chat_->renderMarkdown());
    connect(markdown, &QAction::toggled, chat_, &ui::ChatView::setRenderMarkdown);
    connect(chat_, &ui::ChatView::renderMarkdownChanged, markdown, &QAction::setChecked);
    QAction* overlay = view->addAction(tr("Attention on hover"));
    overlay->setCheckable(true);
    overlay->setShortcut(QKeySequence(tr("Ctrl+Shift+A")));
    overlay->setToolTip(tr("Hover a token in the chat to see its attention drawn on the text"));
    connect(overlay, &QAction::toggled, chat_, &ui::ChatView::setAttentionOverlay);
    connect(chat_, &ui::ChatView::attentionOverlayChanged, overlay, &QAction::setChecked);
    view->addSeparator();
    build_theme_menu(view);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help_menu_ = help;
    // Read from the menu bar each time it opens, so menus built later (Tools) are listed.
    help->addAction(tr("&Keyboard shortcuts"), QKeySequence::HelpContents, this, [this] {
        auto* dialog = new ui::ShortcutsDialog(menuBar(), this);
        dialog->setAttribute(Qt::WA_DeleteOnClose);
        dialog->show();
    });
    help->addAction(tr("&About tokenscope"), this, [this] {
        QMessageBox::about(this, tr("About tokenscope"),
                           tr("<b>tokenscope %1</b><p>Chat with a local language model and see "
                              "inside it while it runs: "
                              "token probabilities, sampling, attention and the KV cache.</p>")
                               .arg(TOKENSCOPE_VERSION_STRING));
    });
}

void MainWindow::connect_worker() {
    token_panels_timer_ = new QTimer(this);
    token_panels_timer_->setSingleShot(true);
    // Ten updates a second are plenty for panels that change with every token; filling the
    // inspector's tables costs ~10 ms, and a panel tabbed away is filled when it is shown.
    token_panels_timer_->setInterval(100);
    connect(token_panels_timer_, &QTimer::timeout, this, [this] {
        if (!latest_token_) return;
        if (inspector_->isVisible())
            inspector_->setToken(*latest_token_);
        else
            inspector_pending_ = latest_token_;
        if (sampling_->isVisible())
            sampling_->showStep(*latest_token_);
        else
            sampling_pending_ = latest_token_;
        latest_token_.reset();
    });
    connect(docks_[1], &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (visible && inspector_pending_)
            inspector_->setToken(*std::exchange(inspector_pending_, std::nullopt));
    });
    connect(docks_[0], &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (visible && sampling_pending_)
            sampling_->showStep(*std::exchange(sampling_pending_, std::nullopt));
    });
    connect(worker_, &InferenceWorker::loadProgress, this,
            [this](int percent, const QString& stage) {
                load_progress_->show();
                load_cancel_->show();
                load_progress_->setValue(percent);
                status_model_->setText(stage);
            });
    connect(worker_, &InferenceWorker::modelLoaded, this, [this](const ui::ModelInfoData& info) {
        load_progress_->hide();
        load_cancel_->hide();
        model_ready_ = true;
        model_info_->setData(info);
        sampling_->setThinkingAvailable(info.supports_thinking);
        apply_remote_mode(info);
        model_source_ = info.remote ? tr("%1 on %2").arg(info.name, info.path) : info.path;
        model_info_data_ = info;
        if (!info.remote)
            attention_->setModelShape(static_cast<int>(info.layers), static_cast<int>(info.heads));
        set_model_status(
            tr("%1 — %2 — template: %3").arg(info.name, info.backend, info.chat_template));
        if (!info.remote) remember_recent(info.path);
        emit modelReadyChanged(true);
    });
    connect(worker_, &InferenceWorker::loadFailed, this, [this](const QString& message) {
        load_progress_->hide();
        load_cancel_->hide();
        status_model_->setText(model_ready_ ? tr("Model unchanged: the new file failed to load")
                                            : tr("No model"));
        show_error(tr("Cannot load the model"), message);
        emit modelReadyChanged(model_ready_);
    });
    connect(worker_, &InferenceWorker::loadCancelled, this, [this] {
        load_progress_->hide();
        load_cancel_->hide();
        status_model_->setText(model_ready_ ? status_model_->text() : tr("Loading cancelled"));
    });
    connect(worker_, &InferenceWorker::tokenGenerated, this,
            [this](qint64 conversation, const ui::TokenData& token) {
                if (!generating_ || conversation != generating_conversation_) return;
                answer_text_ += token.text;
                answer_tokens_.push_back(token);
                if (conversation != conversation_)
                    return;  // streaming into a conversation not shown
                chat_->appendToken(token);
                // The panels follow the newest token the user can see: a stop token (no text) is
                // not one, and would show its 100 % step after every reply.
                if (token.text.isEmpty() || token.id < 0) return;
                latest_token_ = token;
                if (!token_panels_timer_->isActive()) token_panels_timer_->start();
            });
    connect(worker_, &InferenceWorker::generationFinished, this,
            &MainWindow::on_generation_finished);
    connect(worker_, &InferenceWorker::promptNotice, this,
            [this](const QString& message) { statusBar()->showMessage(message, kPromptNoticeMs); });
    connect(
        worker_, &InferenceWorker::generationFailed, this,
        [this](qint64, const QString& message) { show_error(tr("Generation failed"), message); });
    // Metrics and attention describe the worker's last generation: shown only while its
    // conversation is the one on screen.
    connect(worker_, &InferenceWorker::metricsChanged, this, [this](const ui::MetricsData& m) {
        last_metrics_ = m;
        if (conversation_ == generating_conversation_) metrics_->setData(m);
    });
    connect(worker_, &InferenceWorker::kvChanged, kv_, &ui::KvCacheView::setData);
    connect(worker_, &InferenceWorker::memoryChanged, memory_, &ui::MemoryBudgetView::setData);
    connect(worker_, &InferenceWorker::attentionChanged, this, [this](const ui::AttentionData& a) {
        if (conversation_ != generating_conversation_) return;
        attention_->setData(a);
        chat_->setAttentionData(a);  // the overlay draws what the Attention panel shows
    });
}

LoadOptions MainWindow::load_options() const {
    // Edit › Settings… (QSettings) over the command line's values.
    LoadOptions load = options_.load;
    const AppSettings settings = current_settings();
    load.threads = settings.threads;
    load.kv_capacity_tokens = settings.context;
    load.kv_type = settings.kv_type;
    load.device = settings.device;
    load.chat_template = settings.chat_template;
    return load;
}

void MainWindow::openModel(const QString& path) {
    if (generating_) stopGeneration();
    model_path_ = path;
    LoadOptions load = load_options();
    load.speculation = sampling_->speculationControls()->settings();
    pending_speculation_.reset();  // the load carries the panel's choice
    QMetaObject::invokeMethod(worker_, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path),
                              Q_ARG(tokenscope::app::LoadOptions, load));
}

void MainWindow::newConversation() {
    // Allowed while another conversation generates: it keeps generating in its own.
    conversation_ = store_->create_conversation(tr("New conversation"), system_prompt_->text());
    chat_->clear();
    chat_->setGenerating(generating_);
    clear_conversation_panels();
    refresh_conversations();
    chat_->input()->setFocus();  // a new conversation starts with typing
}

void MainWindow::selectConversation(qint64 id) {
    const auto c = store_->conversation(id);
    if (!c) return;
    const bool switched = id != conversation_;
    conversation_ = id;
    system_prompt_->setText(c->system_prompt);
    chat_->setMessages(load_messages(id));
    answer_shown_ = false;
    if (generating_ && id == generating_conversation_) {
        // Back to the conversation that is generating: what streamed so far, then the rest.
        chat_->beginAssistantMessage();
        for (const ui::TokenData& t : answer_tokens_) chat_->appendToken(t);
        chat_->flushPendingTokens();
        answer_shown_ = true;
    }
    chat_->setGenerating(generating_);
    conversations_->setCurrent(id);
    if (switched) {
        clear_conversation_panels();
        if (generating_ && id != generating_conversation_)
            statusBar()->showMessage(
                tr("Still generating in another conversation; it continues there."), 5000);
    }
}

void MainWindow::clear_conversation_panels() {
    latest_token_.reset();
    inspector_pending_.reset();
    sampling_pending_.reset();
    token_panels_timer_->stop();
    inspector_->clear();
    sampling_->clearStep();
    chat_->clearAttentionData();
    if (conversation_ >= 0 && conversation_ == generating_conversation_) {
        // The worker's last generation belongs to this conversation: its panels come back.
        metrics_->setData(last_metrics_);
        QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection, Q_ARG(int, 0),
                                  Q_ARG(int, -1));
        attention_->clear(remote_ ? attention_placeholder()
                                  : tr("Attention of this conversation's latest reply…"));
    } else {
        metrics_->clear();
        attention_->clear(attention_placeholder());
    }
}

QVector<ui::ChatMessage> MainWindow::load_messages(qint64 conversation) {
    QVector<ui::ChatMessage> shown;
    for (const Message& m : store_->messages(conversation)) {
        ui::ChatMessage message;
        message.role = ui_role(m.role);
        message.text = m.content;
        if (m.role == Role::Assistant) {
            message.version = m.version;
            message.versions = m.versions;
            try {
                QString joined;
                QVector<ui::TokenData> tokens = tokens_of(m.id);
                for (const ui::TokenData& t : tokens) joined += t.text;
                // A trace that does not spell the saved text (edited by hand, damaged) is not
                // shown: the text is what the user sees, the trace only explains it.
                if (joined == m.content) message.tokens = std::move(tokens);
            } catch (const std::exception& e) {
                spdlog::warn("conversation {} message {}: token trace not shown: {}", conversation,
                             m.id, e.what());
            }
            if (!m.finish_reason.isEmpty())
                message.note =
                    replyNote(m.finish_reason, m.token_count, m.decode_tokens_per_s, m.ttft_ms);
            else if (!m.complete)
                message.note = replyNote(QStringLiteral("cancelled"), 0, 0, 0);
        }
        shown.push_back(std::move(message));
    }
    return shown;
}

QString MainWindow::replyNote(const QString& finish_reason, int tokens, double tokens_per_s,
                              double ttft_ms) {
    QStringList parts;
    if (finish_reason == QLatin1String("cancelled"))
        parts << tr("■ Stopped by you");
    else if (finish_reason == QLatin1String("max_tokens"))
        parts << tr("■ Cut off: reached the max tokens limit");
    else if (finish_reason == QLatin1String("context_full"))
        parts << tr("■ Cut off: the context is full");
    else if (finish_reason == QLatin1String("error"))
        parts << tr("■ Stopped by an error");
    if (tokens > 0) parts << (tokens == 1 ? tr("1 token") : tr("%1 tokens").arg(tokens));
    if (tokens_per_s > 0) parts << tr("%1 tok/s").arg(tokens_per_s, 0, 'f', 1);
    if (ttft_ms > 0) parts << tr("first token after %1 ms").arg(ttft_ms, 0, 'f', 0);
    return parts.join(QStringLiteral(" · "));
}

void MainWindow::refresh_conversations() {
    QVector<QPair<qint64, QString>> items;
    QHash<qint64, QString> tips;
    for (const auto& c : store_->conversations()) {
        items.push_back({c.id, c.title});
        const QString when = QLocale().toString(c.updated_at.toLocalTime(), QLocale::ShortFormat);
        tips.insert(c.id, c.model_path.isEmpty()
                              ? when
                              : tr("Last answered by %1\n%2").arg(c.model_path, when));
    }
    conversations_->setConversations(items);
    conversations_->setToolTips(tips);
    if (conversation_ >= 0) conversations_->setCurrent(conversation_);
    update_content_matches();
}

void MainWindow::update_content_matches() {
    const QString text = conversations_->filterText();
    if (text.isEmpty()) return;
    QSet<qint64> ids;
    for (const auto& c : store_->search(text)) ids.insert(c.id);
    conversations_->setContentMatches(ids);
}

void MainWindow::deleteConversation(qint64 id) {
    const auto c = store_->conversation(id);
    if (!c) return;
    const int count = static_cast<int>(store_->messages(id).size());
    auto* box = new QMessageBox(
        QMessageBox::Question, tr("Delete conversation"),
        tr("Delete “%1” and its %2?")
            .arg(c->title, count == 1 ? tr("1 message") : tr("%1 messages").arg(count)),
        QMessageBox::Cancel, this);
    box->setObjectName("confirmDelete");
    box->setInformativeText(generating_ && id == generating_conversation_
                                ? tr("It is generating an answer now; deleting stops it. Edit > "
                                     "Undo delete brings the conversation back.")
                                : tr("Edit > Undo delete brings it back."));
    QPushButton* remove = box->addButton(tr("Delete"), QMessageBox::DestructiveRole);
    box->setDefaultButton(QMessageBox::Cancel);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box, remove, id] {
        if (box->clickedButton() == remove) delete_now(id);
    });
    box->open();
}

void MainWindow::delete_now(qint64 id) {
    const auto c = store_->conversation(id);
    if (!c) return;
    if (generating_ && id == generating_conversation_) worker_->stop();  // its answer is not saved
    DeletedConversation snapshot;
    snapshot.conversation = *c;
    snapshot.messages = store_->messages(id);
    for (const Message& m : snapshot.messages) {
        QVector<ui::TokenData> trace;
        try {
            trace = tokens_of(m.id);
        } catch (const std::exception&) {
            // A damaged trace is not worth refusing the deletion for; the text is kept.
        }
        snapshot.traces.append(trace);
    }
    store_->delete_conversation(id);
    deleted_ = std::move(snapshot);
    QMetaObject::invokeMethod(worker_, "forgetConversation", Qt::QueuedConnection,
                              Q_ARG(qint64, id));
    undo_action_->setEnabled(true);
    undo_action_->setText(tr("&Undo delete of “%1”").arg(c->title));
    undo_button_->show();
    undo_timer_->start(kUndoOfferMs);
    statusBar()->showMessage(tr("Deleted “%1”.").arg(c->title), kUndoOfferMs);
    if (id == conversation_) {
        conversation_ = -1;
        chat_->clear();
        clear_conversation_panels();
        refresh_conversations();
        const QList<ConversationSummary> rest = store_->conversations();
        if (!rest.isEmpty()) selectConversation(rest.first().id);
    } else {
        refresh_conversations();
    }
}

void MainWindow::undoDelete() {
    if (!deleted_) return;
    const DeletedConversation d = std::move(*deleted_);
    deleted_.reset();
    undo_action_->setEnabled(false);
    undo_action_->setText(tr("&Undo delete"));
    undo_button_->hide();
    undo_timer_->stop();
    const qint64 id = store_->create_conversation(
        d.conversation.title, d.conversation.system_prompt, d.conversation.model_path);
    for (int i = 0; i < d.messages.size(); ++i) {
        const Message& m = d.messages[i];
        const qint64 message =
            store_->append_message(id, m.role, m.content, m.complete, m.token_count);
        if (!m.finish_reason.isEmpty() || m.decode_tokens_per_s > 0)
            store_->set_reply_stats(
                message, {m.finish_reason, m.token_count, m.decode_tokens_per_s, m.ttft_ms});
        if (!d.traces[i].isEmpty()) write_trace(message, d.traces[i]);
    }
    statusBar()->showMessage(tr("Restored “%1”.").arg(d.conversation.title), 5000);
    refresh_conversations();
    selectConversation(id);
}

QVector<ChatTurn> MainWindow::turns_for(qint64 conversation) {
    QVector<ChatTurn> turns;
    const auto c = store_->conversation(conversation);
    if (c && !c->system_prompt.isEmpty()) turns.push_back({"system", c->system_prompt});
    for (const Message& m : store_->messages(conversation)) {
        if (m.role == Role::System) continue;
        turns.push_back(ChatTurn{QString(role_name(m.role)), m.content});
    }
    return turns;
}

void MainWindow::sendMessage(const QString& text) {
    if (generating_ || text.trimmed().isEmpty()) return;
    if (!model_ready_) {
        show_error(tr("No model"), tr("Open a model first (File > Open model…)."));
        return;
    }
    if (conversation_ < 0) {
        conversation_ =
            store_->create_conversation(text.left(40).simplified(), system_prompt_->text());
        refresh_conversations();
    } else if (store_->messages(conversation_).isEmpty()) {
        store_->rename(conversation_, text.left(40).simplified());
        refresh_conversations();
    }
    // The user's words are committed before anything else happens.
    store_->append_message(conversation_, Role::User, text, true);
    chat_->addMessage(ui::MessageRole::User, text);
    start_generation();
}

void MainWindow::start_generation() {
    generating_ = true;
    generating_conversation_ = conversation_;
    // The conversation remembers what answered it last (a file or a server), for the list's
    // tooltip and for exports.
    store_->set_model_path(conversation_, model_source_);
    chat_->setGenerating(true);
    chat_->beginAssistantMessage();
    answer_shown_ = true;
    answer_text_.clear();
    answer_tokens_.clear();
    last_metrics_ = {};
    clear_conversation_panels();
    // Step mode submits the reply and waits for Step; otherwise it streams to the end.
    worker_->clearStop();
    QMetaObject::invokeMethod(worker_, stepping_ ? "beginStepping" : "generate",
                              Qt::QueuedConnection, Q_ARG(qint64, conversation_),
                              Q_ARG(QVector<tokenscope::app::ChatTurn>, turns_for(conversation_)),
                              Q_ARG(tokenscope::ui::SamplingSettings, settings_));
}

void MainWindow::stopGeneration() {
    if (!generating_) return;
    worker_->stop();
    // A paused step-mode reply is not looping: one more step call sees the flag and ends it.
    if (stepping_) QMetaObject::invokeMethod(worker_, "stepOnce", Qt::QueuedConnection);
}

void MainWindow::regenerate() {
    if (generating_ || conversation_ < 0) return;
    const QList<Message> messages = store_->messages(conversation_);
    if (messages.isEmpty()) return;
    if (messages.last().role == Role::Assistant) {
        // The reply being replaced stays, as a version the new one can be switched back to;
        // its token trace must be in the database first.
        trace_writer_->flush();
        regenerated_version_ = store_->keep_reply_version(messages.last().id);
        store_->truncate_after(conversation_, messages.last().position - 1);
    }
    selectConversation(conversation_);
    start_generation();
}

void MainWindow::showReplyVersion(int message_index, int step) {
    if (generating_ || conversation_ < 0) return;
    const QList<Message> messages = store_->messages(conversation_);
    if (message_index < 0 || message_index >= messages.size()) return;
    const Message& m = messages[message_index];
    const int target = m.version + step;
    if (m.role != Role::Assistant || target < 1 || target > m.versions) return;
    trace_writer_->flush();  // the trace on screen goes with the version it belongs to
    try {
        store_->select_reply_version(m.id, target);
    } catch (const std::exception& e) {
        show_error(tr("Cannot show that version"), QString::fromUtf8(e.what()));
        return;
    }
    pending_traces_.remove(m.id);  // the id now holds another reply's text
    // The engine keeps the conversation's cached prefix: the next message reuses it up to the
    // point where the shown reply differs.
    selectConversation(conversation_);
}

void MainWindow::on_generation_finished(qint64 conversation, const QString& text,
                                        const QString& reason, bool complete) {
    if (!generating_) return;  // already saved by closeEvent
    generating_ = false;
    stepping_ = false;
    step_queued_ = false;
    chat_->flushPendingTokens();
    // The answer is committed now, complete or (after Stop) partial, with its token trace.
    const int version = regenerated_version_;  // a regenerated reply is the newest version
    save_answer(conversation, text, reason, complete);
    if (conversation == conversation_ && answer_shown_) {
        chat_->finishAssistantMessage();
        chat_->setMessageNote(chat_->messageCount() - 1,
                              replyNote(reason, generated_tokens(),
                                        last_metrics_.decode_tokens_per_s, last_metrics_.ttft_ms));
        if (version > 0) chat_->setMessageVersions(chat_->messageCount() - 1, version, version);
    }
    answer_shown_ = false;
    chat_->setGenerating(false);
    refresh_conversations();
    // A finished reply means the model works: transient notes ("Model unchanged…") are over.
    if (model_ready_) set_model_status(model_status_);
    if (pending_speculation_) apply_speculation(*std::exchange(pending_speculation_, std::nullopt));
    emit generationDone();
}

qint64 MainWindow::save_answer(qint64 conversation, const QString& text, const QString& reason,
                               bool complete) {
    if (conversation < 0 || !store_->conversation(conversation)) return -1;  // deleted meanwhile
    const int tokens = generated_tokens();
    const qint64 id = store_->append_reply(
        conversation, text, complete,
        {reason, tokens, last_metrics_.decode_tokens_per_s, last_metrics_.ttft_ms});
    if (!answer_tokens_.isEmpty()) write_trace(id, answer_tokens_);
    if (regenerated_version_ > 0) {
        // The newest version of its position: "‹ n/n ›".
        store_->set_reply_version(id, regenerated_version_);
        regenerated_version_ = 0;
    }
    return id;
}

int MainWindow::generated_tokens() const {
    // Pieces with no token id (text released at the end of a reply) are not tokens.
    return static_cast<int>(std::count_if(answer_tokens_.begin(), answer_tokens_.end(),
                                          [](const ui::TokenData& t) { return t.id >= 0; }));
}

void MainWindow::write_trace(qint64 message_id, const QVector<ui::TokenData>& tokens) {
    pending_traces_.insert(message_id, tokens);
    QMetaObject::invokeMethod(trace_writer_, "write", Qt::QueuedConnection,
                              Q_ARG(qint64, message_id),
                              Q_ARG(QVector<tokenscope::ui::TokenData>, tokens));
}

QVector<ui::TokenData> MainWindow::tokens_of(qint64 message_id) {
    const auto pending = pending_traces_.constFind(message_id);
    if (pending != pending_traces_.constEnd()) return *pending;
    QVector<ui::TokenData> tokens;
    for (const TraceToken& t : store_->token_trace(message_id))
        tokens.push_back(token_from_trace(t));
    return tokens;
}

void MainWindow::set_model_status(const QString& text) {
    model_status_ = text;
    status_model_->setText(text);
}

QString MainWindow::statusText() const {
    return status_model_->text();
}

void MainWindow::show_error(const QString& title, const QString& message) {
    // Window-modal but not blocking: the event loop (and the worker's signals) keep running.
    auto* box = new QMessageBox(QMessageBox::Critical, title, message, QMessageBox::Ok, this);
    box->setObjectName("errorDialog");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setTextInteractionFlags(Qt::TextSelectableByMouse);
    box->open();
}

void MainWindow::remember_recent(const QString& path) {
    QSettings settings;
    QStringList recent = settings.value("models/recent").toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > kMaxRecent) recent.removeLast();
    settings.setValue("models/recent", recent);
    rebuild_recent_menu();
}

void MainWindow::rebuild_recent_menu() {
    recent_menu_->clear();
    const QStringList recent = QSettings().value("models/recent").toStringList();
    for (const QString& path : recent) {
        recent_menu_->addAction(QFileInfo(path).fileName(), this, [this, path] { openModel(path); })
            ->setToolTip(path);
    }
    recent_menu_->setEnabled(!recent.isEmpty());
}

void MainWindow::scan_models_folder() {
    if (models_scanning_) return;
    models_scanning_ = true;
    const std::filesystem::path dir = models_folder().toStdString();
    // Each file is mapped and its metadata validated (a 262k-token vocabulary takes tens of
    // milliseconds): off the GUI thread, the menu fills in when done.
    auto* watcher = new QFutureWatcher<QVector<ModelEntry>>(this);
    connect(watcher, &QFutureWatcher<QVector<ModelEntry>>::finished, this, [this, watcher] {
        models_ = watcher->result();
        watcher->deleteLater();
        models_scanning_ = false;
        rebuild_models_menu();
        emit modelsScanned();
    });
    watcher->setFuture(QtConcurrent::run([dir] {
        QVector<ModelEntry> entries;
        for (const inspect::ModelCard& card : inspect::scan_model_folder(dir)) {
            ModelEntry e;
            e.path = QString::fromStdString(card.path.string());
            e.name = QString::fromStdString(card.name);
            e.error = QString::fromStdString(card.error);
            e.instruct = card.instruct;
            if (e.error.isEmpty()) {
                e.details =
                    QStringLiteral("%1 · %2 · %3 · %4")
                        .arg(QString::fromStdString(card.architecture),
                             QString::fromStdString(card.quantization),
                             QString::fromStdString(inspect::format_file_size(card.file_bytes)),
                             card.instruct ? tr("instruct") : tr("base"));
            }
            entries.push_back(std::move(e));
        }
        return entries;
    }));
}

void MainWindow::rebuild_models_menu() {
    models_menu_->clear();
    const QString folder = models_folder();
    if (models_.isEmpty()) {
        QAction* none = models_menu_->addAction(
            models_scanning_ ? tr("Scanning %1…").arg(folder) : tr("No models in %1").arg(folder));
        none->setEnabled(false);
    }
    for (const ModelEntry& m : models_) {
        QAction* a = models_menu_->addAction(m.error.isEmpty()
                                                 ? QStringLiteral("%1 — %2").arg(m.name, m.details)
                                                 : tr("%1 — cannot be read").arg(m.name));
        a->setToolTip(m.error.isEmpty() ? m.path : m.error);
        a->setCheckable(true);
        a->setChecked(m.path == model_path_);
        a->setEnabled(m.error.isEmpty());
        a->setData(m.path);
        connect(a, &QAction::triggered, this, [this, path = m.path] { openModel(path); });
    }
    models_menu_->addSeparator();
    models_menu_->addAction(tr("Open models folder"), this,
                            [folder] { QDesktopServices::openUrl(QUrl::fromLocalFile(folder)); });
}

void MainWindow::closeEvent(QCloseEvent* event) {
    // Closing during generation: stop it (the partial answer is saved when it finishes) and
    // leave promptly; the worker checks the flag between steps.
    worker_->stop();
    worker_->cancelLoad();
    if (generating_) {
        // The finished signal will not reach a closed window: save what streamed so far.
        generating_ = false;
        save_answer(generating_conversation_, answer_text_, QStringLiteral("cancelled"), false);
    }
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    event->accept();
}

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    if (laid_out_) return;
    laid_out_ = true;
    // The first time the window has its real size: the default layout for that size, unless
    // the user's own layout was restored.
    if (!restored_state_) {
        place_docks(compactLayout());
        apply_dock_sizes();
    }
}

void MainWindow::resizeEvent(QResizeEvent* event) {
    QMainWindow::resizeEvent(event);
    if (laid_out_) keep_chat_wide();
}

void MainWindow::keep_chat_wide() {
    // Docks keep their width when the window narrows and the chat pays for it; past the
    // point where the chat would get less than half the window, the docks give way.
    QWidget* centre = centralWidget();
    if (!centre || width() < 400) return;
    if (centre->width() >= width() * 60 / 100) return;
    QList<QDockWidget*> side;
    for (QDockWidget* d : docks_)
        if (!d->isFloating() && d->isVisible() &&
            (dockWidgetArea(d) == Qt::RightDockWidgetArea ||
             dockWidgetArea(d) == Qt::LeftDockWidgetArea))
            side << d;
    if (side.isEmpty()) return;
    QList<int> widths;
    for (int i = 0; i < side.size(); ++i) widths << width() * 28 / 100;
    resizeDocks(side, widths, Qt::Horizontal);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    for (const QUrl& url : event->mimeData()->urls()) {
        if (url.isLocalFile()) {
            openModel(url.toLocalFile());
            return;
        }
    }
}

}  // namespace tokenscope::app
