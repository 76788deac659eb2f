#include "trace_writer.h"

#include <QMetaObject>
#include <QThread>

namespace tokenscope::app {

void register_trace_writer_types() {
    qRegisterMetaType<QVector<ui::TokenData>>();
}

TraceToken trace_from_token(const ui::TokenData& t) {
    TraceToken token;
    token.id = t.id;
    token.text = t.text;
    token.probability = t.probability;
    token.logprob = t.logprob;
    for (const auto& c : t.before) token.before.append({c.id, c.piece, c.probability, c.logit});
    for (const auto& c : t.after) token.after.append({c.id, c.piece, c.probability, c.logit});
    token.origin = static_cast<quint8>(t.origin);
    return token;
}

ui::TokenData token_from_trace(const TraceToken& t) {
    ui::TokenData token;
    token.id = t.id;
    token.text = t.text;
    token.probability = t.probability;
    token.logprob = t.logprob;
    for (const auto& c : t.before) token.before.push_back({c.id, c.piece, c.probability, c.logit});
    for (const auto& c : t.after) token.after.push_back({c.id, c.piece, c.probability, c.logit});
    // The step's proposals are not stored, only where the token came from: enough for the
    // chat's marking and the Token panel's origin line.
    token.origin = static_cast<ui::TokenOrigin>(t.origin);
    return token;
}

TraceWriter::TraceWriter(std::filesystem::path store_path, QObject* parent)
    : QObject(parent), path_(std::move(store_path)) {}

TraceWriter::~TraceWriter() = default;

void TraceWriter::write(qint64 message_id, const QVector<ui::TokenData>& tokens) {
    try {
        // Qt SQL connections belong to the thread that opens them: this one. Its connection
        // also runs the WAL checkpoints (the GUI thread's connection does not).
        if (!store_) store_ = std::make_unique<ConversationStore>(path_);
        QList<TraceToken> trace;
        trace.reserve(tokens.size());
        for (const ui::TokenData& t : tokens) trace.append(trace_from_token(t));
        store_->set_token_trace(message_id, trace);
        emit written(message_id);
    } catch (const std::exception& e) {
        emit failed(message_id, QString::fromUtf8(e.what()));
    }
}

void TraceWriter::flush() {
    if (thread() == QThread::currentThread()) return;  // nothing queued ahead of us here
    // Queued calls run in order: when this empty one has run, every earlier write has too.
    QMetaObject::invokeMethod(
        this, [] {}, Qt::BlockingQueuedConnection);
}

}  // namespace tokenscope::app
