#pragma once
// The engine reports every failure as an exception derived from tokenscope::Error whose
// message is one self-contained line naming the problem (file, offset, key, value).
#include <stdexcept>
#include <string>

namespace tokenscope {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A file whose bytes are not what its format requires.
class FormatError : public Error {
  public:
    using Error::Error;
};

// A caller asked for something the engine cannot do (unknown type, bad argument).
class InvalidArgument : public Error {
  public:
    using Error::Error;
};

// The operating system refused (open, mmap, read).
class IoError : public Error {
  public:
    using Error::Error;
};

// "strerror" that is safe to call from several threads.
std::string system_error_text(int errnum);

#ifdef _WIN32
// The system's text for a Windows error code (GetLastError()), one line, then "(error N)".
std::string windows_error_text(unsigned long code);
#endif

}  // namespace tokenscope
