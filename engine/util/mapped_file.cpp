#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>

#include "util/error.h"

namespace tokenscope {

namespace {
struct FdCloser {
    int fd;
    ~FdCloser() {
        if (fd >= 0) ::close(fd);
    }
};
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path + ": cannot open: " + system_error_text(errno));
    FdCloser closer{fd};
    struct stat info {};
    if (::fstat(fd, &info) != 0) throw IoError(path + ": cannot stat: " + system_error_text(errno));
    if (S_ISDIR(info.st_mode)) throw IoError(path + ": is a directory, not a file");
    if (!S_ISREG(info.st_mode)) throw IoError(path + ": is not a regular file");
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ == 0) return;
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
        throw IoError(path + ": cannot map " + std::to_string(size_) +
                      " bytes: " + system_error_text(errno));
    }
    data_ = static_cast<const std::uint8_t*>(mapped);
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace tokenscope
