// BatchTimelineData's JSON and SVG exports (the CSV lives with the view): what Tools › Batch
// demo and Tools › Server timeline offer on their context menus, for slides and notebooks.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

#include "batch_timeline_view.h"
#include "export_actions.h"

namespace tokenscope::ui {

namespace {
QString escaped(QString text) {
    return text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
}
}  // namespace

void BatchTimelineView::installExportMenu(const QString& base_name) {
    ui::installExportMenu(this, [this, base_name] {
        ExportSource s;
        s.base_name = base_name;
        s.image = [this] { return render(); };
        const BatchTimelineData d = data_;
        if (!d.empty()) {
            s.csv = [d] { return d.csv(); };
            s.json = [d] { return d.json(); };
            s.svg = [d] { return d.svg(); };
        }
        return s;
    });
}

QString BatchTimelineData::json() const {
    QJsonArray step_list;
    for (const auto& step : steps) {
        QJsonArray cells;
        for (int r = 0; r < step.size(); ++r) {
            if (step[r].kind == BatchTimelineCell::Absent) continue;
            cells.append(QJsonObject{{"request", r + 1},
                                     {"kind", batchKindName(step[r].kind)},
                                     {"tokens", step[r].tokens}});
        }
        step_list.append(cells);
    }
    const QJsonObject root{
        {"budget", budget}, {"requests", QJsonArray::fromStringList(rows)}, {"steps", step_list}};
    return QString::fromUtf8(QJsonDocument(root).toJson(QJsonDocument::Indented));
}

QString BatchTimelineData::svg() const {
    // Fixed geometry: a slide scales an SVG anyway.
    constexpr int kLabel = 170, kCell = 8, kRow = 18, kStrip = 60, kMargin = 10, kAxis = 20;
    const int n = int(steps.size());
    const int width = 2 * kMargin + kLabel + std::max(1, n) * kCell;
    const int top = kMargin + kStrip;
    const int height = top + int(rows.size()) * kRow + kAxis + kMargin;
    QString out = QStringLiteral(
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%1\" height=\"%2\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n"
                      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n")
                      .arg(width)
                      .arg(height);
    int most = 1;
    for (int s = 0; s < n; ++s) most = std::max(most, scheduledTokens(s));
    out += QStringLiteral("<text x=\"%1\" y=\"%2\">tokens per step (top %3, budget %4)</text>\n")
               .arg(kMargin)
               .arg(kMargin + 11)
               .arg(most)
               .arg(budget);
    const int x0 = kMargin + kLabel;
    for (int s = 0; s < n; ++s) {
        const int h = scheduledTokens(s) * (kStrip - 20) / most;
        if (h > 0)
            out += QStringLiteral(
                       "<rect class=\"bar\" x=\"%1\" y=\"%2\" width=\"%3\" height=\"%4\" "
                       "fill=\"#8c8c8c\"/>\n")
                       .arg(x0 + s * kCell + 1)
                       .arg(top - 4 - h)
                       .arg(kCell - 2)
                       .arg(h);
    }
    for (int r = 0; r < rows.size(); ++r) {
        out += QStringLiteral("<text x=\"%1\" y=\"%2\">%3</text>\n")
                   .arg(kMargin)
                   .arg(top + r * kRow + 13)
                   .arg(escaped(rows[r]));
    }
    for (int s = 0; s < n; ++s) {
        for (int r = 0; r < steps[s].size(); ++r) {
            const BatchTimelineCell& c = steps[s][r];
            if (c.kind == BatchTimelineCell::Absent) continue;
            out += QStringLiteral(
                       "<rect class=\"%1\" x=\"%2\" y=\"%3\" width=\"%4\" height=\"%5\" "
                       "fill=\"%6\"><title>step %7, request %8: %1 %9</title></rect>\n")
                       .arg(batchKindName(c.kind))
                       .arg(x0 + s * kCell)
                       .arg(top + r * kRow)
                       .arg(kCell - 1)
                       .arg(kRow - 2)
                       .arg(batchKindColor(c.kind).name())
                       .arg(s)
                       .arg(r + 1)
                       .arg(c.tokens);
        }
    }
    const int axis_y = top + int(rows.size()) * kRow + 14;
    out += QStringLiteral("<text x=\"%1\" y=\"%2\">engine step</text>\n").arg(kMargin).arg(axis_y);
    for (int s = 0; s < n; s += 10)
        out += QStringLiteral("<text x=\"%1\" y=\"%2\">%3</text>\n")
                   .arg(x0 + s * kCell)
                   .arg(axis_y)
                   .arg(s);
    out += QStringLiteral("</svg>\n");
    return out;
}

}  // namespace tokenscope::ui
