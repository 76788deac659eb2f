#include "speculation_explainer.h"

#include <QCoreApplication>

namespace tokenscope::ui {

namespace {

QString tr(const char* text) {
    return QCoreApplication::translate("tokenscope::ui::SpeculationExplainer", text);
}

QString megabytes(quint64 bytes) {
    return QStringLiteral("%1 MB").arg(double(bytes) / 1e6, 0, 'f', 1);
}

QString ms(double value) {
    return QStringLiteral("%1 ms").arg(value, 0, 'f', value >= 100 ? 0 : 1);
}

}  // namespace

QString speculationExplanation(const MetricsData& m) {
    QStringList parts;
    parts << tr("<b>Why is speculation (almost) free?</b>");

    // 1. Decoding is memory-bound: one pass reads every weight for one token.
    if (m.decode_bytes_per_token > 0 && m.plain_step_ms > 0) {
        const double gbps = double(m.decode_bytes_per_token) / (m.plain_step_ms * 1e6);
        parts << tr("To write one token the model reads all its weights once: <b>%1</b> per "
                    "decode pass. A plain decode step takes <b>%2</b> here, i.e. %3 GB/s of "
                    "weights. The arithmetic per weight is tiny, so the processor mostly waits "
                    "for memory.")
                     .arg(megabytes(m.decode_bytes_per_token), ms(m.plain_step_ms))
                     .arg(gbps, 0, 'f', 1);
    } else if (m.decode_bytes_per_token > 0) {
        parts << tr("To write one token the model reads all its weights once: <b>%1</b> per "
                    "decode pass. The arithmetic per weight is tiny, so the processor mostly "
                    "waits for memory. (The plain step time is measured once a reply has run.)")
                     .arg(megabytes(m.decode_bytes_per_token));
    } else {
        parts << tr(
            "To write one token the model reads all its weights once. The arithmetic "
            "per weight is tiny, so the processor mostly waits for memory.");
    }

    // 2. Checking k guesses reads the same bytes once.
    parts << tr(
        "Checking <i>k</i> guessed tokens is one pass over the same weights with "
        "<i>k</i>+1 tokens instead of one: the bytes are read once, and the extra "
        "arithmetic uses time the processor would have spent waiting.");

    if (!m.speculating) {
        parts << tr(
            "Speculation is off. Turn on <i>Prompt lookup</i> in the Sampling panel and "
            "ask for something that repeats the prompt to see the numbers for this "
            "model.");
        return parts.join(QStringLiteral("<p>"));
    }

    // 3. The measured numbers of the last reply.
    if (m.verifications > 0 && m.verify_step_ms > 0) {
        QString cost = tr("The last reply ran %1 verification passes of <b>%2</b> on average")
                           .arg(m.verifications)
                           .arg(ms(m.verify_step_ms));
        if (m.plain_step_ms > 0)
            cost += tr(" (%1× a plain step)").arg(m.verify_step_ms / m.plain_step_ms, 0, 'f', 2);
        cost += tr(", each producing <b>%1</b> tokens.").arg(m.tokens_per_verification, 0, 'f', 2);
        parts << cost;
        parts << tr("Guesses accepted: <b>%1 %</b> (%2 of %3).")
                     .arg(100.0 * m.acceptanceRate(), 0, 'f', 0)
                     .arg(m.accepted)
                     .arg(m.proposed);
        if (m.plain_step_ms > 0 && m.tokens_per_verification > 0) {
            const double per_token = m.verify_step_ms / m.tokens_per_verification;
            const double gain = m.plain_step_ms / per_token;
            parts << (gain >= 1.0 ? tr("Per token: <b>%1</b> in a verification against <b>%2</b> "
                                       "plain: %3× faster.")
                                  : tr("Per token: <b>%1</b> in a verification against <b>%2</b> "
                                       "plain: %3× slower."))
                         .arg(ms(per_token), ms(m.plain_step_ms))
                         .arg(gain >= 1.0 ? gain : 1.0 / gain, 0, 'f', 2);
        }
    } else {
        parts << tr(
            "No guess has been checked yet in the last reply (nothing matched to "
            "propose, or no reply yet).");
    }
    parts << tr(
        "A rejected guess costs only the extra arithmetic of that pass, and the model's "
        "own token at that position comes from the same pass, so the text is exactly "
        "what the model alone would write. When guesses keep failing, the engine lowers "
        "<i>k</i>, down to 0 (plain decoding).");
    return parts.join(QStringLiteral("<p>"));
}

}  // namespace tokenscope::ui
