// server: notices that an HTTP client has gone away while its request is still generating, so the
// engine can cancel it (reliability.md §B3). cpp-httplib 0.11 does not hand handlers the connection's
// socket, so the socket is found by its address 4-tuple among the process's descriptors.
#pragma once

#include <string>

namespace dsv4::server {

class ConnectionWatch {
 public:
  // Looks up the server-side socket whose local and peer addresses match. If none is found (no /proc),
  // peer_closed() always answers false and a disconnect is noticed on the next failed write instead.
  ConnectionWatch(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  // True once the peer has closed or reset the connection. Never blocks.
  bool peer_closed() const;
  bool watching() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace dsv4::server
