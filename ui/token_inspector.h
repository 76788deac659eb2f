#pragma once
// Explains one generated token: its text (whitespace made visible), id, probability under the
// distribution it was drawn from, logprob under the model's own distribution, the step time,
// and two tables: the top-10 candidates before sampling settings (softmax of the raw logits) and
// after sampling settings (repetition penalty, top-k, top-p, min-p, temperature), each with a
// probability bar, under a one-line explanation of the two. The chosen token's row is
// highlighted in both. For a token from a speculative verification step, a section under the
// summary says where it came from (accepted guess, the model's correction, bonus token) and what
// the step proposed, how much the model accepted and where it disagreed, with both tokens'
// probabilities.
#include <QWidget>

#include "panel_data.h"

class QLabel;
class QTableWidget;

namespace tokenscope::ui {

class TokenInspector : public QWidget {
    Q_OBJECT
  public:
    static constexpr int kRows = 10;

    explicit TokenInspector(QWidget* parent = nullptr);

    const TokenData& token() const { return token_; }
    bool hasToken() const { return has_token_; }
    QTableWidget* beforeTable() const { return before_; }
    QTableWidget* afterTable() const { return after_; }
    // The summary line ("id 42 · p 45.2% · logprob -0.794 · 12.3 ms"), for tests.
    QString summaryText() const;
    // The speculation section as plain text ("" when the token is not from a verification).
    QString speculationText() const;
    QLabel* speculationLabel() const { return speculation_; }
    // The tables' headings and the line that explains them.
    QLabel* beforeHeading() const { return before_label_; }
    QLabel* afterHeading() const { return after_label_; }
    QLabel* explanationLabel() const { return explanation_; }

    QSize sizeHint() const override;

  public slots:
    void setToken(const tokenscope::ui::TokenData& token);
    void clear();

  private:
    void fillTable(QTableWidget* table, const QVector<CandidateData>& list);

    TokenData token_;
    bool has_token_ = false;
    QLabel* piece_ = nullptr;
    QLabel* summary_ = nullptr;
    QLabel* speculation_ = nullptr;
    QLabel* explanation_ = nullptr;
    QLabel* before_label_ = nullptr;
    QLabel* after_label_ = nullptr;
    QTableWidget* before_ = nullptr;
    QTableWidget* after_ = nullptr;
};

}  // namespace tokenscope::ui
