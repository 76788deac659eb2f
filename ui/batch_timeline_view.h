#pragma once
// The scheduler timeline of Tools › Batch demo: x = engine step, one row per request, each cell
// what the step did for it — a prefill chunk (with its token count), a decode token, a
// speculative verification chunk, waiting, or preempted (its KV cache given to an older
// request) — and above the rows the tokens each step computed against the token budget, drawn
// as a line. Plain Qt data; the app fills it from the engine's recorded schedule.
#include <QImage>
#include <QStringList>
#include <QVector>
#include <QWidget>

namespace tokenscope::ui {

struct BatchTimelineCell {
    enum Kind { Absent = 0, Prefill, Decode, Verify, Waiting, Preempted };
    int kind = Absent;  // Absent: not submitted yet, or finished
    int tokens = 0;
};

struct BatchTimelineData {
    QStringList rows;                           // one label per request
    QVector<QVector<BatchTimelineCell>> steps;  // steps[s][row]
    int budget = 0;                             // tokens per step
    bool empty() const { return steps.isEmpty(); }
    int scheduledTokens(int step) const;
    // CSV: step, request, kind, tokens (one line per non-absent cell).
    QString csv() const;
    // The same cells as JSON: {"budget", "requests": [labels], "steps": [[{"request", "kind",
    // "tokens"}, ...], ...]} (batch_timeline_export.cpp).
    QString json() const;
    // The timeline as an SVG picture for slides: one rectangle per cell in its kind's colour,
    // the request labels, the step axis and the tokens-per-step bars.
    QString svg() const;
};

// The cell colours, shared by the painting and the legend (and the tests).
QColor batchKindColor(int kind);
QString batchKindName(int kind);

class BatchTimelineView : public QWidget {
    Q_OBJECT
  public:
    explicit BatchTimelineView(QWidget* parent = nullptr);
    void setData(const BatchTimelineData& data);
    const BatchTimelineData& data() const { return data_; }
    // The whole timeline as a picture (what the view paints; for export).
    QImage render() const;
    // Where step s, row r is drawn (for tests and tooltips); empty without data.
    QRect cellRect(int step, int row) const;
    QSize sizeHint() const override;
    // How many steps a view `width` pixels wide shows without scrolling (cells at their
    // narrowest), so that a live timeline can keep its row labels in sight.
    static int stepsThatFit(int width);
    // Right-click exports: PNG of render(), and the data as CSV, JSON and SVG
    // (batch_timeline_export.cpp). `base_name`: the suggested file name.
    void installExportMenu(const QString& base_name);

  protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;  // tooltips: the cell under the mouse

  private:
    int cell_width() const;
    void paint(QPainter& p) const;
    BatchTimelineData data_;
};

}  // namespace tokenscope::ui
