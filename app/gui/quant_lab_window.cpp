#include "quant_lab_window.h"

#include <QCheckBox>
#include <QCloseEvent>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSplitter>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QThread>
#include <QVBoxLayout>
#include <cstring>

#include "quant/eval_plot.h"
#include "quant_lab_text.h"

namespace tokenscope::app {

namespace {

// The types offered, in the order of the table; the first three are checked at first.
const char* const kTypes[] = {"Q8_0", "Q4_K_M", "Q4_0", "F16", "Q6_K", "Q5_K_M", "Q3_K", "Q2_K"};
constexpr int kDefaultChecked = 3;

enum Column {
    Type,
    Size,
    Bits,
    Perplexity,
    DeltaPerplexity,
    KlMean,
    KlP99,
    Top1,
    DecodeSpeed,
    Count
};

// The plot drawn by the engine's renderer (the picture `quant-eval --plot` writes) at the
// label's own size, so its pixel-font labels stay legible instead of being scaled down. A plot
// of a few points renders in well under a millisecond, so it is drawn here on resize.
class PlotLabel : public QLabel {
  public:
    using QLabel::QLabel;
    void setResult(const quant::EvalResult& result) {
        result_ = result;
        has_result_ = true;
        render();
    }
    void clearResult() {
        has_result_ = false;
        image_ = {};
        setPixmap({});
    }
    const QImage& image() const { return image_; }

  protected:
    void resizeEvent(QResizeEvent* event) override {
        QLabel::resizeEvent(event);
        render();
    }

  private:
    void render() {
        if (!has_result_) return;
        const QSize room =
            contentsRect().size().expandedTo(QSize(320, 240));  // the renderer's minimum
        const inspect::RgbImage rgb =
            quant::render_eval_plot_png(result_, room.width(), room.height());
        QImage image(rgb.width, rgb.height, QImage::Format_RGB888);
        for (int y = 0; y < rgb.height; ++y) {
            std::memcpy(image.scanLine(y),
                        rgb.rgb.data() + static_cast<std::size_t>(y) * rgb.width * 3,
                        static_cast<std::size_t>(rgb.width) * 3);
        }
        image_ = image;
        setPixmap(QPixmap::fromImage(image_));
    }
    quant::EvalResult result_;
    bool has_result_ = false;
    QImage image_;
};

QString builtin_sample() {
    QFile f(QStringLiteral(":/text/perplexity_english.txt"));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QString::fromUtf8(f.readAll());
}

// Where the sample splits: the first paragraph break (or sentence end) after its middle, so
// neither half cuts a sentence.
qsizetype split_point(const QString& text) {
    const qsizetype middle = text.size() / 2;
    qsizetype at = text.indexOf(QStringLiteral("\n\n"), middle);
    if (at < 0) at = text.indexOf(QStringLiteral(". "), middle);
    return at < 0 ? middle : at + 2;
}

QString mb(qint64 bytes) {
    return QLocale().toString(static_cast<double>(bytes) / 1e6, 'f', 1) + QStringLiteral(" MB");
}

QTableWidgetItem* cell(const QString& text, bool number = true) {
    auto* item = new QTableWidgetItem(text);
    item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

}  // namespace

QString QuantLabWindow::builtinCalibrationText() {
    const QString s = builtin_sample();
    return s.left(split_point(s));
}

QString QuantLabWindow::builtinEvaluationText() {
    const QString s = builtin_sample();
    return s.mid(split_point(s));
}

QuantLabWindow::QuantLabWindow(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Quantization lab"));
    setObjectName(QStringLiteral("quantLab"));
    setWindowFlag(Qt::Window);
    build();
    job_ = new QuantLabJob;
    job_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, job_, &QObject::deleteLater);
    thread_.start();

    connect(job_, &QuantLabJob::planned, this, [this](const QStringList& labels) {
        table_->setRowCount(static_cast<int>(labels.size()) + 1);
        table_->setItem(0, Type, cell(tr("base (original)"), false));
        for (int r = 0; r < labels.size(); ++r) {
            table_->setItem(r + 1, Type, cell(labels[r], false));
            for (int c = Size; c < Count; ++c) table_->setItem(r + 1, c, cell(QString()));
        }
    });
    connect(job_, &QuantLabJob::stageChanged, this, [this](const QString& text, int percent) {
        status_->setText(text);
        progress_->setValue(percent);
    });
    connect(job_, &QuantLabJob::rowQuantized, this,
            [this](int row, const QuantLabRow& d) { fill_row(row + 1, d, false); });
    connect(job_, &QuantLabJob::baseEvaluated, this, [this](const QuantLabRow& d) {
        fill_row(0, d, true);
        plot_data_.base = d.eval;
    });
    connect(job_, &QuantLabJob::rowEvaluated, this, [this](int row, const QuantLabRow& d) {
        fill_row(row + 1, d, true);
        plot_data_.models.push_back(d.eval);
        static_cast<PlotLabel*>(plot_)->setResult(plot_data_);
    });
    connect(job_, &QuantLabJob::finished, this, [this](bool cancelled, const QString& error) {
        set_running(false);
        if (!error.isEmpty()) status_->setText(tr("Failed: %1").arg(error));
        if (cancelled) status_->setText(tr("Cancelled; the files already written are kept."));
        emit runFinished(cancelled, error);
    });
}

QuantLabWindow::~QuantLabWindow() {
    job_->cancel();
    thread_.quit();
    thread_.wait();
}

void QuantLabWindow::build() {
    auto* root = new QVBoxLayout(this);
    auto* split = new QSplitter(Qt::Horizontal, this);
    root->addWidget(split);

    auto* left = new QWidget(split);
    auto* column = new QVBoxLayout(left);
    column->setContentsMargins(0, 0, 0, 0);

    auto* setup = new QGroupBox(tr("What to make"), left);
    auto* grid = new QGridLayout(setup);
    auto browse_row = [&](int row, const QString& label, QLineEdit*& edit, const QString& hint,
                          bool directory) {
        grid->addWidget(new QLabel(label, setup), row, 0);
        edit = new QLineEdit(setup);
        edit->setPlaceholderText(hint);
        edit->setClearButtonEnabled(true);
        grid->addWidget(edit, row, 1);
        auto* button = new QPushButton(tr("Browse…"), setup);
        grid->addWidget(button, row, 2);
        QLineEdit* target = edit;
        connect(button, &QPushButton::clicked, this, [this, target, directory, label] {
            const QString start = target->text().isEmpty() ? QDir::homePath() : target->text();
            const QString chosen =
                directory ? QFileDialog::getExistingDirectory(this, label, start)
                          : QFileDialog::getOpenFileName(this, label, QFileInfo(start).path());
            if (!chosen.isEmpty()) target->setText(chosen);
        });
    };
    browse_row(0, tr("Base model"), base_, tr("a GGUF file: the current model by default"), false);
    base_->setObjectName(QStringLiteral("quantBase"));

    grid->addWidget(new QLabel(tr("Types"), setup), 1, 0);
    auto* types = new QWidget(setup);
    auto* type_row = new QHBoxLayout(types);
    type_row->setContentsMargins(0, 0, 0, 0);
    int index = 0;
    for (const char* t : kTypes) {
        auto* box = new QCheckBox(QLatin1String(t), types);
        box->setChecked(index++ < kDefaultChecked);
        box->setToolTip(tr("%1 bits per weight").arg(bits_per_weight(QLatin1String(t)), 0, 'f', 2));
        type_row->addWidget(box);
        type_boxes_ << box;
    }
    type_row->addStretch(1);
    grid->addWidget(types, 1, 1, 1, 2);

    calibrate_ = new QCheckBox(tr("Also calibrated"), setup);
    calibrate_->setToolTip(
        tr("Adds a version of each type below 8 bits quantized with an importance matrix "
           "computed on the calibration text"));
    calibrate_->setChecked(true);
    grid->addWidget(calibrate_, 2, 0);
    calibration_file_ = new QLineEdit(setup);
    calibration_file_->setPlaceholderText(
        tr("calibration text: the built-in English sample, first half"));
    calibration_file_->setClearButtonEnabled(true);
    grid->addWidget(calibration_file_, 2, 1);
    auto* calibration_browse = new QPushButton(tr("Browse…"), setup);
    grid->addWidget(calibration_browse, 2, 2);
    connect(calibration_browse, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(
            this, tr("Calibration text"), QDir::homePath(), tr("Text (*.txt);;All files (*)"));
        if (!f.isEmpty()) calibration_file_->setText(f);
    });
    connect(calibrate_, &QCheckBox::toggled, calibration_file_, &QWidget::setEnabled);

    browse_row(3, tr("Measure on"), eval_file_,
               tr("evaluation text: the built-in English sample, second half"), false);
    browse_row(4, tr("Save to"), out_dir_, QString(), true);
    out_dir_->setText(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                      QStringLiteral("/quantized"));
    grid->setColumnStretch(1, 1);
    column->addWidget(setup);

    auto* controls = new QHBoxLayout;
    run_ = new QPushButton(tr("&Quantize and measure"), left);
    run_->setDefault(true);
    cancel_ = new QPushButton(tr("Cancel"), left);
    cancel_->setEnabled(false);
    progress_ = new QProgressBar(left);
    progress_->setRange(0, 100);
    progress_->setValue(0);
    controls->addWidget(run_);
    controls->addWidget(cancel_);
    controls->addWidget(progress_, 1);
    column->addLayout(controls);
    status_ = new QLabel(tr("Choose the types, then Quantize and measure."), left);
    status_->setObjectName(QStringLiteral("quantStatus"));
    status_->setWordWrap(true);
    column->addWidget(status_);

    table_ = new QTableWidget(0, Count, left);
    table_->setObjectName(QStringLiteral("quantTable"));
    table_->setHorizontalHeaderLabels({tr("Type"), tr("Size"), tr("Bits/w"), tr("Perplexity"),
                                       tr("Δ ppl"), tr("KL mean"), tr("KL p99"), tr("Top-1"),
                                       tr("tok/s")});
    table_->horizontalHeaderItem(Bits)->setToolTip(tr("Bits per weight, all tensors"));
    table_->horizontalHeaderItem(DeltaPerplexity)->setToolTip(tr("Perplexity minus the base's"));
    table_->horizontalHeaderItem(DecodeSpeed)
        ->setToolTip(tr("Greedy decode speed, tokens per second"));
    table_->horizontalHeaderItem(KlMean)->setToolTip(
        tr("Mean KL divergence of the next-token distribution from the base's, in nats"));
    table_->horizontalHeaderItem(Top1)->setToolTip(
        tr("How often the most likely next token is the base's"));
    table_->verticalHeader()->hide();
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setStretchLastSection(true);
    column->addWidget(table_, 1);
    auto* bottom = new QHBoxLayout;
    open_ = new QPushButton(tr("&Open as current model"), left);
    open_->setEnabled(false);
    open_->setToolTip(tr("Load the selected row's file in the chat"));
    bottom->addWidget(open_);
    bottom->addStretch(1);
    auto* close = new QPushButton(tr("Close"), left);
    bottom->addWidget(close);
    column->addLayout(bottom);

    // The plot and the explanation share the right-hand side as tabs: the explanation first,
    // the plot once a run starts.
    tabs_ = new QTabWidget(split);
    auto* plot = new PlotLabel(tabs_);
    plot->setObjectName(QStringLiteral("quantPlot"));
    plot->setAlignment(Qt::AlignCenter);
    plot->setMinimumSize(200, 120);
    plot->setText(tr("KL divergence against file size appears here as rows are measured."));
    plot->setWordWrap(true);
    plot_ = plot;
    explanation_ = new QTextBrowser(tabs_);
    explanation_->setObjectName(QStringLiteral("quantExplanation"));
    explanation_->setOpenExternalLinks(false);
    explanation_->setHtml(quantization_explanation({}, 0));
    tabs_->addTab(explanation_, tr("How it works"));
    tabs_->addTab(plot_, tr("Plot"));
    split->addWidget(left);
    split->addWidget(tabs_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({620, 440});

    connect(run_, &QPushButton::clicked, this, &QuantLabWindow::start);
    connect(cancel_, &QPushButton::clicked, this, &QuantLabWindow::cancel);
    connect(close, &QPushButton::clicked, this, &QDialog::close);
    connect(table_, &QTableWidget::itemSelectionChanged, this, &QuantLabWindow::update_open_button);
    connect(open_, &QPushButton::clicked, this, [this] {
        const int row = table_->currentRow();
        if (row < 0 || !table_->item(row, Type)) return;
        const QString path = table_->item(row, Type)->data(Qt::UserRole).toString();
        if (!path.isEmpty()) emit openModelRequested(path);
    });

    // Fits the screen it opens on: 1100 x 680 where there is room (a 1280 x 720 screen keeps a
    // margin for the panel and the title bar).
    const QRect avail =
        parent() ? parentWidget()->screen()->availableGeometry() : QRect(0, 0, 1280, 720);
    resize(std::min(1100, avail.width() - 40), std::min(680, avail.height() - 40));
}

void QuantLabWindow::setModel(const ui::ModelInfoData& info, qint64 context_tokens) {
    model_ = info;
    context_tokens_ = context_tokens;
    if (!info.remote && base_->text().isEmpty()) base_->setText(info.path);
    explanation_->setHtml(
        quantization_explanation(info.remote ? ui::ModelInfoData{} : info, context_tokens));
}

QImage QuantLabWindow::plot() const {
    return static_cast<const PlotLabel*>(plot_)->image();
}

QString QuantLabWindow::explanationHtml() const {
    return explanation_->toHtml();
}

void QuantLabWindow::setBase(const QString& path) {
    base_->setText(path);
}

void QuantLabWindow::setTypes(const QStringList& types) {
    for (QCheckBox* box : type_boxes_) box->setChecked(types.contains(box->text()));
}

void QuantLabWindow::setCalibrate(bool on) {
    calibrate_->setChecked(on);
}

void QuantLabWindow::setOutputDirectory(const QString& dir) {
    out_dir_->setText(dir);
}

QString QuantLabWindow::text_of(const QLineEdit* edit, bool calibration) const {
    if (edit->text().trimmed().isEmpty())
        return calibration ? builtinCalibrationText() : builtinEvaluationText();
    QFile f(edit->text().trimmed());
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QString::fromUtf8(f.readAll());
}

QuantLabRequest QuantLabWindow::request() const {
    QuantLabRequest r;
    r.base = base_->text().trimmed();
    for (QCheckBox* box : type_boxes_) {
        if (box->isChecked()) r.types << box->text();
    }
    r.calibrate = calibrate_->isChecked();
    r.calibration_source = calibration_file_->text().trimmed().isEmpty()
                               ? QStringLiteral("built-in English sample, first half")
                               : calibration_file_->text().trimmed();
    r.calibration_text = r.calibrate ? text_of(calibration_file_, true) : QString();
    r.eval_text = text_of(eval_file_, false);
    r.out_dir = out_dir_->text().trimmed();
    // One core stays with the window (as the chat's default does).
    r.threads = std::max(1, QThread::idealThreadCount() - 1);
    return r;
}

void QuantLabWindow::start() {
    if (running_) return;
    const QuantLabRequest r = request();
    QString problem;
    if (r.base.isEmpty() || !QFileInfo(r.base).isFile())
        problem = tr("Choose a base model file (%1 is not one).").arg(r.base);
    else if (r.types.isEmpty())
        problem = tr("Choose at least one type.");
    else if (r.eval_text.trimmed().isEmpty())
        problem = tr("The evaluation text %1 cannot be read or is empty.").arg(eval_file_->text());
    else if (r.calibrate && r.calibration_text.trimmed().isEmpty())
        problem = tr("The calibration text %1 cannot be read or is empty.")
                      .arg(calibration_file_->text());
    else if (r.out_dir.isEmpty())
        problem = tr("Choose where to save the files.");
    if (!problem.isEmpty()) {
        status_->setText(problem);
        return;
    }
    table_->setRowCount(0);
    plot_data_ = {};
    static_cast<PlotLabel*>(plot_)->clearResult();
    tabs_->setCurrentWidget(plot_);
    set_running(true);
    job_->arm();
    QMetaObject::invokeMethod(job_, "run", Qt::QueuedConnection,
                              Q_ARG(tokenscope::app::QuantLabRequest, r));
}

void QuantLabWindow::cancel() {
    if (!running_) return;
    job_->cancel();
    status_->setText(tr("Cancelling…"));
}

void QuantLabWindow::closeEvent(QCloseEvent* event) {
    cancel();  // a closed window has nobody to show the rows to
    QDialog::closeEvent(event);
}

void QuantLabWindow::set_running(bool running) {
    running_ = running;
    run_->setEnabled(!running);
    cancel_->setEnabled(running);
    if (running) progress_->setValue(0);
    update_open_button();
}

void QuantLabWindow::fill_row(int row, const QuantLabRow& d, bool measured) {
    if (row >= table_->rowCount()) table_->setRowCount(row + 1);
    if (!table_->item(row, Type)) table_->setItem(row, Type, cell(d.label, false));
    QTableWidgetItem* type = table_->item(row, Type);
    const quant::ModelEval& e = d.eval;
    const QString path = QString::fromStdString(e.path);
    type->setData(Qt::UserRole, path);
    type->setToolTip(path);
    table_->setItem(row, Size, cell(mb(static_cast<qint64>(e.file_bytes))));
    if (measured) {
        const QLocale l;
        table_->setItem(row, Bits, cell(l.toString(e.bits_per_weight, 'f', 2)));
        table_->setItem(row, Perplexity, cell(l.toString(e.perplexity, 'f', 3)));
        table_->setItem(row, DeltaPerplexity,
                        cell(row == 0 ? QStringLiteral("—")
                                      : (e.delta_perplexity >= 0 ? "+" : "") +
                                            l.toString(e.delta_perplexity, 'f', 3)));
        table_->setItem(row, KlMean,
                        cell(row == 0 ? QStringLiteral("—") : l.toString(e.kl_mean, 'f', 4)));
        table_->setItem(row, KlP99,
                        cell(row == 0 ? QStringLiteral("—") : l.toString(e.kl_p99, 'f', 4)));
        table_->setItem(row, Top1, cell(l.toString(100.0 * e.top1_agreement, 'f', 1) + " %"));
        table_->setItem(
            row, DecodeSpeed,
            cell(e.decode_tokens_per_second > 0 ? l.toString(e.decode_tokens_per_second, 'f', 1)
                                                : QStringLiteral("—")));
    } else {
        table_->setItem(row, Bits, cell(tr("measuring…")));
    }
    update_open_button();
}

void QuantLabWindow::update_open_button() {
    const int row = table_->currentRow();
    const QTableWidgetItem* item = row >= 0 ? table_->item(row, Type) : nullptr;
    open_->setEnabled(item && QFileInfo(item->data(Qt::UserRole).toString()).isFile());
}

}  // namespace tokenscope::app
