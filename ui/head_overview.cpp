#include "head_overview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>

#include "export_actions.h"
#include "heatmap_renderer.h"

namespace tokenscope::ui {

namespace {
constexpr int kAxis = 28;  // room for the layer numbers (left) and head numbers (top)
}

class HeadOverviewMap : public QWidget {
  public:
    explicit HeadOverviewMap(HeadOverview* owner) : QWidget(owner), owner_(owner) {
        setMouseTracking(true);
        setMinimumSize(120, 80);
    }
    QRect cellRect(int layer, int head) const {
        const auto& d = owner_->data_;
        if (d.layers <= 0 || d.heads <= 0) return {};
        const double cw = double(width() - kAxis) / d.heads;
        const double ch = double(height() - kAxis) / d.layers;
        return QRect(kAxis + int(head * cw), kAxis + int(layer * ch), std::max(1, int(cw) - 1),
                     std::max(1, int(ch) - 1));
    }
    std::pair<int, int> cellAt(const QPoint& pos) const {
        const auto& d = owner_->data_;
        if (d.layers <= 0 || pos.x() < kAxis || pos.y() < kAxis) return {-1, -1};
        const int h = int(double(pos.x() - kAxis) * d.heads / std::max(1, width() - kAxis));
        const int l = int(double(pos.y() - kAxis) * d.layers / std::max(1, height() - kAxis));
        if (h >= d.heads || l >= d.layers) return {-1, -1};
        return {l, h};
    }

  protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.fillRect(rect(), palette().color(QPalette::Base));
        const auto& d = owner_->data_;
        if (d.layers <= 0 || d.heads <= 0) {
            p.setPen(palette().color(QPalette::PlaceholderText));
            p.drawText(rect().adjusted(6, 6, -6, -6), Qt::AlignCenter | Qt::TextWordWrap,
                       tr("Every layer × head of the last reply, once it has attention rows."));
            return;
        }
        float top = 0;
        for (int l = 0; l < d.layers; ++l)
            for (int h = 0; h < d.heads; ++h) top = std::max(top, owner_->value(l, h));
        p.setPen(palette().color(QPalette::Text));
        QFont small = font();
        small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
        p.setFont(small);
        for (int h = 0; h < d.heads; ++h) {
            const QRect c = cellRect(0, h);
            if (d.heads <= 16 || h % 4 == 0)
                p.drawText(QRect(c.left(), 0, std::max(c.width(), 20), kAxis - 2),
                           Qt::AlignBottom | Qt::AlignLeft, QString::number(h));
        }
        const int step = std::max(1, (d.layers * 12) / std::max(1, height() - kAxis));
        for (int l = 0; l < d.layers; ++l) {
            const QRect c = cellRect(l, 0);
            if (l % step == 0)
                p.drawText(QRect(0, c.top(), kAxis - 4, std::max(c.height(), 12)),
                           Qt::AlignRight | Qt::AlignVCenter, QString::number(l));
            for (int h = 0; h < d.heads; ++h) {
                const float v = owner_->value(l, h);
                p.fillRect(cellRect(l, h), QColor(colormap(top > 0 ? v / top : 0.0f)));
            }
        }
        p.drawText(QRect(0, 0, kAxis, kAxis), Qt::AlignCenter, tr("L\\H"));
    }
    void mouseMoveEvent(QMouseEvent* e) override {
        const auto [l, h] = cellAt(e->pos());
        if (l < 0) return QToolTip::hideText();
        const bool entropy = owner_->measure_ == HeadOverview::Measure::Entropy;
        QToolTip::showText(e->globalPosition().toPoint(),
                           (entropy ? tr("layer %1 head %2: mean entropy %3 bits")
                                    : tr("layer %1 head %2: looks %3 tokens back on average"))
                               .arg(l)
                               .arg(h)
                               .arg(double(owner_->value(l, h)), 0, 'f', 2),
                           this);
    }
    void mousePressEvent(QMouseEvent* e) override {
        const auto [l, h] = cellAt(e->pos());
        if (e->button() == Qt::LeftButton && l >= 0) emit owner_->headChosen(l, h);
    }

  private:
    HeadOverview* owner_;
};

HeadOverview::HeadOverview(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Layer × head:"), this));
    measure_box_ = new QComboBox(this);
    measure_box_->addItem(tr("entropy (bright = spread out)"));
    measure_box_->addItem(tr("mean distance (bright = far back)"));
    measure_box_->setToolTip(
        tr("Entropy of a row: 0 bits = all weight on one token; log2(n) = spread evenly.\n"
           "Mean distance: sum of weight × (query − key): 1 for a previous-token head."));
    bar->addWidget(measure_box_, 1);
    layout->addLayout(bar);
    map_ = new HeadOverviewMap(this);
    layout->addWidget(map_, 1);
    connect(measure_box_, &QComboBox::currentIndexChanged, this,
            [this](int i) { setMeasure(i == 0 ? Measure::Entropy : Measure::Distance); });
    installExportMenu(map_, [this] {
        ExportSource s;
        s.base_name = measure_ == Measure::Entropy ? QStringLiteral("head-entropy")
                                                   : QStringLiteral("head-distance");
        s.csv = [this] {
            QString out = QStringLiteral("layer,head,entropy_bits,mean_distance\n");
            for (int l = 0; l < data_.layers; ++l)
                for (int h = 0; h < data_.heads; ++h)
                    out += QStringLiteral("%1,%2,%3,%4\n")
                               .arg(l)
                               .arg(h)
                               .arg(double(data_.entropy.value(l * data_.heads + h)), 0, 'g', 6)
                               .arg(double(data_.distance.value(l * data_.heads + h)), 0, 'g', 6);
            return out;
        };
        return s;
    });
}

QWidget* HeadOverview::map() const {
    return map_;
}

void HeadOverview::setData(const HeadOverviewData& data) {
    data_ = data;
    map_->update();
}

void HeadOverview::setMeasure(Measure measure) {
    measure_ = measure;
    const int index = measure == Measure::Entropy ? 0 : 1;
    if (measure_box_->currentIndex() != index) measure_box_->setCurrentIndex(index);
    map_->update();
}

float HeadOverview::value(int layer, int head) const {
    const int i = layer * data_.heads + head;
    const QVector<float>& v = measure_ == Measure::Entropy ? data_.entropy : data_.distance;
    return i >= 0 && i < v.size() ? v[i] : 0.0f;
}

QRect HeadOverview::cellRect(int layer, int head) const {
    return map_->cellRect(layer, head);
}

}  // namespace tokenscope::ui
