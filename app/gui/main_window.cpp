#include "main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "conversation_list.h"
#include "kv_cache_view.h"
#include "memory_budget_view.h"
#include "metrics_view.h"
#include "model_info_view.h"
#include "sampling_panel.h"
#include "token_inspector.h"
#include "util/paths.h"

namespace tokenscope::app {

namespace {
constexpr int kMaxRecent = 8;

ui::MessageRole ui_role(Role role) {
    switch (role) {
        case Role::System: return ui::MessageRole::System;
        case Role::Assistant: return ui::MessageRole::Assistant;
        case Role::User: return ui::MessageRole::User;
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
    statusBar()->addWidget(status_model_, 1);
    statusBar()->addPermanentWidget(load_progress_);
    statusBar()->addPermanentWidget(load_cancel_);

    worker_ = new InferenceWorker;
    worker_->moveToThread(&worker_thread_);
    connect(&worker_thread_, &QThread::finished, worker_, &QObject::deleteLater);
    worker_thread_.setObjectName("inference");
    worker_thread_.start();
    connect_worker();

    connect(chat_, &ui::ChatView::sendRequested, this, &MainWindow::sendMessage);
    connect(chat_, &ui::ChatView::stopRequested, this, &MainWindow::stopGeneration);
    connect(chat_, &ui::ChatView::regenerateRequested, this, &MainWindow::regenerate);
    connect(chat_, &ui::ChatView::editRequested, this, [this](int index, const QString& text) {
        if (generating_ || conversation_ < 0) return;
        // Editing message `index` drops it and everything after; the engine keeps the shared
        // prefix of the cache and prefills the rest.
        store_->truncate_after(conversation_, index - 1);
        store_->append_message(conversation_, Role::User, text, true);
        selectConversation(conversation_);
        start_generation();
    });
    connect(chat_, &ui::ChatView::tokenSelected, inspector_, &ui::TokenInspector::setToken);
    connect(system_prompt_, &QLineEdit::editingFinished, this, [this] {
        if (conversation_ >= 0) store_->set_system_prompt(conversation_, system_prompt_->text());
    });
    connect(conversations_, &ui::ConversationList::conversationSelected, this, &MainWindow::selectConversation);
    connect(conversations_, &ui::ConversationList::newRequested, this, &MainWindow::newConversation);
    connect(conversations_, &ui::ConversationList::renameRequested, this, [this](qint64 id, const QString& title) {
        store_->rename(id, title);
        refresh_conversations();
    });
    connect(conversations_, &ui::ConversationList::deleteRequested, this, [this](qint64 id) {
        if (generating_ && id == conversation_) return;
        store_->delete_conversation(id);
        QMetaObject::invokeMethod(worker_, "forgetConversation", Qt::QueuedConnection, Q_ARG(qint64, id));
        if (id == conversation_) {
            conversation_ = -1;
            chat_->clear();
        }
        refresh_conversations();
    });
    connect(sampling_, &ui::SamplingPanel::settingsChanged, this, [this](const ui::SamplingSettings& s) { settings_ = s; });
    connect(attention_, &ui::AttentionHeatmap::selectionChanged, this, [this](int layer, int head) {
        QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection, Q_ARG(int, layer), Q_ARG(int, head));
    });
    connect(load_cancel_, &QToolButton::clicked, this, [this] { worker_->cancelLoad(); });

    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
    settings_ = sampling_->settings();

    refresh_conversations();
    const QList<ConversationSummary> existing = store_->conversations();
    if (!existing.isEmpty()) selectConversation(existing.first().id);

    QString model = options_.model_path;
    if (model.isEmpty()) model = QString::fromStdString(paths::default_model().string());
    if (QFileInfo::exists(model)) {
        openModel(model);
    } else {
        status_model_->setText(tr("No model: open a GGUF file (File > Open model…) or drop one here"));
    }
}

MainWindow::~MainWindow() {
    worker_->stop();
    worker_->cancelLoad();
    worker_thread_.quit();
    worker_thread_.wait();
}

void MainWindow::build_docks() {
    auto dock = [this](QWidget* widget, const QString& title, const QString& name, Qt::DockWidgetArea area) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name);  // saveState/restoreState key
        d->setWidget(widget);
        addDockWidget(area, d);
        return d;
    };
    sampling_ = new ui::SamplingPanel(this);
    inspector_ = new ui::TokenInspector(this);
    kv_ = new ui::KvCacheView(this);
    attention_ = new ui::AttentionHeatmap(this);
    metrics_ = new ui::MetricsView(this);
    memory_ = new ui::MemoryBudgetView(this);
    model_info_ = new ui::ModelInfoView(this);
    auto* sampling = dock(sampling_, tr("Sampling"), "dock.sampling", Qt::RightDockWidgetArea);
    auto* inspector = dock(inspector_, tr("Token"), "dock.token", Qt::RightDockWidgetArea);
    auto* attention = dock(attention_, tr("Attention"), "dock.attention", Qt::RightDockWidgetArea);
    auto* kv = dock(kv_, tr("KV cache"), "dock.kv", Qt::BottomDockWidgetArea);
    auto* metrics = dock(metrics_, tr("Metrics"), "dock.metrics", Qt::BottomDockWidgetArea);
    auto* memory = dock(memory_, tr("Memory"), "dock.memory", Qt::BottomDockWidgetArea);
    auto* model = dock(model_info_, tr("Model"), "dock.model", Qt::BottomDockWidgetArea);
    tabifyDockWidget(sampling, inspector);
    tabifyDockWidget(metrics, memory);
    tabifyDockWidget(memory, model);
    sampling->raise();
    metrics->raise();
    (void)attention;
    (void)kv;
}

void MainWindow::build_menus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), QString::fromStdString(paths::models_dir().string()),
                                                          tr("GGUF models (*.gguf);;All files (*)"));
        if (!path.isEmpty()) openModel(path);
    });
    recent_menu_ = file->addMenu(tr("Open &recent"));
    rebuild_recent_menu();
    // The KV cache element type is fixed when a model loads: choosing one reloads the model.
    QMenu* kv_type = file->addMenu(tr("&KV cache type"));
    auto* kv_group = new QActionGroup(kv_type);
    const QString current_kv = QSettings().value("model/kv_type", options_.load.kv_type).toString();
    for (const auto& [name, label] : {std::pair{"f16", tr("F16 (default)")}, std::pair{"q8", tr("Q8 (int8 + scale per row: about half the memory)")},
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
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
    view->addSeparator();
    QAction* color = view->addAction(tr("Colour tokens by probability"));
    color->setCheckable(true);
    connect(color, &QAction::toggled, chat_, &ui::ChatView::setColorByProbability);
    connect(chat_, &ui::ChatView::colorByProbabilityChanged, color, &QAction::setChecked);
    QAction* boundaries = view->addAction(tr("Show token boundaries"));
    boundaries->setCheckable(true);
    connect(boundaries, &QAction::toggled, chat_, &ui::ChatView::setShowTokenBoundaries);
    connect(chat_, &ui::ChatView::showTokenBoundariesChanged, boundaries, &QAction::setChecked);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About tokenscope"), this, [this] {
        QMessageBox::about(this, tr("About tokenscope"),
                           tr("<b>tokenscope %1</b><p>Chat with a local language model and see inside it while it runs: "
                              "token probabilities, sampling, attention and the KV cache.</p>")
                               .arg(TOKENSCOPE_VERSION_STRING));
    });
}

void MainWindow::connect_worker() {
    token_panels_timer_ = new QTimer(this);
    token_panels_timer_->setSingleShot(true);
    token_panels_timer_->setInterval(33);
    connect(token_panels_timer_, &QTimer::timeout, this, [this] {
        if (!latest_token_) return;
        inspector_->setToken(*latest_token_);
        sampling_->setLastStep(latest_token_->before);
        latest_token_.reset();
    });
    connect(worker_, &InferenceWorker::loadProgress, this, [this](int percent, const QString& stage) {
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
        attention_->setModelShape(static_cast<int>(info.layers), static_cast<int>(info.heads));
        status_model_->setText(tr("%1 — %2 (%3 template)").arg(info.name, info.backend, info.chat_template));
        remember_recent(info.path);
        emit modelReadyChanged(true);
    });
    connect(worker_, &InferenceWorker::loadFailed, this, [this](const QString& message) {
        load_progress_->hide();
        load_cancel_->hide();
        status_model_->setText(model_ready_ ? tr("Model unchanged: the new file failed to load") : tr("No model"));
        show_error(tr("Cannot load the model"), message);
        emit modelReadyChanged(model_ready_);
    });
    connect(worker_, &InferenceWorker::loadCancelled, this, [this] {
        load_progress_->hide();
        load_cancel_->hide();
        status_model_->setText(model_ready_ ? status_model_->text() : tr("Loading cancelled"));
    });
    connect(worker_, &InferenceWorker::tokenGenerated, this, [this](qint64 conversation, const ui::TokenData& token) {
        if (conversation != conversation_) return;
        answer_text_ += token.text;
        chat_->appendToken(token);
        latest_token_ = token;
        if (!token_panels_timer_->isActive()) token_panels_timer_->start();
    });
    connect(worker_, &InferenceWorker::generationFinished, this, &MainWindow::on_generation_finished);
    connect(worker_, &InferenceWorker::generationFailed, this,
            [this](qint64, const QString& message) { show_error(tr("Generation failed"), message); });
    connect(worker_, &InferenceWorker::metricsChanged, metrics_, &ui::MetricsView::setData);
    connect(worker_, &InferenceWorker::kvChanged, kv_, &ui::KvCacheView::setData);
    connect(worker_, &InferenceWorker::memoryChanged, memory_, &ui::MemoryBudgetView::setData);
    connect(worker_, &InferenceWorker::attentionChanged, attention_, &ui::AttentionHeatmap::setData);
}

void MainWindow::openModel(const QString& path) {
    if (generating_) stopGeneration();
    model_path_ = path;
    QSettings settings;
    LoadOptions load = options_.load;
    load.kv_type = settings.value("model/kv_type", load.kv_type).toString();
    QMetaObject::invokeMethod(worker_, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path),
                              Q_ARG(tokenscope::app::LoadOptions, load));
}

void MainWindow::newConversation() {
    if (generating_) return;
    conversation_ = store_->create_conversation(tr("New conversation"), system_prompt_->text());
    chat_->clear();
    refresh_conversations();
}

void MainWindow::selectConversation(qint64 id) {
    if (generating_) return;
    const auto c = store_->conversation(id);
    if (!c) return;
    conversation_ = id;
    system_prompt_->setText(c->system_prompt);
    QVector<ui::ChatMessage> shown;
    for (const Message& m : store_->messages(id)) {
        ui::ChatMessage message;
        message.role = ui_role(m.role);
        message.text = m.content;
        shown.push_back(message);
    }
    chat_->setMessages(shown);
    conversations_->setCurrent(id);
}

void MainWindow::refresh_conversations() {
    QVector<QPair<qint64, QString>> items;
    for (const auto& c : store_->conversations()) items.push_back({c.id, c.title});
    conversations_->setConversations(items);
    if (conversation_ >= 0) conversations_->setCurrent(conversation_);
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
        conversation_ = store_->create_conversation(text.left(40).simplified(), system_prompt_->text());
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
    chat_->setGenerating(true);
    chat_->beginAssistantMessage();
    answer_message_ = -1;
    answer_text_.clear();
    QMetaObject::invokeMethod(worker_, "generate", Qt::QueuedConnection, Q_ARG(qint64, conversation_),
                              Q_ARG(QVector<tokenscope::app::ChatTurn>, turns_for(conversation_)),
                              Q_ARG(tokenscope::ui::SamplingSettings, settings_));
}

void MainWindow::stopGeneration() {
    if (generating_) worker_->stop();
}

void MainWindow::regenerate() {
    if (generating_ || conversation_ < 0) return;
    const QList<Message> messages = store_->messages(conversation_);
    if (messages.isEmpty()) return;
    if (messages.last().role == Role::Assistant) store_->truncate_after(conversation_, messages.last().position - 1);
    selectConversation(conversation_);
    start_generation();
}

void MainWindow::on_generation_finished(qint64 conversation, const QString& text, const QString&, bool complete) {
    if (!generating_) return;  // already saved by closeEvent
    generating_ = false;
    chat_->finishAssistantMessage();
    chat_->setGenerating(false);
    // The answer is committed now, complete or (after Stop) partial.
    if (conversation >= 0 && store_->conversation(conversation)) {
        store_->append_message(conversation, Role::Assistant, text, complete);
    }
    refresh_conversations();
    emit generationDone();
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
        recent_menu_->addAction(QFileInfo(path).fileName(), this, [this, path] { openModel(path); })->setToolTip(path);
    }
    recent_menu_->setEnabled(!recent.isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* event) {
    // Closing during generation: stop it (the partial answer is saved when it finishes) and
    // leave promptly; the worker checks the flag between steps.
    worker_->stop();
    worker_->cancelLoad();
    if (generating_) {
        // The finished signal will not reach a closed window: save what streamed so far.
        generating_ = false;
        if (store_->conversation(conversation_)) store_->append_message(conversation_, Role::Assistant, answer_text_, false);
    }
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    event->accept();
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
