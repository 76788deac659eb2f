#pragma once
// A small line chart of recent values (per-token latency), painted by hand: a QChart would be
// a heavy dependency for a 30-pixel-high strip. The y axis starts at zero so that the height
// of a spike is its true size relative to the others; the maximum touches the top row.
#include <QVector>
#include <QWidget>

namespace tokenscope::ui {

class Sparkline : public QWidget {
    Q_OBJECT
  public:
    explicit Sparkline(QWidget* parent = nullptr);

    const QVector<double>& values() const { return values_; }
    // Keeps only the newest `count` values when painting (0 = all).
    void setMaxPoints(int count);
    int maxPoints() const { return max_points_; }

    // Where the line is drawn: the maximum lies on plotRect().top(), zero on bottom().
    QRect plotRect() const;
    QColor lineColor() const;
    // The y pixel (widget coordinates) of `value` under the current scale.
    int yFor(double value) const;

    QSize sizeHint() const override { return {240, 48}; }
    QSize minimumSizeHint() const override { return {80, 24}; }

  public slots:
    void setValues(const QVector<double>& values);
    void appendValue(double value);

  protected:
    void paintEvent(QPaintEvent* event) override;

  private:
    QVector<double> visibleValues() const;

    QVector<double> values_;
    int max_points_ = 256;
};

}  // namespace tokenscope::ui
