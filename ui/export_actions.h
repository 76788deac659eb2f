#pragma once
// Export of what a teaching view shows, for slides and notebooks: the picture as PNG (the
// widget as painted, at the screen's pixel ratio) or SVG, and the numbers behind it as CSV or
// JSON. Attention numbers go through engine/inspect/attention_export, so the app and
// `tokenscope-cli attention` write the same formats. The widget offers these in its context
// menu (installExportMenu); tests call the functions directly.
#include <QString>
#include <QWidget>
#include <functional>

#include "inspect/attention_export.h"
#include "panel_data.h"
#include "teaching_data.h"

namespace tokenscope::ui {

// What a view can export. Any member may be empty: its menu entry is then left out.
struct ExportSource {
    std::function<QImage()> image;     // PNG: the picture (default: the widget grabbed)
    std::function<QString()> svg;      // SVG document
    std::function<QString()> csv;      // CSV text
    std::function<QString()> json;     // JSON text
    QString base_name = "tokenscope";  // suggested file name without extension
};

// Writes `source` in the format of `path`'s extension (png, svg, csv, json); false and
// `error` set when the format is not offered or the file cannot be written.
bool exportTo(QWidget* widget, const ExportSource& source, const QString& path,
              QString* error = nullptr);

// Adds "Export PNG…", "Export SVG…", "Export CSV…", "Export JSON…" to the widget's context
// menu (each asks for a file name).
void installExportMenu(QWidget* widget, std::function<ExportSource()> source);

// The engine's export structure for the views' data.
inspect::AttentionExport attentionExport(const HeadGridData& grid);
inspect::AttentionExport attentionExport(const AttentionData& data);

// A sampling step's candidates: id, token, probability before and after the sampling settings.
QString distributionCsv(const QVector<CandidateData>& candidates, const QVector<double>& before,
                        const QVector<double>& after);
QString distributionJson(const QVector<CandidateData>& candidates, const QVector<double>& before,
                         const QVector<double>& after);
// Paired horizontal bars, as the chart draws them.
QString distributionSvg(const QVector<CandidateData>& candidates, const QVector<double>& before,
                        const QVector<double>& after);

}  // namespace tokenscope::ui
