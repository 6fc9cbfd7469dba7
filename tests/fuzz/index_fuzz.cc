// fuzz: the bytes become model.safetensors.index.json in a scratch model directory that holds two valid
// shards (s1.safetensors: a F32[2], b I8[3]; s2.safetensors: c BF16[2]) and, beside the directory, a shard
// reachable only through ../ or a symlink. Checkpoint::open must reject or load consistently.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/check.h"
#include "fuzz_targets.h"
#include "io/safetensors.h"

namespace dsv4::fuzz {
namespace {

namespace fs = std::filesystem;

TensorToWrite tensor(const std::string& name, DType d, uint64_t n) {
  return {name, d, {n}, std::vector<std::byte>(n * dtype_size(d), std::byte{1})};
}

// Created once per process, removed at exit.
const fs::path& model_dir() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "dsv4-fuzz-index-XXXXXX").string();
    DSV4_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    const fs::path root = tmpl;
    fs::create_directory(root / "model");
    DSV4_CHECK(
        write_safetensors(root / "model/s1.safetensors", {tensor("a", DType::kF32, 2), tensor("b", DType::kI8, 3)})
            .is_ok());
    DSV4_CHECK(write_safetensors(root / "model/s2.safetensors", {tensor("c", DType::kBF16, 2)}).is_ok());
    DSV4_CHECK(write_safetensors(root / "outside.safetensors", {tensor("o", DType::kI8, 1)}).is_ok());
    fs::create_symlink("../outside.safetensors", root / "model/link.safetensors");
    static const std::string root_s = root.string();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(root_s, ec);
    });
    return root / "model";
  }();
  return dir;
}

}  // namespace

int index_entry(const uint8_t* data, size_t size) {
  const fs::path& dir = model_dir();
  {
    std::ofstream f(dir / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto ck = Checkpoint::open(dir);
  if (!ck.is_ok()) {
    DSV4_CHECK(!ck.status().rule().empty(), ck.status().to_string());
    return 0;
  }
  // Only the two real shards can ever load; nothing outside the directory.
  DSV4_CHECK(ck->find("o") == nullptr, "loaded a shard from outside the model directory");
  for (const TensorInfo& t : ck->tensors())
    DSV4_CHECK(t.shard >= 0 && static_cast<size_t>(t.shard) < ck->shard_paths().size());
  return 0;
}

}  // namespace dsv4::fuzz
