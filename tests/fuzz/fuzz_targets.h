// fuzz: entry points shared by the libFuzzer binaries (built with DSV4_FUZZ) and the corpus replay
// runner (built always, run by ctest -L unit), so every seed and minimized crasher is a regression test.
// Each returns 0 and aborts (DSV4_CHECK) if a parser accepts input that breaks its own guarantees.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4::fuzz {

int safetensors_entry(const uint8_t* data, size_t size);  // SafetensorsFile::parse on the bytes
int index_entry(const uint8_t* data, size_t size);        // bytes as model.safetensors.index.json, Checkpoint::open
int config_entry(const uint8_t* data, size_t size);       // parse_model_config
int npy_entry(const uint8_t* data, size_t size);          // parse_npy (read_npy's parser)

}  // namespace dsv4::fuzz
