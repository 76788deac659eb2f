#pragma once
// Whether the client of a request has hung up, for a handler that sends nothing until it is
// done (a non-streaming completion). A streaming handler learns it from a failed write; a
// handler that only waits has no write to fail, and cpp-httplib 0.11 (Debian 12's) hands it
// neither its socket nor a disconnect callback. So the socket is looked up by the request's
// address pair (local and remote address and port identify one TCP connection) among the
// process's open descriptors, once, and then polled: end-of-file from the peer means it left.
//
// A client that half-closes its side after sending the request (shutdown(SHUT_WR)) and still
// waits for the answer looks the same as one that left; HTTP clients do not do that. Off POSIX
// systems the socket is not found and hung_up() is always false (the answer is computed whole,
// as before).
#include <httplib.h>

namespace tokenscope::server {

class PeerSocket {
  public:
    // The request's connection, or an unfound one (hung_up() then always false).
    static PeerSocket of(const httplib::Request& request);

    bool found() const { return fd_ >= 0; }
    // True once the peer has closed its end (read end-of-file) or the connection failed.
    bool hung_up() const;

  private:
    int fd_ = -1;
};

}  // namespace tokenscope::server
