#include "batch_demo_window.h"

#include <QCloseEvent>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>
#include <exception>
#include <map>

#include "runtime/batch_demo.h"
#include "runtime/engine.h"

namespace tokenscope::app {

namespace {

// The first is longer than the default token budget, so its prefill is cut into chunks.
const char* const kDefaultPrompts[] = {
    "Gutenberg's press combined movable metal type, oil-based ink and a screw press adapted from "
    "wine making. Within fifty years printers worked in more than two hundred cities. The history "
    "of the printing press begins in",
    "Write a list of five fruits:",
    "Once upon a time, in a village by the sea,",
    "The three states of water are",
    "A recipe for pancakes needs",
};

int cell_kind(runtime::ScheduleEntry::Kind kind) {
    using K = runtime::ScheduleEntry::Kind;
    switch (kind) {
        case K::Prefill:
            return ui::BatchTimelineCell::Prefill;
        case K::Decode:
            return ui::BatchTimelineCell::Decode;
        case K::Verify:
            return ui::BatchTimelineCell::Verify;
        case K::Waiting:
            return ui::BatchTimelineCell::Waiting;
        case K::Preempted:
            return ui::BatchTimelineCell::Preempted;
    }
    return ui::BatchTimelineCell::Absent;
}

ui::BatchTimelineData timeline_of(const runtime::BatchDemoResult& r, const QStringList& prompts) {
    ui::BatchTimelineData d;
    std::map<runtime::RequestId, int> row;
    for (std::size_t i = 0; i < r.requests.size(); ++i) {
        row[r.requests[i].id] = static_cast<int>(i);
        d.rows << QStringLiteral("%1. %2").arg(i + 1).arg(prompts.value(static_cast<int>(i)));
    }
    for (const auto& step : r.steps) {
        QVector<ui::BatchTimelineCell> cells(static_cast<int>(r.requests.size()));
        for (const auto& e : step.schedule.entries) {
            const auto it = row.find(e.request);
            if (it == row.end()) continue;
            cells[it->second] = {cell_kind(e.kind), static_cast<int>(e.tokens)};
        }
        d.steps.push_back(cells);
        d.budget = static_cast<int>(step.schedule.budget);
    }
    return d;
}

QString summary_of(const runtime::BatchDemoResult& r, int budget, int kv_tokens) {
    const QLocale l;
    QString s = QObject::tr(
                    "%1 requests, %2 tokens generated in %3 engine steps (%4 s): "
                    "%5 tok/s together")
                    .arg(r.requests.size())
                    .arg(r.generated_tokens)
                    .arg(r.steps.size())
                    .arg(l.toString(r.seconds, 'f', 2))
                    .arg(l.toString(r.tokens_per_second, 'f', 1));
    if (r.single_tokens_per_second > 0) {
        s += QObject::tr(", against %1 tok/s for the first request alone (%2x).")
                 .arg(l.toString(r.single_tokens_per_second, 'f', 1))
                 .arg(l.toString(r.tokens_per_second / r.single_tokens_per_second, 'f', 2));
    } else {
        s += QStringLiteral(".");
    }
    s += QObject::tr(" Token budget %1 per step, KV cache %2 tokens, %3 preemption(s).")
             .arg(budget)
             .arg(kv_tokens)
             .arg(r.preemptions);
    if (r.stopped) s += QObject::tr(" Stopped before the end.");
    return s;
}

}  // namespace

void BatchDemoJob::run(const BatchDemoSettings& settings) {
    try {
        runtime::EngineOptions o;
        o.threads = settings.threads;
        o.token_budget = settings.token_budget;
        o.kv_capacity_tokens = settings.kv_tokens;
        o.device = runtime::Device::Cpu;
        // A second engine beside the chat's: the file mapping shares its pages with the chat
        // engine's page cache instead of holding a second copy of the weights.
        o.large_pages = false;
        auto engine = runtime::Engine::load(settings.model_path.toStdString(), o);
        const auto& tok = engine->tokenizer();
        runtime::BatchDemoOptions d;
        for (const QString& p : settings.prompts)
            d.prompts.push_back(tok.encode(p.toStdString(), {.add_bos = tok.add_bos()}));
        d.max_tokens = settings.max_tokens;
        d.stagger_steps = settings.stagger_steps;
        d.on_step = [this](int step) {
            emit progress(step);
            return !stop_.load();
        };
        const auto result = runtime::run_batch_demo(*engine, d);
        emit finished(timeline_of(result, settings.prompts),
                      summary_of(result, settings.token_budget, settings.kv_tokens), QString());
    } catch (const std::exception& e) {
        emit finished({}, QString(), QString::fromStdString(e.what()));
    }
}

BatchDemoWindow::BatchDemoWindow(QWidget* parent) : QDialog(parent) {
    qRegisterMetaType<BatchDemoSettings>();
    qRegisterMetaType<ui::BatchTimelineData>();
    setWindowTitle(tr("Batch demo: continuous batching"));
    setObjectName(QStringLiteral("batchDemo"));
    setWindowFlag(Qt::Window);

    auto* root = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    prompts_ = new QPlainTextEdit(this);
    prompts_->setObjectName(QStringLiteral("batchPrompts"));
    prompts_->setToolTip(tr("One prompt per line; each becomes a request (greedy, plain text)"));
    QStringList defaults;
    for (const char* p : kDefaultPrompts) defaults << QString::fromUtf8(p);
    prompts_->setPlainText(defaults.join('\n'));
    prompts_->setMaximumHeight(110);
    top->addWidget(prompts_, 3);
    auto* form = new QFormLayout;
    auto spin = [this, form](const QString& label, int lo, int hi, int value, const QString& tip) {
        auto* s = new QSpinBox(this);
        s->setRange(lo, hi);
        s->setValue(value);
        s->setToolTip(tip);
        form->addRow(label, s);
        return s;
    };
    max_tokens_ =
        spin(tr("Tokens per reply"), 1, 512, 24, tr("Greedy tokens each request generates"));
    budget_ = spin(tr("Token budget per step"), 1, 4096, 16,
                   tr("Tokens the scheduler computes per step: long prompts are prefilled in "
                      "chunks of at most this many, sharing the step with decoding requests"));
    kv_tokens_ = spin(tr("KV cache (tokens)"), 16, 65536, 128,
                      tr("A small cache makes the newest request give its blocks back to older "
                         "ones (preemption) and compute its tokens again later"));
    stagger_ =
        spin(tr("Join every (steps)"), 0, 100, 3, tr("Request i joins before step i x this"));
    top->addLayout(form, 2);
    root->addLayout(top);

    auto* buttons = new QHBoxLayout;
    run_ = new QPushButton(tr("&Run"), this);
    run_->setDefault(true);
    stop_ = new QPushButton(tr("&Stop"), this);
    stop_->setEnabled(false);
    buttons->addWidget(run_);
    buttons->addWidget(stop_);
    summary_ =
        new QLabel(tr("Run submits the prompts to a second engine on the current model."), this);
    summary_->setObjectName(QStringLiteral("batchSummary"));
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    buttons->addWidget(summary_, 1);
    root->addLayout(buttons);

    view_ = new ui::BatchTimelineView(this);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(view_);
    scroll->setWidgetResizable(true);
    root->addWidget(scroll, 1);
    view_->installExportMenu(QStringLiteral("batch-timeline"));

    job_ = new BatchDemoJob;
    job_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, job_, &QObject::deleteLater);
    thread_.start();
    connect(job_, &BatchDemoJob::progress, this,
            [this](int step) { summary_->setText(tr("Running: engine step %1…").arg(step + 1)); });
    connect(job_, &BatchDemoJob::finished, this,
            [this](const ui::BatchTimelineData& t, const QString& summary, const QString& error) {
                set_running(false);
                if (!error.isEmpty()) {
                    summary_->setText(tr("Failed: %1").arg(error));
                } else {
                    view_->setData(t);
                    summary_->setText(summary);
                }
                emit runFinished(error);
            });
    connect(run_, &QPushButton::clicked, this, &BatchDemoWindow::start);
    connect(stop_, &QPushButton::clicked, this, &BatchDemoWindow::stop);

    const QRect avail =
        parentWidget() ? parentWidget()->screen()->availableGeometry() : QRect(0, 0, 1280, 720);
    resize(std::min(1150, avail.width() - 40), std::min(620, avail.height() - 40));
    run_->setFocus();  // Enter runs the demo as it opens
}

BatchDemoWindow::~BatchDemoWindow() {
    job_->stop();
    thread_.quit();
    thread_.wait();
}

BatchDemoSettings BatchDemoWindow::settings() const {
    BatchDemoSettings s;
    s.model_path = model_path_;
    for (const QString& line : prompts_->toPlainText().split('\n')) {
        if (!line.trimmed().isEmpty()) s.prompts << line.trimmed();
    }
    s.max_tokens = max_tokens_->value();
    s.token_budget = budget_->value();
    s.kv_tokens = kv_tokens_->value();
    s.stagger_steps = stagger_->value();
    s.threads = std::max(1, QThread::idealThreadCount() - 1);
    return s;
}

void BatchDemoWindow::setPrompts(const QStringList& prompts) {
    prompts_->setPlainText(prompts.join('\n'));
}

void BatchDemoWindow::setLimits(int max_tokens, int token_budget, int kv_tokens,
                                int stagger_steps) {
    max_tokens_->setValue(max_tokens);
    budget_->setValue(token_budget);
    kv_tokens_->setValue(kv_tokens);
    stagger_->setValue(stagger_steps);
}

QString BatchDemoWindow::summary() const {
    return summary_->text();
}

void BatchDemoWindow::start() {
    if (running_) return;
    const BatchDemoSettings s = settings();
    if (s.model_path.isEmpty()) {
        summary_->setText(tr("Load a local model first: the demo runs a second engine on it."));
        return;
    }
    if (s.prompts.isEmpty()) {
        summary_->setText(tr("Write at least one prompt, one per line."));
        return;
    }
    set_running(true);
    summary_->setText(tr("Loading the model…"));
    job_->arm();
    QMetaObject::invokeMethod(job_, "run", Qt::QueuedConnection,
                              Q_ARG(tokenscope::app::BatchDemoSettings, s));
}

void BatchDemoWindow::stop() {
    if (running_) job_->stop();
}

void BatchDemoWindow::closeEvent(QCloseEvent* event) {
    stop();
    QDialog::closeEvent(event);
}

void BatchDemoWindow::set_running(bool running) {
    running_ = running;
    run_->setEnabled(!running);
    stop_->setEnabled(running);
}

}  // namespace tokenscope::app
