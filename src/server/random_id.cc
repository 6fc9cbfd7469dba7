// server: CSPRNG ids. getrandom(2) reads the kernel's urandom pool; a predictable id would let one client
// guess another's tool-call ids, so std::mt19937 or time seeds are not acceptable here.
#include "server/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "core/check.h"

namespace dsv4::server {

std::string random_id(const std::string& prefix, int n_chars) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out = prefix;
  out.reserve(prefix.size() + n_chars);
  std::vector<uint8_t> buf(64);
  size_t pos = buf.size();
  while (static_cast<int>(out.size() - prefix.size()) < n_chars) {
    if (pos == buf.size()) {
      size_t got = 0;
      while (got < buf.size()) {
        const ssize_t r = ::getrandom(buf.data() + got, buf.size() - got, 0);
        if (r < 0 && errno == EINTR) continue;
        DSV4_CHECK(r > 0, "getrandom failed");
        got += static_cast<size_t>(r);
      }
      pos = 0;
    }
    const uint8_t b = buf[pos++];
    // Rejection sampling keeps the 62 symbols uniform (248 = 4 * 62).
    if (b < 248) out.push_back(kAlphabet[b % 62]);
  }
  return out;
}

}  // namespace dsv4::server
