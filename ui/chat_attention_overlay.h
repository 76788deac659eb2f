#pragma once
// The chat's attention overlay: for the token under the mouse (or the text cursor), its
// attention weights over the earlier tokens, drawn on the transcript as background tints, for
// the layer and head chosen in the Attention panel (or their mean).
//
// Drawn as QTextEdit extra selections, not char formats: they sit over the document without
// touching it, so the probability tints, undo-free streaming and copy are unaffected, and
// moving the mouse costs one repaint, not a relayout.
//
// Tints: one hue, its alpha proportional to the weight divided by the largest weight on shown
// text (over a long context even the strongest weight is small, and much of it often sits on a
// template token, an "attention sink"; a student should still see where the head looks in the
// text); weights under 2 % of that, and beyond the 600 strongest, are not drawn. Attention to text
// the chat does not show (template markers, BOS, the system prompt) cannot be drawn on it, so the
// legend states its share.
#include <QColor>
#include <QList>
#include <QString>
#include <QTextEdit>
#include <QVector>

#include "attention_text_map.h"
#include "panel_data.h"

namespace tokenscope::ui {

class MessageDocument;

class ChatAttentionOverlay {
  public:
    struct View {
        int position = -1;  // the context position hovered; -1: none
        QList<QTextEdit::ExtraSelection> selections;
        QString legend;  // plain text
    };

    static constexpr float kMinRelativeWeight = 0.02f;
    static constexpr int kMaxTints = 600;

    void setData(const AttentionData& data);
    void clear();
    bool hasData() const { return !data_.rows.isEmpty(); }

    // The context position of the token at document position `doc_pos`; -1 when none (cheap:
    // the mouse asks on every move).
    int positionAt(const MessageDocument& doc, int doc_pos);
    // The overlay for position `q` (-1: none, the idle legend); `tint` is the hue of the key
    // tints, `focus` the background of the hovered token.
    View viewOf(const MessageDocument& doc, int q, const QColor& tint, const QColor& focus);
    // What the legend says while nothing is hovered.
    QString idleLegend() const;
    // The tint of a key whose weight is `relative` times the row's largest.
    static QColor tintFor(const QColor& hue, float relative);

  private:
    const AttentionTextMap& map(const MessageDocument& doc);
    QString where() const;  // "layer 3, mean of heads"

    AttentionData data_;
    AttentionTextMap map_;
    QVector<QString> mapped_texts_;
    bool map_valid_ = false;
};

}  // namespace tokenscope::ui
