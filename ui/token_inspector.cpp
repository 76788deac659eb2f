#include "token_inspector.h"

#include <QFontDatabase>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QTextDocumentFragment>
#include <QVBoxLayout>
#include <cmath>

#include "message_document.h"

namespace tokenscope::ui {

namespace {

constexpr int kProbabilityRole = Qt::UserRole + 1;

// Paints a probability cell as a bar (palette highlight, translucent so the text stays readable
// on light and dark palettes) with the percentage on top.
class ProbabilityBarDelegate : public QStyledItemDelegate {
  public:
    using QStyledItemDelegate::QStyledItemDelegate;

    void paint(QPainter* painter, const QStyleOptionViewItem& option,
               const QModelIndex& index) const override {
        QStyleOptionViewItem opt(option);
        initStyleOption(&opt, index);
        const QString text = opt.text;
        opt.text.clear();
        const QWidget* w = opt.widget;
        QStyle* style = w ? w->style() : nullptr;
        if (style) style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, w);
        const double p = std::clamp(index.data(kProbabilityRole).toDouble(), 0.0, 1.0);
        const QRectF area = QRectF(opt.rect).adjusted(3, 3, -3, -3);
        QColor bar = opt.palette.color(QPalette::Highlight);
        bar.setAlphaF(0.45f);
        painter->save();
        painter->setRenderHint(QPainter::Antialiasing);
        painter->setPen(Qt::NoPen);
        painter->setBrush(bar);
        painter->drawRoundedRect(
            QRectF(area.left(), area.top(), std::max(1.5, area.width() * p), area.height()), 2, 2);
        painter->setPen(opt.palette.color(
            (opt.state & QStyle::State_Selected) ? QPalette::HighlightedText : QPalette::Text));
        painter->setFont(opt.font);
        painter->drawText(area.adjusted(4, 0, -4, 0), Qt::AlignRight | Qt::AlignVCenter, text);
        painter->restore();
    }
};

QTableWidget* makeTable(QWidget* parent, const QString& name) {
    auto* table = new QTableWidget(0, 4, parent);
    table->setObjectName(name);
    table->setHorizontalHeaderLabels({QStringLiteral("#"), QObject::tr("Token"),
                                      QObject::tr("Probability"), QObject::tr("Logit")});
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    table->setSelectionMode(QAbstractItemView::SingleSelection);
    table->setShowGrid(false);
    table->setWordWrap(false);
    table->setItemDelegateForColumn(2, new ProbabilityBarDelegate(table));
    auto* header = table->horizontalHeader();
    header->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    header->setSectionResizeMode(1, QHeaderView::Stretch);
    header->setSectionResizeMode(2, QHeaderView::Stretch);
    header->setSectionResizeMode(3, QHeaderView::ResizeToContents);
    header->setHighlightSections(false);
    table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
    table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    table->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Tall enough for all ten rows: the point is to compare them at a glance.
    table->setMinimumHeight(header->sizeHint().height() +
                            TokenInspector::kRows * table->verticalHeader()->defaultSectionSize() +
                            2 * table->frameWidth());
    return table;
}

QLabel* heading(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    QFont f = label->font();
    f.setBold(true);
    label->setFont(f);
    return label;
}

// A name as a heading: first letter upper-case, the rest as everywhere else.
QString capitalized(QString text) {
    if (!text.isEmpty()) text[0] = text[0].toUpper();
    return text;
}

QString escaped(const QString& piece) {
    return visiblePiece(piece).toHtmlEscaped();
}

QString percent(float p) {
    return formatProbability(p).toHtmlEscaped();
}

// The speculation section: where the token came from and what its verification step did.
QString speculationHtml(const TokenData& t) {
    const SpeculationStepData* step = t.speculation.get();
    if (!step && t.origin == TokenOrigin::Plain) return {};
    QString origin;
    switch (t.origin) {
        case TokenOrigin::Accepted:
            origin = QObject::tr("<b>Accepted guess</b>: the model agreed with the proposal");
            break;
        case TokenOrigin::Corrected:
            origin = QObject::tr("<b>The model's correction</b>: it rejected the proposal here");
            break;
        case TokenOrigin::Bonus:
            origin = QObject::tr(
                "<b>Bonus token</b>: every proposal was accepted; the model's "
                "own next token from the same pass");
            break;
        case TokenOrigin::Plain:
            origin = QObject::tr("<b>Plain step</b>");
            break;
    }
    // A saved reply keeps where each token came from, not its step's proposals.
    if (!step)
        return origin + QStringLiteral("<br>") +
               QObject::tr("(The verification step's details are not kept with saved replies.)");
    QString html = origin + QStringLiteral("<br>");
    html += QObject::tr("Its verification pass (%1 ms) produced %2 tokens.")
                .arg(step->step_ms, 0, 'f', 1)
                .arg(step->tokens);
    // The proposals in order: accepted ones in the accepted-guess colour, the rejected one
    // struck through, the ones after it (never judged) faint.
    QStringList pieces;
    for (int i = 0; i < step->proposed.size(); ++i) {
        const QString piece = QStringLiteral("“%1”").arg(escaped(step->proposed[i].piece));
        if (i < step->accepted)
            pieces << QStringLiteral("<span style=\"color:%1\">%2</span>")
                          .arg(MessageDocument::acceptedGuessColor().name(), piece);
        else if (i == step->accepted && step->rejected.id >= 0)
            pieces << QStringLiteral("<s>%1</s>").arg(piece);
        else
            pieces << QStringLiteral("<span style=\"color:gray\">%1</span>").arg(piece);
    }
    html += QStringLiteral("<br>") +
            QObject::tr("Proposed (k = %1): %2").arg(step->k).arg(pieces.join(QChar(' ')));
    html += QStringLiteral("<br>") +
            QObject::tr("Accepted: %1 of %2").arg(step->accepted).arg(step->proposed.size());
    if (step->rejected.id >= 0) {
        html += QStringLiteral("<br>") +
                QObject::tr(
                    "The model disagreed at “%1” (p %2 under the model, q %3 under the "
                    "proposer) and chose “%4” (p %5).")
                    .arg(escaped(step->rejected.piece), percent(step->rejected.probability),
                         percent(step->rejected_q), escaped(step->target.piece),
                         percent(step->target.probability));
    }
    return html;
}

}  // namespace

TokenInspector::TokenInspector(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(4);

    piece_ = new QLabel(this);
    piece_->setObjectName(QStringLiteral("tokenPiece"));
    QFont big = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    big.setPointSizeF(font().pointSizeF() * 1.6);
    piece_->setFont(big);
    piece_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    summary_ = new QLabel(this);
    summary_->setObjectName(QStringLiteral("tokenSummary"));
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(piece_);
    layout->addWidget(summary_);
    speculation_ = new QLabel(this);
    speculation_->setObjectName(QStringLiteral("tokenSpeculation"));
    speculation_->setWordWrap(true);
    speculation_->setTextFormat(Qt::RichText);
    speculation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    speculation_->setToolTip(
        tr("Speculative decoding: proposals are checked in one pass of the model. p: the "
           "probability the model gives a token; q: the proposer's (1 for prompt lookup). A "
           "proposal is accepted with probability min(1, p/q), which keeps the text exactly "
           "what the model alone would write."));
    layout->addWidget(speculation_);
    summary_->setToolTip(tr("p: the token's probability %1, the distribution it was drawn "
                            "from. logprob: the natural log of its probability %2.")
                             .arg(afterSettingsName(), beforeSettingsName()));
    explanation_ = new QLabel(settingsDistributionsExplanation(), this);
    explanation_->setObjectName(QStringLiteral("distributionsExplanation"));
    explanation_->setWordWrap(true);
    explanation_->setForegroundRole(QPalette::PlaceholderText);
    layout->addWidget(explanation_);
    layout->addSpacing(6);

    before_ = makeTable(this, QStringLiteral("beforeTable"));
    after_ = makeTable(this, QStringLiteral("afterTable"));
    before_label_ = heading(capitalized(beforeSettingsName()), this);
    before_label_->setToolTip(tr("Top-10 of softmax(raw logits)"));
    after_label_ = heading(capitalized(afterSettingsName()), this);
    after_label_->setToolTip(
        tr("Top-10 after repetition penalty, top-k, top-p, min-p and "
           "temperature: what the token was drawn from"));
    layout->addWidget(before_label_);
    layout->addWidget(before_);
    layout->addSpacing(4);
    layout->addWidget(after_label_);
    layout->addWidget(after_);
    layout->addStretch(1);
    clear();
}

QSize TokenInspector::sizeHint() const {
    return {340, QWidget::sizeHint().height()};
}

QString TokenInspector::summaryText() const {
    return summary_->text();
}

QString TokenInspector::speculationText() const {
    return speculation_->isHidden()
               ? QString()
               : QTextDocumentFragment::fromHtml(speculation_->text()).toPlainText();
}

void TokenInspector::clear() {
    token_ = TokenData{};
    has_token_ = false;
    piece_->setText(tr("—"));
    summary_->setText(tr("Click a generated token in the chat to inspect it."));
    before_->setRowCount(0);
    after_->setRowCount(0);
    speculation_->clear();
    speculation_->hide();
}

void TokenInspector::setToken(const TokenData& token) {
    token_ = token;
    has_token_ = true;
    piece_->setText(QStringLiteral("“%1”").arg(visiblePiece(token.text)));
    QString summary = tr("id %1 · p %2 · logprob %3")
                          .arg(token.id)
                          .arg(formatProbability(token.probability))
                          .arg(QString::number(token.logprob, 'f', 3));
    if (token.step_ms > 0) summary += tr(" · %1 ms").arg(token.step_ms, 0, 'f', 1);
    summary_->setText(summary);
    const QString speculation = speculationHtml(token);
    speculation_->setText(speculation);
    speculation_->setVisible(!speculation.isEmpty());
    fillTable(before_, token.before);
    fillTable(after_, token.after);
    // A remote server's alternatives are not the local sampler's two distributions: say where
    // they came from, and that there is no "after" list unless the server sent one.
    if (token.source.isEmpty()) {
        before_label_->setText(capitalized(beforeSettingsName()));
        after_label_->setText(capitalized(afterSettingsName()));
    } else {
        before_label_->setText(tr("Alternatives from %1").arg(token.source));
        after_label_->setText(token.after.isEmpty()
                                  ? tr("After sampling settings: not exposed by this server")
                                  : capitalized(afterSettingsName()) + tr(" (from the server)"));
    }
}

void TokenInspector::fillTable(QTableWidget* table, const QVector<CandidateData>& list) {
    const int rows = int(std::min<qsizetype>(kRows, list.size()));
    table->setRowCount(rows);
    const QFont code = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    QColor chosen_bg = palette().color(QPalette::Highlight);
    chosen_bg.setAlphaF(0.15f);
    for (int r = 0; r < rows; ++r) {
        const CandidateData& c = list[r];
        const bool chosen = c.id == token_.id;
        auto* rank = new QTableWidgetItem(QString::number(r + 1));
        rank->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        auto* piece = new QTableWidgetItem(visiblePiece(c.piece));
        piece->setFont(code);
        piece->setToolTip(c.id >= 0 ? tr("id %1").arg(c.id) : tr("the server gave no token id"));
        auto* prob = new QTableWidgetItem(formatProbability(c.probability));
        prob->setData(kProbabilityRole, double(c.probability));
        // NaN: a server's top_logprobs carry no logits.
        auto* logit = new QTableWidgetItem(std::isnan(c.logit) ? QStringLiteral("—")
                                                               : QString::number(c.logit, 'f', 2));
        logit->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        QTableWidgetItem* items[] = {rank, piece, prob, logit};
        for (int col = 0; col < 4; ++col) {
            if (chosen) {
                QFont f = items[col]->font();
                if (col == 1) f = code;
                f.setBold(true);
                items[col]->setFont(f);
                items[col]->setBackground(chosen_bg);
            }
            table->setItem(r, col, items[col]);
        }
    }
    // No focus frame on row 1 before the user moves into the table.
    table->setCurrentItem(nullptr);
}

}  // namespace tokenscope::ui
