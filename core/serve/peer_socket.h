// Is the client of this request still there? cpp-httplib 0.11 (Debian 12) gives a handler neither
// its socket nor `is_connection_closed` (added in later versions), and a handler that waits for
// the engine would otherwise notice a disconnect only when it writes. So the handler finds its own
// connection's descriptor once -- the TCP socket whose local and peer addresses are the request's
// (the 4-tuple names one connection, and the descriptor stays open while the handler runs) -- and
// then asks the kernel whether the peer has closed it.
#pragma once

#include <string>

namespace cc::serve {

class PeerSocket {
public:
    // Finds the connection (local_port, remote_addr:remote_port); not found = never reports closed.
    PeerSocket(const std::string& remote_addr, int remote_port, int local_port);
    bool found() const { return fd_ >= 0; }
    // True when the peer has closed (or reset) the connection. A peer that sent more bytes
    // (pipelining) is still open.
    bool closed() const;

private:
    int fd_ = -1;
};

}  // namespace cc::serve
