#include "model_info_view.h"
#include "number_format.h"

#include <QFormLayout>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>
#include <array>

namespace tokenscope::ui {

namespace {

const QString kNone = QStringLiteral("—");

// "268 M (268 098 176)": the short form is how models are named, the exact count is for
// checking against other tools.
QString format_parameters(qint64 n) {
    if (n <= 0) return kNone;
    QString short_form;
    if (n >= 1'000'000'000) {
        short_form = QStringLiteral("%1 B").arg(double(n) / 1e9, 0, 'f', 2);
    } else if (n >= 1'000'000) {
        short_form = QStringLiteral("%1 M").arg(double(n) / 1e6, 0, 'f', 0);
    } else {
        return group_digits(n);
    }
    return short_form + QStringLiteral(" (") + group_digits(n) + QLatin1Char(')');
}

QString count_or_none(qint64 n) {
    return n > 0 ? group_digits(n) : kNone;
}

QString or_none(const QString& s) {
    return s.isEmpty() ? kNone : s;
}

}  // namespace

ModelInfoView::ModelInfoView(QWidget* parent) : QWidget(parent) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* scroll = new QScrollArea(this);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    auto* page = new QWidget(scroll);
    form_ = new QFormLayout(page);
    form_->setContentsMargins(8, 8, 8, 8);
    form_->setRowWrapPolicy(QFormLayout::WrapLongRows);
    form_->setLabelAlignment(Qt::AlignRight | Qt::AlignTop);
    // QLabel is Preferred horizontally: only AllNonFixedFieldsGrow gives wrapped values the width.
    form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    scroll->setWidget(page);
    outer->addWidget(scroll);

    addField(QStringLiteral("name"), tr("Model"));
    addField(QStringLiteral("architecture"), tr("Architecture"));
    addField(QStringLiteral("parameters"), tr("Parameters"));
    addField(QStringLiteral("tensor_types"), tr("Tensor types"),
             tr("Storage formats of the weight tensors; quantized formats are dequantized "
                "inside the matrix kernels"));
    addField(QStringLiteral("context_length"), tr("Context length"),
             tr("The longest sequence the model was trained for, in tokens"));
    addField(QStringLiteral("layers"), tr("Layers"));
    addField(QStringLiteral("heads"), tr("Attention heads"),
             tr("Query heads and key/value heads; fewer KV heads (grouped-query attention) "
                "shrink the KV cache"));
    addField(QStringLiteral("embedding_length"), tr("Embedding length"));
    addField(QStringLiteral("vocab_size"), tr("Vocabulary"));
    addField(QStringLiteral("tokenizer"), tr("Tokenizer"));
    addField(QStringLiteral("chat_template"), tr("Chat template"));
    addField(QStringLiteral("backend"), tr("Backend"));
    addField(QStringLiteral("memory"), tr("Weights in memory"));
    addField(QStringLiteral("path"), tr("File"));
    setData(ModelInfoData{});
}

QSize ModelInfoView::minimumSizeHint() const {
    return {240, 160};
}

void ModelInfoView::addField(const QString& key, const QString& caption, const QString& tip) {
    auto* value = new QLabel(kNone);
    value->setWordWrap(true);
    value->setTextFormat(Qt::PlainText);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    value->setToolTip(tip);
    auto* label = new QLabel(caption + QLatin1Char(':'));
    label->setForegroundRole(QPalette::PlaceholderText);
    label->setToolTip(tip);
    form_->addRow(label, value);
    keys_ << key;
    values_.insert(key, value);
}

void ModelInfoView::setField(const QString& key, const QString& text) {
    if (QLabel* label = values_.value(key)) label->setText(text);
}

QString ModelInfoView::fieldText(const QString& key) const {
    const QLabel* label = values_.value(key);
    return label ? label->text() : QString();
}

void ModelInfoView::setData(const ModelInfoData& data) {
    data_ = data;
    setField(QStringLiteral("name"), or_none(data.name));
    setField(QStringLiteral("path"), or_none(data.path));
    setField(QStringLiteral("architecture"), or_none(data.architecture));
    setField(QStringLiteral("parameters"), format_parameters(data.parameters));
    setField(QStringLiteral("tensor_types"),
             data.tensor_types.isEmpty() ? kNone : data.tensor_types.join(QLatin1Char('\n')));
    setField(
        QStringLiteral("context_length"),
        data.context_length > 0 ? tr("%1 tokens").arg(group_digits(data.context_length)) : kNone);
    setField(QStringLiteral("layers"), count_or_none(data.layers));
    QString heads = count_or_none(data.heads);
    if (data.heads > 0 && data.kv_heads > 0) {
        heads = tr("%1 query, %2 key/value").arg(data.heads).arg(data.kv_heads);
        if (data.kv_heads < data.heads && data.heads % data.kv_heads == 0) {
            heads += tr(" (grouped-query: %1 query heads share each KV head)")
                         .arg(data.heads / data.kv_heads);
        }
    }
    setField(QStringLiteral("heads"), heads);
    setField(QStringLiteral("embedding_length"), count_or_none(data.embedding_length));
    setField(QStringLiteral("vocab_size"),
             data.vocab_size > 0 ? tr("%1 tokens").arg(group_digits(data.vocab_size)) : kNone);
    setField(QStringLiteral("tokenizer"), or_none(data.tokenizer));
    setField(QStringLiteral("chat_template"), or_none(data.chat_template));
    setField(QStringLiteral("backend"), or_none(data.backend));
    setField(QStringLiteral("memory"),
             data.weight_bytes > 0 ? format_bytes(double(data.weight_bytes)) : kNone);
}

}  // namespace tokenscope::ui
