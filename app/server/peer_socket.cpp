#include "peer_socket.h"

#if !defined(_WIN32)
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#endif

namespace tokenscope::server {

#if !defined(_WIN32)
namespace {

struct Endpoint {
    std::string address;
    int port = -1;
};

// A socket name as httplib writes it into Request (inet_ntop text, host-order port).
bool endpoint_of(const sockaddr_storage& name, Endpoint& out) {
    char text[INET6_ADDRSTRLEN] = {};
    if (name.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(name);
        if (!inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text)) return false;
        out = {text, ntohs(v4.sin_port)};
        return true;
    }
    if (name.ss_family == AF_INET6) {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(name);
        if (!inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text)) return false;
        out = {text, ntohs(v6.sin6_port)};
        return true;
    }
    return false;
}

bool is_connection(int fd, const httplib::Request& request) {
    sockaddr_storage name{};
    socklen_t length = sizeof name;
    Endpoint local, remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&name), &length) != 0) return false;
    if (!endpoint_of(name, local)) return false;
    if (local.port != request.local_port || local.address != request.local_addr) return false;
    length = sizeof name;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&name), &length) != 0) return false;
    if (!endpoint_of(name, remote)) return false;
    return remote.port == request.remote_port && remote.address == request.remote_addr;
}

}  // namespace

PeerSocket PeerSocket::of(const httplib::Request& request) {
    PeerSocket socket;
    if (request.remote_port < 0 || request.local_port < 0) return socket;
    // Linux lists the open descriptors; elsewhere every number up to the table size is tried.
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        while (const dirent* entry = ::readdir(dir)) {
            char* end = nullptr;
            const long fd = std::strtol(entry->d_name, &end, 10);
            if (end == entry->d_name || *end != '\0') continue;
            if (is_connection(static_cast<int>(fd), request)) {
                socket.fd_ = static_cast<int>(fd);
                break;
            }
        }
        ::closedir(dir);
        return socket;
    }
    const long limit = ::sysconf(_SC_OPEN_MAX);
    for (int fd = 0; fd < (limit > 0 ? limit : 1024); ++fd) {
        if (is_connection(fd, request)) {
            socket.fd_ = fd;
            break;
        }
    }
    return socket;
}

bool PeerSocket::hung_up() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    if (!(p.revents & POLLIN)) return false;
    // Readable: either bytes (a pipelined next request: still there) or end-of-file.
    char byte = 0;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
}

#else

PeerSocket PeerSocket::of(const httplib::Request&) {
    return {};
}

bool PeerSocket::hung_up() const {
    return false;
}

#endif

}  // namespace tokenscope::server
