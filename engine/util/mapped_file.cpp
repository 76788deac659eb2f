#include "util/mapped_file.h"

#ifdef _WIN32
#include "util/windows_api.h"

#include <filesystem>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

#include "util/error.h"

namespace tokenscope {

#ifdef _WIN32

namespace {
struct HandleCloser {
    HANDLE handle;
    ~HandleCloser() {
        if (handle && handle != INVALID_HANDLE_VALUE) CloseHandle(handle);
    }
};
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
    // A narrow path means the same file here as for std::filesystem and fopen with this
    // compiler (the ANSI code page with MSVC).
    const std::wstring wide = std::filesystem::path(path).wstring();
    // Others may read, rename or delete the file while it is mapped, as on POSIX; not write.
    const HANDLE file = CreateFileW(wide.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE,
                                    nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (file == INVALID_HANDLE_VALUE) {
        const DWORD error = GetLastError();
        // Opening a directory fails with "access denied"; say what it is instead.
        const DWORD attributes = GetFileAttributesW(wide.c_str());
        if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY)) {
            throw IoError(path + ": is a directory, not a file");
        }
        throw IoError(path + ": cannot open: " + windows_error_text(error));
    }
    const HandleCloser file_closer{file};
    if (GetFileType(file) != FILE_TYPE_DISK) throw IoError(path + ": is not a regular file");
    LARGE_INTEGER file_size{};
    if (!GetFileSizeEx(file, &file_size)) {
        const DWORD error = GetLastError();
        throw IoError(path + ": cannot stat: " + windows_error_text(error));
    }
    size_ = static_cast<std::size_t>(file_size.QuadPart);
    if (size_ == 0) return;  // Windows cannot map an empty file
    // The view keeps the mapping and the file open; both handles can go when this returns.
    const HANDLE mapping = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
    if (!mapping) {
        const DWORD error = GetLastError();
        throw IoError(path + ": cannot map " + std::to_string(size_) +
                      " bytes: " + windows_error_text(error));
    }
    const HandleCloser mapping_closer{mapping};
    const void* view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
    if (!view) {
        const DWORD error = GetLastError();
        throw IoError(path + ": cannot map " + std::to_string(size_) +
                      " bytes: " + windows_error_text(error));
    }
    data_ = static_cast<const std::uint8_t*>(view);
}

MappedFile::~MappedFile() {
    if (data_) UnmapViewOfFile(data_);
}

#else

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

#endif

}  // namespace tokenscope
