// fuzz: entry points shared by the libFuzzer binaries (built with DSV4_FUZZ) and the corpus replay
// runner (built always, run by ctest -L unit), so every seed and minimized crasher is a regression test.
// Each returns 0 and aborts (DSV4_CHECK) if a parser accepts input that breaks its own guarantees.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4 {
class Tokenizer;
}  // namespace dsv4

namespace dsv4::fuzz {

int safetensors_entry(const uint8_t* data, size_t size);       // SafetensorsFile::parse on the bytes
int index_entry(const uint8_t* data, size_t size);             // bytes as model.safetensors.index.json
int config_entry(const uint8_t* data, size_t size);            // parse_model_config
int npy_entry(const uint8_t* data, size_t size);               // parse_npy (read_npy's parser)
int tokenizer_load_entry(const uint8_t* data, size_t size);    // Tokenizer::load_from_json, then encode/decode
int tokenizer_encode_entry(const uint8_t* data, size_t size);  // encode/decode/stream-decode round trips
int output_parser_entry(const uint8_t* data, size_t size);     // whole vs streaming parse_completion
int chat_render_entry(const uint8_t* data, size_t size);       // parse_chat_request_json, render_chat, encode_chat

// DeepSeek's tokenizer cut to 4000 merges (data/tokenizer_small.json), loaded once per process.
const Tokenizer& small_tokenizer();

}  // namespace dsv4::fuzz
