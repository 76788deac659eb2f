#pragma once
// Writes token traces to the conversation database on a thread of its own. A long reply's
// trace is a few hundred kilobytes to megabytes: converting, encoding and committing it (and
// the WAL checkpoint that a commit of that size triggers) on the GUI thread was a visible stall
// (measured: 59-116 ms for a 2,000-token reply). The reply's text and statistics are still
// committed on the GUI thread, so nothing the user sees depends on this thread; the window
// keeps each trace in memory until written() says it is in the database.
//
//   QThread thread; auto* writer = new TraceWriter(store_path); writer->moveToThread(&thread);
//   connect(&thread, &QThread::finished, writer, &QObject::deleteLater); thread.start();
//   QMetaObject::invokeMethod(writer, "write", Qt::QueuedConnection, Q_ARG(qint64, id),
//   Q_ARG(...));
//   // before quitting the thread: flush() from the owning thread waits for every queued write.
#include <QList>
#include <QObject>
#include <QVector>
#include <filesystem>
#include <memory>

#include "conversation_store.h"
#include "panel_data.h"

namespace tokenscope::app {

// The stored form of a streamed token and back (every field the token panel shows).
TraceToken trace_from_token(const ui::TokenData& token);
ui::TokenData token_from_trace(const TraceToken& token);

class TraceWriter : public QObject {
    Q_OBJECT
  public:
    explicit TraceWriter(std::filesystem::path store_path, QObject* parent = nullptr);
    ~TraceWriter() override;

    // Called from another thread: returns once every write queued before it has finished.
    void flush();

  public slots:
    void write(qint64 message_id, const QVector<tokenscope::ui::TokenData>& tokens);

  signals:
    void written(qint64 message_id);
    // The message was deleted meanwhile, or the database refused the write.
    void failed(qint64 message_id, const QString& message);

  private:
    std::filesystem::path path_;
    std::unique_ptr<ConversationStore> store_;  // opened on the writer's thread, on first use
};

void register_trace_writer_types();

}  // namespace tokenscope::app
