#include "util/test_paths.h"

#include <QTemporaryDir>
#include <filesystem>
#include <memory>

#include "util/paths.h"

namespace tokenscope::test {

namespace fs = std::filesystem;

std::string shared_testdata(const std::string& relative) {
    const fs::path path = fs::path(TOKENSCOPE_SHARED_DIR) / "testdata" / relative;
    return fs::exists(path) ? path.string() : std::string();
}

std::string source_file(const std::string& relative) {
    return (fs::path(TOKENSCOPE_SOURCE_DIR) / relative).string();
}

std::string gemma_model() {
    const fs::path model = paths::gemma_model();
    return fs::exists(model) ? model.string() : std::string();
}

std::string smollm2_model() {
    const fs::path model = paths::models_dir() / paths::kDefaultModelFile;
    return fs::exists(model) ? model.string() : std::string();
}

std::string scratch_dir() {
    static std::unique_ptr<QTemporaryDir> dir = std::make_unique<QTemporaryDir>();
    return dir->path().toStdString();
}

}  // namespace tokenscope::test
