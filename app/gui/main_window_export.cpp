// The main window's File › Export conversation…, Export all conversations… and Import
// conversations… (conversation_export.h does the formats).
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QSaveFile>
#include <QStatusBar>

#include "conversation_export.h"
#include "main_window.h"
#include "trace_writer.h"

namespace tokenscope::app {

void MainWindow::build_export_menu(QMenu* file) {
    const QString filters = tr("Markdown (*.md);;JSON with token traces (*.json)");
    file->addAction(tr("&Export conversation…"), QKeySequence(tr("Ctrl+E")), this, [this, filters] {
        if (conversation_ < 0) return;
        const auto c = store_->conversation(conversation_);
        const QString name = (c ? c->title : QString("conversation")).simplified().left(60);
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export conversation"), name + ".md", filters);
        if (!path.isEmpty()) exportConversationTo(path);
    });
    file->addAction(tr("Export &all conversations…"), this, [this, filters] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export all conversations"),
                                                          "tokenscope-conversations.json", filters);
        if (!path.isEmpty()) exportConversationTo(path, true);
    });
    file->addAction(tr("&Import conversations…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Import conversations"), {},
                                                          tr("tokenscope JSON export (*.json)"));
        if (!path.isEmpty()) importConversationsFrom(path);
    });
}

bool MainWindow::exportConversationTo(const QString& path, bool all) {
    QList<qint64> ids;
    if (all) {
        for (const auto& c : store_->conversations()) ids.push_back(c.id);
    } else if (conversation_ >= 0) {
        ids.push_back(conversation_);
    }
    if (ids.isEmpty()) {
        show_error(tr("Nothing to export"), tr("There is no conversation to export yet."));
        return false;
    }
    // A reply's token trace reaches the database on the trace writer's thread: wait for the
    // queued ones, or a reply that just finished would be exported without its tokens.
    trace_writer_->flush();
    QByteArray bytes;
    if (QFileInfo(path).suffix().compare("md", Qt::CaseInsensitive) == 0) {
        QStringList parts;
        for (qint64 id : ids) parts << conversation_markdown(*store_, id);
        bytes = parts.join(QStringLiteral("\n---\n\n")).toUtf8();
    } else {
        bytes = conversations_json(*store_, ids);
    }
    // All or nothing: a full disk leaves no half-written file under the name.
    QSaveFile out(path);
    if (!out.open(QIODevice::WriteOnly) || out.write(bytes) != bytes.size() || !out.commit()) {
        show_error(tr("Export failed"), tr("Cannot write %1: %2").arg(path, out.errorString()));
        return false;
    }
    statusBar()->showMessage(
        tr("Exported %n conversation(s) to %1", nullptr, int(ids.size())).arg(path), 5000);
    return true;
}

bool MainWindow::importConversationsFrom(const QString& path) {
    QFile in(path);
    if (!in.open(QIODevice::ReadOnly)) {
        show_error(tr("Import failed"), tr("Cannot read %1: %2").arg(path, in.errorString()));
        return false;
    }
    const ImportResult r = import_conversations_json(*store_, in.readAll());
    if (!r.error.isEmpty()) {
        show_error(tr("Import failed"), tr("%1 was not imported: %2").arg(path, r.error));
        return false;
    }
    refresh_conversations();
    if (!r.conversations.isEmpty()) selectConversation(r.conversations.first());
    statusBar()->showMessage(
        tr("Imported %n conversation(s) from %1", nullptr, int(r.conversations.size())).arg(path),
        5000);
    return true;
}

}  // namespace tokenscope::app
