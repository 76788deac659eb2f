#include "step_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

#include "distribution_chart.h"
#include "export_actions.h"
#include "head_grid.h"
#include "number_format.h"

namespace tokenscope::ui {

namespace {

// Token text as a chip: whitespace made visible, HTML escaped.
QString chip(const QString& text) {
    QString t = text;
    t.replace(QLatin1Char('\n'), QStringLiteral("↵"));
    t.replace(QLatin1Char(' '), QStringLiteral("·"));
    if (t.isEmpty()) t = QStringLiteral("∅");
    return QStringLiteral("<span style=\"background:#dfe8f5; color:#10243e\">&nbsp;%1&nbsp;</span>")
        .arg(t.toHtmlEscaped());
}

// 1.2 GFLOP, 340 MFLOP ...
QString flops_text(double flops) {
    const char* units[] = {"", "k", "M", "G", "T"};
    int u = 0;
    while (flops >= 1000.0 && u < 4) {
        flops /= 1000.0;
        ++u;
    }
    return QStringLiteral("%1 %2FLOP")
        .arg(flops, 0, 'f', flops < 10 ? 2 : 1)
        .arg(QLatin1String(units[u]));
}

QLabel* section(const QString& text, QWidget* parent) {
    auto* l = new QLabel(text, parent);
    QFont f = l->font();
    f.setBold(true);
    l->setFont(f);
    return l;
}

}  // namespace

StepView::StepView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(3);

    auto* bar = new QHBoxLayout;
    back_button_ = new QToolButton(this);
    back_button_->setText(tr("◀ Back"));
    back_button_->setToolTip(tr("The previous step taken"));
    step_button_ = new QToolButton(this);
    step_button_->setObjectName("stepButton");
    step_button_->setText(tr("Step ▶▶"));
    step_button_->setToolTip(
        tr("Generate exactly one token and pause (F10). With no reply "
           "running, sends the message in the input box first."));
    forward_button_ = new QToolButton(this);
    forward_button_->setText(tr("Forward ▶"));
    forward_button_->setToolTip(tr("The next step taken"));
    position_ = new QLabel(this);
    layer_box_ = new QSpinBox(this);
    layer_box_->setPrefix(tr("layer "));
    layer_box_->setToolTip(tr("The layer whose heads the attention row shows"));
    bar->addWidget(back_button_);
    bar->addWidget(step_button_);
    bar->addWidget(forward_button_);
    bar->addWidget(position_, 1);
    bar->addWidget(layer_box_);
    layout->addLayout(bar);

    title_ = new QLabel(this);
    title_->setWordWrap(true);
    layout->addWidget(title_);
    layout->addWidget(section(tr("① Input token(s)"), this));
    input_ = new QLabel(this);
    input_->setWordWrap(true);
    input_->setTextFormat(Qt::RichText);
    layout->addWidget(input_);
    attention_title_ = section(tr("② Attention, every head"), this);
    layout->addWidget(attention_title_);
    grid_ = new HeadGrid(this);
    grid_->setMinimumHeight(90);
    layout->addWidget(grid_, 3);
    layout->addWidget(
        section(tr("③ Next-token candidates: before → after sampling settings"), this));
    chart_ = new DistributionChart(this);
    chart_->setMinimumHeight(160);
    layout->addWidget(chart_, 2);
    sampled_ = new QLabel(this);
    sampled_->setTextFormat(Qt::RichText);
    sampled_->setWordWrap(true);
    layout->addWidget(sampled_);
    cost_ = new QLabel(this);
    cost_->setWordWrap(true);
    cost_->setToolTip(
        tr("From the model's numbers, not measured: FLOPs = 2 × layer weights × input tokens + "
           "the output projection for the sampled position + attention (4 × head size × keys "
           "per query, every head and layer). Bytes: every weight is read once per step, "
           "however many tokens go through; attention reads the KV cache of every earlier "
           "token. Prefill is compute-bound (many tokens per weight read); a decode step is "
           "memory-bound (one token per weight read)."));
    layout->addWidget(cost_);

    connect(step_button_, &QToolButton::clicked, this, &StepView::stepRequested);
    connect(back_button_, &QToolButton::clicked, this, &StepView::back);
    connect(forward_button_, &QToolButton::clicked, this, &StepView::forward);
    connect(layer_box_, &QSpinBox::valueChanged, this, [this](int layer) {
        const StepData* s = shownStep();
        if (!s) return;
        emit attentionRequested(layer, s->attention.first_query, std::max(1, s->attention.rows()));
    });
    installExportMenu(chart_, [this] {
        ExportSource s;
        s.base_name = QStringLiteral("step%1-candidates").arg(current_ + 1);
        const auto c = chart_->candidates();
        const auto b = chart_->rawProbabilities();
        const auto a = chart_->shapedProbabilities();
        s.svg = [c, b, a] { return distributionSvg(c, b, a); };
        s.csv = [c, b, a] { return distributionCsv(c, b, a); };
        s.json = [c, b, a] { return distributionJson(c, b, a); };
        return s;
    });
    refresh();
}

void StepView::setModelShape(int layers, int heads) {
    heads_ = heads;
    const QSignalBlocker block(layer_box_);
    layer_box_->setRange(0, std::max(0, layers - 1));
}

const StepData* StepView::shownStep() const {
    return current_ >= 0 && current_ < steps_.size() ? &steps_[current_] : nullptr;
}

int StepView::layer() const {
    return layer_box_->value();
}

void StepView::addStep(const StepData& step) {
    steps_.push_back(step);
    showStep(int(steps_.size()) - 1);
}

void StepView::setStepAttention(const HeadGridData& grid) {
    if (current_ < 0) return;
    StepData& s = steps_[current_];
    if (grid.first_query != s.attention.first_query && grid.rows() > 0) return;  // another step's
    s.attention = grid;
    refresh();
}

void StepView::showStep(int index) {
    if (index < 0 || index >= steps_.size()) return;
    current_ = index;
    refresh();
    // A stored step taken with another layer: ask for this layer's rows.
    if (steps_[index].attention.layer != layer_box_->value())
        emit attentionRequested(layer_box_->value(), steps_[index].attention.first_query,
                                std::max(1, steps_[index].attention.rows()));
}

void StepView::back() {
    showStep(current_ - 1);
}

void StepView::forward() {
    showStep(current_ + 1);
}

void StepView::clear() {
    steps_.clear();
    current_ = -1;
    refresh();
}

void StepView::setStepEnabled(bool enabled) {
    step_button_->setEnabled(enabled);
}

void StepView::fitGridHeight() {
    // A decode step's rows are thin strips: as tall as they need, leaving the room to the
    // candidates; a prefill block gets square panels and the spare height.
    const StepData* s = shownStep();
    if (s && s->attention.rows() <= 1) {
        grid_->setFixedHeight(grid_->stripGridHeight(int(s->attention.heads.size())));
    } else {
        grid_->setMinimumHeight(s ? 220 : 90);
        grid_->setMaximumHeight(QWIDGETSIZE_MAX);
    }
}

void StepView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    fitGridHeight();
}

QString StepView::titleText() const {
    return title_->text();
}
QString StepView::inputText() const {
    return input_->text();
}
QString StepView::sampledText() const {
    return sampled_->text();
}
QString StepView::costText() const {
    return cost_->text();
}

void StepView::refresh() {
    back_button_->setEnabled(current_ > 0);
    forward_button_->setEnabled(current_ >= 0 && current_ + 1 < steps_.size());
    const StepData* s = shownStep();
    if (!s) {
        position_->setText(tr("no steps yet"));
        title_->setText(
            tr("Type a message and press Step (F10): the model computes one token "
               "and waits, so you can see how it chose it."));
        input_->clear();
        grid_->clear();
        chart_->clear();
        sampled_->clear();
        cost_->clear();
        return;
    }
    position_->setText(tr("step %1 of %2").arg(current_ + 1).arg(steps_.size()));
    const int n = int(s->inputs.size());
    const qint64 first = s->attention.first_query;
    if (s->prefill) {
        title_->setText(tr("Prefill: the %1 prompt tokens go through the model at once; every "
                           "token attends to itself and the tokens before it (a %1 × %1 "
                           "triangle), and the last one's output gives the first new token.")
                            .arg(n));
    } else {
        title_->setText(tr("Decode: one token (position %1) goes through the model; its "
                           "attention row covers all %2 tokens so far, read from the KV cache.")
                            .arg(s->kv_position)
                            .arg(s->kv_position + 1));
    }
    QString chips;
    constexpr int kMaxChips = 60;
    for (int i = std::max(0, n - kMaxChips); i < n; ++i)
        chips += chip(s->inputs[i]) + QLatin1Char(' ');
    if (n > kMaxChips) chips = tr("(%1 earlier tokens) ").arg(n - kMaxChips) + chips;
    input_->setText(chips);
    const int rows = s->attention.rows();
    attention_title_->setText(
        rows <= 1 ? tr("② Attention of layer %1: the new token's row over %2 keys, every head")
                        .arg(s->attention.layer)
                        .arg(s->attention.keys())
                  : tr("② Attention of layer %1: %2 × %3 block, every head%4")
                        .arg(s->attention.layer)
                        .arg(rows)
                        .arg(s->attention.keys())
                        .arg(first > 0 && s->prefill ? tr(" (newest rows)") : QString()));
    grid_->setData(s->attention);
    fitGridHeight();
    chart_->setSettings(s->settings);
    chart_->setLastStep(s->token.before);
    sampled_->setText(tr("④ Sampled: %1 with probability %2 (%3 before the settings)")
                          .arg(chip(s->token.text))
                          .arg(double(s->token.probability), 0, 'f', 3)
                          .arg(std::exp(double(s->token.logprob)), 0, 'f', 3));
    cost_->setText(tr("Cost ≈ %1 (attention %2) · weights read %3 · KV cache read %4, written %5 "
                      "(slot %6, block %7) · took %8 ms")
                       .arg(flops_text(s->flops), flops_text(s->attention_flops),
                            format_bytes(s->weight_bytes), format_bytes(s->kv_read_bytes),
                            format_bytes(s->kv_write_bytes))
                       .arg(s->kv_position)
                       .arg(s->kv_position / std::max(1, s->kv_block_size))
                       .arg(s->step_ms, 0, 'f', 1));
}

}  // namespace tokenscope::ui
