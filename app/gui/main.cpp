// tokenscope: the desktop app.
//   tokenscope [--model FILE] [--kv-type f16|q8|f32] [--ctx N] [--threads N] [--store FILE]
//              [--screenshot FILE [--prompt TEXT]]
// --screenshot starts the app, sends one prompt (a real exchange with the model), saves a
// PNG of the main window when the answer is complete, and quits.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QTimer>
#include <cstdio>

#include "chat_view.h"
#include "main_window.h"
#include "util/paths.h"
#include "util/log.h"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName("tokenscope");
    QApplication::setOrganizationName("tokenscope");
    QApplication::setApplicationVersion(TOKENSCOPE_VERSION_STRING);

    QCommandLineParser parser;
    parser.setApplicationDescription("Chat with a local language model and see inside it while it runs.");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption model({"m", "model"}, "GGUF model to open.", "file");
    QCommandLineOption kv_type("kv-type", "KV cache element type: f16, q8 or f32.", "type", "f16");
    QCommandLineOption ctx("ctx", "KV cache capacity in tokens.", "tokens", "4096");
    QCommandLineOption threads("threads", "CPU threads (0: one per core).", "n", "0");
    QCommandLineOption device("device", "cpu, cuda or auto (CUDA when a usable GPU is present).", "device", "auto");
    QCommandLineOption store("store", "Conversation database (default: the XDG data dir).", "file");
    QCommandLineOption screenshot("screenshot", "Save a PNG of the window after one exchange, then quit.", "file");
    QCommandLineOption prompt("prompt", "The prompt sent for --screenshot.", "text", "What is the capital of France?");
    QCommandLineOption log_level("log-level", "trace, debug, info, warn, error, critical or off.", "level");
    parser.addOptions({model, kv_type, ctx, threads, device, store, screenshot, prompt, log_level});
    parser.process(app);

    try {
        tokenscope::log::configure(parser.isSet(log_level) ? std::optional<std::string>(parser.value(log_level).toStdString())
                                                           : std::nullopt);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenscope: error: %s\n", e.what());
        return 1;
    }

    tokenscope::app::MainWindowOptions options;
    options.model_path = parser.value(model);
    options.store = parser.isSet(store) ? std::filesystem::path(parser.value(store).toStdString())
                                        : tokenscope::app::ConversationStore::default_path();
    options.load.kv_type = parser.value(kv_type);
    options.load.kv_capacity_tokens = parser.value(ctx).toInt();
    options.load.threads = parser.value(threads).toInt();
    options.load.device = parser.value(device);

    std::unique_ptr<tokenscope::app::MainWindow> window;
    try {
        window = std::make_unique<tokenscope::app::MainWindow>(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenscope: error: %s\n", e.what());
        return 1;
    }
    window->resize(1500, 950);
    window->show();

    if (parser.isSet(screenshot)) {
        const QString file = parser.value(screenshot);
        const QString text = parser.value(prompt);
        // No model to load (a fresh install before the first download): the window as a new
        // user first sees it, once the event loop has laid it out.
        const QString wanted = parser.isSet(model) ? parser.value(model)
                                                   : QString::fromStdString(tokenscope::paths::default_model().string());
        if (!QFileInfo::exists(wanted)) {
            QTimer::singleShot(1000, window.get(), [&] {
                const bool ok = window->grab().save(file);
                std::fprintf(stderr, "tokenscope: no model at %s; %s %s\n", qPrintable(wanted), ok ? "saved" : "could not save",
                             qPrintable(file));
                QApplication::exit(ok ? 0 : 1);
            });
            return QApplication::exec();
        }
        // The handlers run inside the QApplication::exec() below, after this block has ended:
        // they hold copies of the strings, and the window through a raw pointer (it outlives
        // the event loop).
        tokenscope::app::MainWindow* shown = window.get();
        QObject::connect(shown, &tokenscope::app::MainWindow::modelReadyChanged, shown, [shown, text](bool ready) {
            if (!ready) {
                std::fprintf(stderr, "tokenscope: error: the model did not load\n");
                QApplication::exit(1);
                return;
            }
            shown->newConversation();
            shown->sendMessage(text);
        });
        QObject::connect(shown, &tokenscope::app::MainWindow::generationDone, shown, [shown, file] {
            // Let the coalesced text, the heatmap render and the panels settle first.
            QTimer::singleShot(1500, shown, [shown, file] {
                const bool ok = shown->grab().save(file);
                std::fprintf(stderr, "tokenscope: %s %s\n", ok ? "saved" : "could not save", qPrintable(file));
                QApplication::exit(ok ? 0 : 1);
            });
        });
        QTimer::singleShot(180000, shown, [] {
            std::fprintf(stderr, "tokenscope: error: no answer within 180 s\n");
            QApplication::exit(1);
        });
    }
    return QApplication::exec();
}
