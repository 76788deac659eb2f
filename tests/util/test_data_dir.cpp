// paths::data_dir_for: where user data goes on Linux and on Windows, from a given environment.
// Both platforms' rules run here, whatever the host.
#include <QtTest>

#include <map>
#include <string>

#include "util/paths.h"

using tokenscope::paths::data_dir_for;
using tokenscope::paths::Platform;
namespace fs = std::filesystem;

namespace {

// An environment made of the given variables only; empty values count as unset, as in the
// real lookup.
tokenscope::paths::EnvLookup environment(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> std::optional<fs::path> {
        const auto it = vars.find(name);
        if (it == vars.end() || it->second.empty()) return std::nullopt;
        return fs::path(it->second);
    };
}

// Paths compared as text, so that a failure prints both.
QString text(const fs::path& p) {
    return QString::fromStdString(p.string());
}

}  // namespace

class TestDataDir : public QObject {
    Q_OBJECT

  private slots:
    void posixUsesHome() {
        QCOMPARE(text(data_dir_for(Platform::Posix, environment({{"HOME", "/home/ada"}}))),
                 text(fs::path("/home/ada/.local/share/tokenscope")));
    }

    void posixXdgDataHomeWins() {
        QCOMPARE(text(data_dir_for(Platform::Posix, environment({{"HOME", "/home/ada"},
                                                                 {"XDG_DATA_HOME", "/data"}}))),
                 text(fs::path("/data/tokenscope")));
    }

    void posixIgnoresWindowsVariables() {
        QCOMPARE(text(data_dir_for(Platform::Posix,
                                   environment({{"HOME", "/home/ada"}, {"LOCALAPPDATA", "/x"}}))),
                 text(fs::path("/home/ada/.local/share/tokenscope")));
    }

    void windowsUsesLocalAppData() {
        const std::string local = "C:\\Users\\ada\\AppData\\Local";
        // HOME is often set by Git Bash or MSYS; %LOCALAPPDATA% still wins on Windows.
        QCOMPARE(text(data_dir_for(Platform::Windows, environment({{"LOCALAPPDATA", local},
                                                                   {"HOME", "/c/Users/ada"}}))),
                 text(fs::path(local) / "tokenscope"));
    }

    void windowsFallsBackToUserProfile() {
        const std::string profile = "C:\\Users\\ada";
        QCOMPARE(text(data_dir_for(Platform::Windows,
                                   environment({{"USERPROFILE", profile}, {"LOCALAPPDATA", ""}}))),
                 text(fs::path(profile) / "AppData" / "Local" / "tokenscope"));
    }

    void windowsXdgDataHomeWins() {
        QCOMPARE(text(data_dir_for(Platform::Windows, environment({{"XDG_DATA_HOME", "D:\\data"},
                                                                   {"LOCALAPPDATA", "C:\\x"}}))),
                 text(fs::path("D:\\data") / "tokenscope"));
    }

    void nothingSetUsesTheCurrentDirectory() {
        for (const Platform platform : {Platform::Posix, Platform::Windows}) {
            QCOMPARE(text(data_dir_for(platform, environment({{"HOME", ""}}))),
                     text(fs::current_path() / "tokenscope-data"));
        }
    }
};

QTEST_APPLESS_MAIN(TestDataDir)
#include "test_data_dir.moc"
