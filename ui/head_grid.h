#pragma once
// Every head of one layer at once, as small multiples (BertViz's "model view" for one layer):
// each panel is that head's attention over the same query rows, in the heatmap's colours. A
// click enlarges a head to the whole widget (and names it); another click goes back to the
// grid. The panel images are rendered on the global thread pool, like the heatmap's, so a long
// context never stalls the GUI thread; a newer setData() drops older renders.
//
// A step of step mode passes one query row (a decode step: 1 x n strips) or the prompt's block
// (prefill: n x n); the Heads dock passes the newest rows of the reply.
#include <QFutureWatcher>
#include <QImage>
#include <QVector>
#include <QWidget>

#include "heatmap_renderer.h"
#include "teaching_data.h"

namespace tokenscope::ui {

class HeadGrid : public QWidget {
    Q_OBJECT
  public:
    explicit HeadGrid(QWidget* parent = nullptr);
    ~HeadGrid() override;

    const HeadGridData& data() const { return data_; }
    // -1: the grid; otherwise the head shown enlarged.
    int enlargedHead() const { return enlarged_; }
    // Rendered panel images, one per head (null until rendered).
    const QVector<QImage>& headImages() const { return images_; }
    bool renderPending() const { return pending_; }
    // Panels per row for `heads` panels in the current width.
    int columnsFor(int heads) const;
    // The height that `heads` one-row strips need at the current width.
    int stripGridHeight(int heads) const;
    // The panel rectangle of head h in the grid (empty if out of range or enlarged).
    QRect panelRect(int head) const;
    // The grid as painted, at `scale` x the widget's size (for PNG export).
    QImage renderImage(qreal scale = 1.0) const;
    void setColorScale(ColorScale scale);

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::HeadGridData& data);
    void setEnlargedHead(int head);
    void clear(const QString& placeholder = {});

  signals:
    void headClicked(int head);
    void imagesReady();

  protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;

  private:
    void render();
    void paintTo(QPainter& p, const QRect& area) const;
    int headAt(const QPoint& pos) const;

    HeadGridData data_;
    QVector<QImage> images_;
    QString placeholder_;
    int enlarged_ = -1;
    ColorScale scale_ = ColorScale::Sqrt;
    quint64 generation_ = 0;
    bool pending_ = false;
    QList<QFutureWatcher<QVector<QImage>>*> watchers_;
};

}  // namespace tokenscope::ui
