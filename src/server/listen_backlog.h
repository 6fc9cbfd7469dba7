// server: raises the accept backlog of an already-listening socket that the HTTP library created and
// does not expose (cpp-httplib 0.11 hard-codes a backlog of 5).
#pragma once

#include "core/status.h"

namespace dsv4::server {

inline constexpr int kListenBacklog = 1024;

// Finds this process's listening TCP socket(s) on `port` and calls listen() again with `backlog`
// (Linux updates the queue length of a listening socket). kNotFound if no listening socket has that port.
Status raise_listen_backlog(int port, int backlog);

}  // namespace dsv4::server
