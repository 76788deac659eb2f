// store_writer PATH RUN: appends messages to a new conversation in the store at PATH, forever
// (until killed, or a generous cap), printing "conversation ID" once and then "committed N"
// after each message is committed, flushed at once so the test knows what it may expect.
// Odd runs commit as the app's window does (sync_in_background(): no fsync on the committing
// thread), so a SIGKILL is tried against both ways of committing.
#include "conversation_store.h"
#include "store_writer_protocol.h"

#include <QCoreApplication>

#include <cstdio>
#include <cstdlib>
#include <exception>

int main(int argc, char** argv) {
    // Qt SQL loads its SQLite driver as a plugin, which needs an application object.
    QCoreApplication app(argc, argv);
    if (argc != 3) {
        std::fprintf(stderr, "usage: store_writer PATH RUN\n");
        return 2;
    }
    namespace protocol = tokenscope::test::store_writer;
    using tokenscope::app::Role;
    try {
        const int run = std::atoi(argv[2]);
        tokenscope::app::ConversationStore store(argv[1]);
        if (run % 2 == 1) store.sync_in_background();
        const qint64 conversation =
            store.create_conversation(QStringLiteral("run %1").arg(run), QString());
        std::printf("conversation %lld\n", static_cast<long long>(conversation));
        std::fflush(stdout);
        for (int i = 0; i < 100000; ++i) {
            if (protocol::is_answer(i)) {
                const qint64 id = store.append_message(conversation, Role::Assistant,
                                                       protocol::partial(run, i), false);
                store.update_message(id, protocol::content(run, i), true, i);
            } else {
                store.append_message(conversation, Role::User, protocol::content(run, i));
            }
            std::printf("committed %d\n", i + 1);
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "store_writer: %s\n", e.what());
        return 1;
    }
    return 0;
}
