#include "export_actions.h"

#include <QContextMenuEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMenu>
#include <QMessageBox>

namespace tokenscope::ui {

namespace {

bool write_text(const QString& path, const QString& text, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        if (error) *error = f.errorString();
        return false;
    }
    const QByteArray bytes = text.toUtf8();
    if (f.write(bytes) != bytes.size()) {
        if (error) *error = f.errorString();
        return false;
    }
    return true;
}

QString xml(const QString& text) {
    return text.toHtmlEscaped();
}

// Filters the context menu event of one widget into the export menu.
class ExportMenuFilter : public QObject {
  public:
    ExportMenuFilter(QWidget* widget, std::function<ExportSource()> source)
        : QObject(widget), widget_(widget), source_(std::move(source)) {}

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (event->type() != QEvent::ContextMenu) return QObject::eventFilter(watched, event);
        const ExportSource source = source_();
        QMenu menu(widget_);
        auto add = [&](const QString& label, const QString& ext, bool available) {
            if (!available) return;
            menu.addAction(label, [this, source, ext] {
                const QString path = QFileDialog::getSaveFileName(
                    widget_, tr("Export"), source.base_name + QLatin1Char('.') + ext,
                    ext.toUpper() + QStringLiteral(" (*.") + ext + QLatin1Char(')'));
                if (path.isEmpty()) return;
                QString error;
                if (!exportTo(widget_, source, path, &error))
                    QMessageBox::warning(widget_, tr("Export failed"),
                                         path + QStringLiteral(": ") + error);
            });
        };
        add(tr("Export PNG…"), QStringLiteral("png"), true);
        add(tr("Export SVG…"), QStringLiteral("svg"), bool(source.svg));
        add(tr("Export CSV…"), QStringLiteral("csv"), bool(source.csv));
        add(tr("Export JSON…"), QStringLiteral("json"), bool(source.json));
        menu.exec(static_cast<QContextMenuEvent*>(event)->globalPos());
        return true;
    }

  private:
    QWidget* widget_;
    std::function<ExportSource()> source_;
};

}  // namespace

bool exportTo(QWidget* widget, const ExportSource& source, const QString& path, QString* error) {
    const QString ext = QFileInfo(path).suffix().toLower();
    if (ext == QLatin1String("png")) {
        const QImage image = source.image ? source.image() : widget->grab().toImage();
        if (image.isNull()) {
            if (error) *error = QObject::tr("nothing to export");
            return false;
        }
        if (!image.save(path, "PNG")) {
            if (error) *error = QObject::tr("cannot write the PNG file");
            return false;
        }
        return true;
    }
    std::function<QString()> text;
    if (ext == QLatin1String("svg")) text = source.svg;
    if (ext == QLatin1String("csv")) text = source.csv;
    if (ext == QLatin1String("json")) text = source.json;
    if (!text) {
        if (error) *error = QObject::tr("this view does not export .%1").arg(ext);
        return false;
    }
    return write_text(path, text(), error);
}

void installExportMenu(QWidget* widget, std::function<ExportSource()> source) {
    widget->installEventFilter(new ExportMenuFilter(widget, std::move(source)));
}

inspect::AttentionExport attentionExport(const HeadGridData& grid) {
    inspect::AttentionExport e;
    for (const QString& label : grid.labels) {
        e.token_ids.push_back(-1);
        e.token_texts.push_back(label.toStdString());
    }
    e.model_heads = int(grid.heads.size());
    for (int h = 0; h < grid.heads.size(); ++h) {
        inspect::AttentionMatrix m{grid.layer, h, {}};
        // Rows before first_query were not sent: they stay empty (all masked) in the picture.
        m.rows.resize(size_t(grid.first_query));
        for (const auto& row : grid.heads[h]) m.rows.emplace_back(row.begin(), row.end());
        e.matrices.push_back(std::move(m));
    }
    return e;
}

inspect::AttentionExport attentionExport(const AttentionData& data) {
    inspect::AttentionExport e;
    for (const QString& label : data.labels) {
        e.token_ids.push_back(-1);
        e.token_texts.push_back(label.toStdString());
    }
    inspect::AttentionMatrix m{data.layer, data.head, {}};
    for (const auto& row : data.rows) m.rows.emplace_back(row.begin(), row.end());
    e.matrices.push_back(std::move(m));
    return e;
}

QString distributionCsv(const QVector<CandidateData>& candidates, const QVector<double>& before,
                        const QVector<double>& after) {
    QString out = QStringLiteral("rank,id,token,before,after\n");
    for (int i = 0; i < candidates.size(); ++i) {
        QString piece = candidates[i].piece;
        piece.replace(QLatin1Char('"'), QStringLiteral("\"\""));
        out += QStringLiteral("%1,%2,\"%3\",%4,%5\n")
                   .arg(i + 1)
                   .arg(candidates[i].id)
                   .arg(piece)
                   .arg(i < before.size() ? before[i] : 0.0, 0, 'g', 9)
                   .arg(i < after.size() ? after[i] : 0.0, 0, 'g', 9);
    }
    return out;
}

QString distributionJson(const QVector<CandidateData>& candidates, const QVector<double>& before,
                         const QVector<double>& after) {
    QJsonArray rows;
    for (int i = 0; i < candidates.size(); ++i) {
        rows.append(QJsonObject{{"id", candidates[i].id},
                                {"token", candidates[i].piece},
                                {"logit", double(candidates[i].logit)},
                                {"before", i < before.size() ? before[i] : 0.0},
                                {"after", i < after.size() ? after[i] : 0.0}});
    }
    return QString::fromUtf8(QJsonDocument(QJsonObject{{"candidates", rows}}).toJson());
}

QString distributionSvg(const QVector<CandidateData>& candidates, const QVector<double>& before,
                        const QVector<double>& after) {
    constexpr int kLabel = 110, kBar = 300, kRow = 22, kTop = 28;
    const int height = kTop + int(candidates.size()) * kRow + 8;
    QString s = QStringLiteral(
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%1\" height=\"%2\" "
                    "font-family=\"sans-serif\" font-size=\"12\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\n"
                    "<rect x=\"%3\" y=\"6\" width=\"12\" height=\"8\" fill=\"#9AA5B1\"/>"
                    "<text x=\"%4\" y=\"14\">%5</text>\n"
                    "<rect x=\"%6\" y=\"6\" width=\"12\" height=\"8\" fill=\"#2A7AE2\"/>"
                    "<text x=\"%7\" y=\"14\">%8</text>\n")
                    .arg(kLabel + kBar + 110)
                    .arg(height)
                    .arg(kLabel)
                    .arg(kLabel + 16)
                    .arg(xml(beforeSettingsName()))
                    .arg(kLabel + 170)
                    .arg(kLabel + 186)
                    .arg(xml(afterSettingsName()));
    for (int i = 0; i < candidates.size(); ++i) {
        const int y = kTop + i * kRow;
        const double b = i < before.size() ? before[i] : 0.0;
        const double a = i < after.size() ? after[i] : 0.0;
        QString piece = candidates[i].piece;
        piece.replace(QLatin1Char('\n'), QStringLiteral("↵"));
        s += QStringLiteral("<text x=\"%1\" y=\"%2\" text-anchor=\"end\">%3</text>\n")
                 .arg(kLabel - 6)
                 .arg(y + 14)
                 .arg(xml(QLatin1Char('\'') + piece + QLatin1Char('\'')));
        s +=
            QStringLiteral("<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"8\" fill=\"#9AA5B1\"/>\n")
                .arg(kLabel)
                .arg(y + 2)
                .arg(b * kBar, 0, 'f', 1);
        s +=
            QStringLiteral("<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"8\" fill=\"#2A7AE2\"/>\n")
                .arg(kLabel)
                .arg(y + 11)
                .arg(a * kBar, 0, 'f', 1);
        s += QStringLiteral("<text x=\"%1\" y=\"%2\">%3 → %4</text>\n")
                 .arg(kLabel + kBar + 6)
                 .arg(y + 14)
                 .arg(b, 0, 'f', 3)
                 .arg(a, 0, 'f', 3);
    }
    return s + QStringLiteral("</svg>\n");
}

}  // namespace tokenscope::ui
