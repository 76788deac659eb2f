#include "quant_lab_text.h"

#include <QLocale>

#include "tensor/type.h"

namespace tokenscope::app {

namespace {

const tensor::TypeTraits* traits_named(const QString& type) {
    const auto parsed = tensor::parse_type_name(type.toStdString());
    return parsed ? &tensor::traits(*parsed) : nullptr;
}

QString megabytes(double bytes) {
    return QLocale().toString(bytes / 1e6, 'f', bytes < 1e7 ? 2 : 1) + QStringLiteral(" MB");
}

QString block_line(const char* type) {
    const auto* t = traits_named(QLatin1String(type));
    if (!t) return {};
    return QStringLiteral(
               "<tr><td><b>%1</b></td><td align=right>%2 B / %3</td>"
               "<td align=right>%4</td></tr>")
        .arg(QLatin1String(type))
        .arg(t->bytes_per_block)
        .arg(t->block_size)
        .arg(QLocale().toString(bits_per_weight(QLatin1String(type)), 'f', 3));
}

}  // namespace

double bits_per_weight(const QString& type) {
    const auto* t = traits_named(type);
    if (!t || t->block_size <= 0) return 0.0;
    return static_cast<double>(t->bytes_per_block) * 8.0 / static_cast<double>(t->block_size);
}

qint64 kv_bytes_per_token(const ui::ModelInfoData& info, int bytes_per_element) {
    return 2 * info.layers * info.kv_heads * info.head_dim * bytes_per_element;
}

QString quantization_explanation(const ui::ModelInfoData& info, qint64 context_tokens) {
    QString html;
    html += QObject::tr(
        "<h3>What quantization stores</h3>"
        "<p>A weight matrix is cut into <b>blocks</b> along its rows. Each block keeps a few "
        "small integers per weight and one <b>scale</b> <i>d</i> (a 16-bit float): the weight is "
        "read back as <i>d</i> &times; <i>q</i>, or <i>d</i> &times; <i>q</i> + <i>m</i> for the "
        "types with a minimum. The scale is chosen so that the block's largest weights fit the "
        "integer range, so a block with one large weight rounds all its small ones coarsely.</p>");
    html += QStringLiteral("<table cellspacing=0 cellpadding=3 border=1><tr><th>type</th><th>") +
            QObject::tr("bytes / weights") + QStringLiteral("</th><th>") +
            QObject::tr("bits per weight") + QStringLiteral("</th></tr>");
    for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q6_K", "Q4_K", "Q3_K", "Q2_K"})
        html += block_line(type);
    html += QStringLiteral("</table>");
    html += QObject::tr(
        "<p>Q8_0 keeps 32 8-bit integers and a scale per block; Q4_0 32 4-bit ones; Q4_1 adds a "
        "minimum.</p>");
    html += QObject::tr(
        "<h3>K-quants: super-blocks</h3>"
        "<p>The K types group 256 weights into a <b>super-block</b> of sub-blocks (Q4_K: 8 of "
        "32 with 6-bit scales and minimums; Q6_K: 16 of 16 with 8-bit scales; Q3_K: 16 of 16 "
        "with 6-bit scales; Q2_K: 16 of 16 with 4-bit scales and minimums), and one 16-bit float "
        "scales the scales. The weights get a scale every 16 or 32 values for little more than one "
        "per 256. "
        "<b>Q4_K_M</b> and <b>Q5_K_M</b> are mixes: most matrices at the base type, and the ones "
        "that hurt most when rounded (attention V, part of the FFN down projections) at Q6_K.</p>"
        "<h3>Calibration (importance matrix)</h3>"
        "<p>Running the model over a calibration text records, for each input column of each "
        "matrix, the mean squared activation it multiplied. The quantizer then picks each block's "
        "scale to minimise the rounding error <i>weighted</i> by that importance: columns that "
        "carry large activations are rounded more carefully, at the expense of columns that "
        "barely matter. The format, and so the file size, stay the same; only the chosen scales "
        "and integers change. It matters most at 4 bits and below.</p>"
        "<p>Measure on a different text from the one you calibrate on; by default the built-in "
        "sample's first half calibrates and its second half measures.</p>");
    if (info.parameters > 0) {
        const double params = static_cast<double>(info.parameters);
        const double now_bits = static_cast<double>(info.weight_bytes) * 8.0 / params;
        html += QObject::tr("<h3>This model: %1</h3>").arg(info.name.toHtmlEscaped());
        html += QObject::tr("<p>%1 parameters in %2: %3 bits per weight on average.</p>")
                    .arg(QLocale().toString(info.parameters))
                    .arg(megabytes(static_cast<double>(info.weight_bytes)))
                    .arg(now_bits, 0, 'f', 2);
        html += QStringLiteral("<p>");
        for (const char* type : {"F16", "Q8_0", "Q6_K", "Q4_K", "Q2_K"}) {
            html += QObject::tr("At %1: about %2.<br>")
                        .arg(QLatin1String(type))
                        .arg(megabytes(params * bits_per_weight(QLatin1String(type)) / 8.0));
        }
        html += QStringLiteral("</p>");
        const qint64 kv = kv_bytes_per_token(info);
        if (kv > 0 && context_tokens > 0) {
            html +=
                QObject::tr(
                    "<p><b>KV cache next to the weights.</b> Each token keeps a key and a "
                    "value per layer: 2 &times; %1 layers &times; %2 KV heads &times; %3 "
                    "dimensions &times; 2 bytes (F16) = %4 bytes per token, so %5 for %6 "
                    "tokens of context. Quantizing the weights does not shrink it; the KV "
                    "cache type (File › KV cache type) does.</p>")
                    .arg(info.layers)
                    .arg(info.kv_heads)
                    .arg(info.head_dim)
                    .arg(QLocale().toString(kv))
                    .arg(megabytes(static_cast<double>(kv) * static_cast<double>(context_tokens)))
                    .arg(QLocale().toString(context_tokens));
        }
    }
    return html;
}

}  // namespace tokenscope::app
