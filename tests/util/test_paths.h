#pragma once
// Where tests find their inputs. Each returns an empty string when the input is absent, so a
// test can QSKIP with a message that says what is missing.
#include <QString>
#include <string>

namespace tokenscope::test {

// ../shared/testdata/<relative>, or "" when ../shared is absent.
std::string shared_testdata(const std::string& relative);
// <source>/<relative> (resources/, tests/data/).
std::string source_file(const std::string& relative);
// Gemma 3 270M (gemma-3-270m-q4_k_m.gguf) under $TOKENSCOPE_MODELS or the XDG data dir, or ""
// when it is not installed. (It was the default model before SmolLM2-135M-Instruct.)
std::string gemma_model();
// SmolLM2-135M-Instruct (the default model), or "" when it is not installed.
std::string smollm2_model();
// A fresh directory for this test process, removed at exit.
std::string scratch_dir();

}  // namespace tokenscope::test
