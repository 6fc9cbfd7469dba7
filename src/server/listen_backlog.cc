// server: re-listen with a larger backlog, locating the socket through /proc/self/fd.
#include "server/listen_backlog.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace dsv4::server {

Status raise_listen_backlog(int port, int backlog) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return not_found("server.listen_socket", "cannot list /proc/self/fd");
  int raised = 0;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd_long = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    const int fd = static_cast<int>(fd_long);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) continue;
    sockaddr_storage ss{};
    socklen_t sl = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) continue;
    int p = -1;
    if (ss.ss_family == AF_INET) p = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    if (ss.ss_family == AF_INET6) p = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    if (p == port && ::listen(fd, backlog) == 0) ++raised;
  }
  ::closedir(dir);
  if (raised == 0) return not_found("server.listen_socket", "no listening socket on port " + std::to_string(port));
  return Status::ok();
}

}  // namespace dsv4::server
