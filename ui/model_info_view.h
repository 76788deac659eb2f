#pragma once
// What is loaded: architecture, size, tensor types, shape, tokenizer, chat template, backend
// and memory, as a read-only form whose values can be selected and copied.
#include <QHash>
#include <QWidget>

#include "panel_data.h"

class QFormLayout;
class QLabel;

namespace tokenscope::ui {

class ModelInfoView : public QWidget {
    Q_OBJECT
  public:
    explicit ModelInfoView(QWidget* parent = nullptr);

    const ModelInfoData& data() const { return data_; }
    // Keys: name, path, architecture, parameters, tensor_types, context_length, layers, heads,
    // embedding_length, vocab_size, tokenizer, chat_template, backend, memory.
    QString fieldText(const QString& key) const;
    QStringList fieldKeys() const { return keys_; }

    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::ModelInfoData& data);

  private:
    void addField(const QString& key, const QString& caption, const QString& tip = {});
    void setField(const QString& key, const QString& text);

    ModelInfoData data_;
    QFormLayout* form_ = nullptr;
    QStringList keys_;
    QHash<QString, QLabel*> values_;
};

}  // namespace tokenscope::ui
