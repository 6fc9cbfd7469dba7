// server: unguessable identifiers (completion ids, tool-call ids) from the kernel CSPRNG.
#pragma once

#include <string>

namespace dsv4::server {

// `prefix` + `n_chars` characters of [A-Za-z0-9] drawn from getrandom(2) (≈5.95 bits each).
std::string random_id(const std::string& prefix, int n_chars);

}  // namespace dsv4::server
