// io: safetensors parsing with strict validation, sharded checkpoints, and writing.
// Layout: u64 little-endian header length N | N bytes of JSON header | data section. Every tensor's
// data_offsets are relative to the data section; together they must tile it exactly.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/checked_math.h"

namespace dsv4 {
namespace {

using nlohmann::json;

constexpr size_t kMaxTensorNameBytes = 1024;
constexpr size_t kMaxIndexBytes = 64ull << 20;

Status bad(std::string_view rule, std::string_view source, std::string_view tensor, const std::string& what) {
  std::string msg(source);
  if (!tensor.empty()) msg += ": tensor '" + std::string(tensor) + "'";
  msg += ": " + what;
  return invalid_file(std::string(rule), msg);
}

// Maximum nesting depth of JSON text, counted outside string literals. Run before parsing so a deeply
// nested header is rejected without recursing into it.
int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') max_depth = std::max(max_depth, ++depth);
    else if (c == '}' || c == ']') --depth;
  }
  return max_depth;
}

// Parses JSON, rejecting duplicate keys in any object (nlohmann would silently keep the last one).
Result<json> parse_json_strict(std::string_view text, std::string_view source, std::string_view rule_prefix,
                               std::string* duplicate_key) {
  if (json_depth(text) > kMaxHeaderJsonDepth)
    return bad(std::string(rule_prefix) + ".header_too_deep", source, "",
               "JSON nesting deeper than " + std::to_string(kMaxHeaderJsonDepth));
  std::vector<std::set<std::string>> keys_by_depth;
  bool dup = false;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      if (static_cast<int>(keys_by_depth.size()) <= depth + 1) keys_by_depth.resize(depth + 2);
      keys_by_depth[depth + 1].clear();
    } else if (ev == json::parse_event_t::key) {
      if (static_cast<int>(keys_by_depth.size()) <= depth) keys_by_depth.resize(depth + 1);
      const std::string k = parsed.get<std::string>();
      if (!keys_by_depth[depth].insert(k).second && !dup) {
        dup = true;
        *duplicate_key = k;
      }
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return bad(std::string(rule_prefix) + ".header_json", source, "", "header is not valid JSON");
  if (dup) return bad(std::string(rule_prefix) + ".duplicate_key", source, *duplicate_key, "name appears twice");
  return j;
}

Result<uint64_t> json_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return invalid_file("", "");
}

bool is_plain_file_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

}  // namespace

Result<std::vector<TensorInfo>> SafetensorsFile::parse(std::span<const std::byte> file, std::string_view src) {
  if (file.size() < 8) return bad("safetensors.truncated", src, "", "file is shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);  // little-endian on every platform we build for
  if (n > kMaxSafetensorsHeaderBytes)
    return bad("safetensors.header_too_large", src, "",
               "header length " + std::to_string(n) + " exceeds the " + std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  if (n > file.size() - 8)
    return bad("safetensors.header_past_eof", src, "",
               "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(file.size()) + "-byte file");
  if (n < 2) return bad("safetensors.header_json", src, "", "header is empty");
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), n);
  std::string dup;
  DSV4_ASSIGN_OR_RETURN(json header, parse_json_strict(text, src, "safetensors", &dup));
  if (!header.is_object()) return bad("safetensors.header_not_object", src, "", "header is not a JSON object");

  const uint64_t data_size = file.size() - 8 - n;
  const std::byte* data_begin = file.data() + 8 + n;
  std::vector<TensorInfo> out;
  struct Range { uint64_t begin, end; size_t idx; };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) return bad("safetensors.metadata", src, "", "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (!m->is_string()) return bad("safetensors.metadata", src, "", "__metadata__ value '" + m.key() + "' is not a string");
      continue;
    }
    if (name.empty() || name.size() > kMaxTensorNameBytes)
      return bad("safetensors.name", src, "", "tensor name is empty or longer than 1024 bytes");
    const json& e = *it;
    if (!e.is_object()) return bad("safetensors.entry_not_object", src, name, "entry is not an object");
    for (auto f = e.begin(); f != e.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        return bad("safetensors.entry_field", src, name, "unknown field '" + f.key() + "'");
    if (!e.contains("dtype") || !e["dtype"].is_string())
      return bad("safetensors.dtype_missing", src, name, "missing or non-string dtype");
    const auto dtype = parse_dtype(e["dtype"].get<std::string>());
    if (!dtype) return bad("safetensors.dtype_unknown", src, name, "unsupported dtype '" + e["dtype"].get<std::string>() + "'");
    if (!e.contains("shape") || !e["shape"].is_array())
      return bad("safetensors.shape_missing", src, name, "missing or non-array shape");
    if (e["shape"].size() > kMaxTensorRank)
      return bad("safetensors.rank", src, name, "rank " + std::to_string(e["shape"].size()) + " exceeds " + std::to_string(kMaxTensorRank));
    TensorInfo t;
    t.name = name;
    t.dtype = *dtype;
    for (const auto& d : e["shape"]) {
      auto v = json_u64(d);
      if (!v) return bad("safetensors.shape_value", src, name, "shape holds a negative or non-integer value");
      t.shape.push_back(*v);
    }
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return bad("safetensors.offsets_missing", src, name, "data_offsets must be [begin, end]");
    auto b = json_u64(e["data_offsets"][0]);
    auto en = json_u64(e["data_offsets"][1]);
    if (!b || !en) return bad("safetensors.offsets_value", src, name, "data_offsets hold a negative or non-integer value");
    if (*b > *en) return bad("safetensors.offsets_order", src, name, "data_offsets begin > end");
    auto elems = checked_product(t.shape);
    auto bytes = elems ? checked_mul(*elems, dtype_size(t.dtype)) : std::nullopt;
    if (!bytes) return bad("safetensors.size_overflow", src, name, "shape × dtype size overflows 64 bits");
    if (*bytes != *en - *b)
      return bad("safetensors.byte_count", src, name,
                 "shape × dtype size = " + std::to_string(*bytes) + " bytes but data_offsets span " + std::to_string(*en - *b));
    if (*en > data_size)
      return bad("safetensors.offsets_past_eof", src, name,
                 "data_offsets end " + std::to_string(*en) + " is past the data section (" + std::to_string(data_size) + " bytes)");
    t.n_elements = *elems;
    t.data = std::span<const std::byte>(data_begin + *b, *en - *b);
    ranges.push_back({*b, *en, out.size()});
    out.push_back(std::move(t));
  }
  // Exact tiling: sorted by begin, ranges must abut with no gap or overlap and cover the data section.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (const Range& r : ranges) {
    const std::string& nm = out[r.idx].name;
    if (r.begin < cursor) return bad("safetensors.offsets_overlap", src, nm, "data overlaps the previous tensor");
    if (r.begin > cursor) return bad("safetensors.offsets_gap", src, nm, "gap of " + std::to_string(r.begin - cursor) + " bytes before this tensor");
    cursor = r.end;
  }
  if (cursor != data_size)
    return bad("safetensors.trailing_bytes", src, "",
               std::to_string(data_size - cursor) + " bytes in the data section belong to no tensor");
  std::sort(out.begin(), out.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  DSV4_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  SafetensorsFile f;
  DSV4_ASSIGN_OR_RETURN(f.tensors_, parse(mapped->bytes(), path.string()));
  // Metadata is small and already validated as string→string; parse it again cheaply.
  uint64_t n = 0;
  std::memcpy(&n, mapped->bytes().data(), 8);
  const std::string_view text(reinterpret_cast<const char*>(mapped->bytes().data() + 8), n);
  json header = json::parse(text.begin(), text.end(), nullptr, false);
  if (header.is_object() && header.contains("__metadata__"))
    for (auto m = header["__metadata__"].begin(); m != header["__metadata__"].end(); ++m)
      f.metadata_[m.key()] = m->get<std::string>();
  f.file_ = std::move(mapped);
  return f;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t s = 0;
  for (const auto& t : tensors_) s += t.data.size();
  return s;
}

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  Checkpoint ck;
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> index_map;  // tensor -> shard file name
  std::optional<uint64_t> index_total;
  fs::path dir;
  if (fs::is_regular_file(dir_or_file, ec)) {
    dir = dir_or_file.parent_path();
    shard_names.push_back(dir_or_file.filename().string());
  } else if (fs::is_directory(dir_or_file, ec)) {
    dir = dir_or_file;
    const fs::path index_path = dir / "model.safetensors.index.json";
    if (fs::exists(index_path, ec)) {
      DSV4_ASSIGN_OR_RETURN(auto idx_file, MappedFile::open(index_path));
      if (idx_file->size() > kMaxIndexBytes)
        return bad("index.too_large", index_path.string(), "", "index file exceeds 64 MiB");
      const std::string_view text(reinterpret_cast<const char*>(idx_file->bytes().data()), idx_file->size());
      std::string dup;
      DSV4_ASSIGN_OR_RETURN(json idx, parse_json_strict(text, index_path.string(), "index", &dup));
      if (!idx.is_object()) return bad("index.not_object", index_path.string(), "", "index is not a JSON object");
      if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
        return bad("index.weight_map", index_path.string(), "", "missing or non-object weight_map");
      std::set<std::string> shard_set;
      for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
        if (!it->is_string()) return bad("index.shard_name", index_path.string(), it.key(), "shard is not a string");
        const std::string shard = it->get<std::string>();
        if (!is_plain_file_name(shard))
          return bad("index.shard_name", index_path.string(), it.key(), "shard '" + shard + "' is not a plain file name in the model directory");
        index_map[it.key()] = shard;
        if (shard_set.insert(shard).second) shard_names.push_back(shard);
      }
      if (idx.contains("metadata") && idx["metadata"].is_object() && idx["metadata"].contains("total_size")) {
        auto ts = json_u64(idx["metadata"]["total_size"]);
        if (!ts) return bad("index.total_size", index_path.string(), "", "metadata.total_size is not a non-negative integer");
        index_total = *ts;
      }
      std::sort(shard_names.begin(), shard_names.end());
    } else {
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().extension() == ".safetensors") shard_names.push_back(entry.path().filename().string());
      std::sort(shard_names.begin(), shard_names.end());
    }
    if (shard_names.empty()) return not_found("checkpoint.no_weights", dir.string() + ": no .safetensors files");
  } else {
    return not_found("checkpoint.missing", dir_or_file.string() + ": no such file or directory");
  }

  const fs::path canon_dir = fs::weakly_canonical(dir.empty() ? fs::path(".") : dir, ec);
  std::map<std::string, int> seen;  // tensor -> shard
  for (const std::string& shard : shard_names) {
    const fs::path p = (dir.empty() ? fs::path(".") : dir) / shard;
    // A symlinked shard must still resolve inside the model directory.
    const fs::path canon = fs::weakly_canonical(p, ec);
    auto rel = canon.lexically_relative(canon_dir);
    if (ec || rel.empty() || *rel.begin() == "..")
      return bad("index.shard_escapes", p.string(), "", "shard resolves outside the model directory");
    DSV4_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(p));
    DSV4_ASSIGN_OR_RETURN(auto infos, SafetensorsFile::parse(mapped->bytes(), p.string()));
    const int shard_idx = static_cast<int>(ck.files_.size());
    for (auto& t : infos) {
      if (auto [it, inserted] = seen.emplace(t.name, shard_idx); !inserted)
        return bad("checkpoint.duplicate_tensor", p.string(), t.name,
                   "also present in " + ck.shard_paths_[it->second].string());
      if (!index_map.empty()) {
        auto im = index_map.find(t.name);
        if (im == index_map.end()) return bad("index.tensor_unlisted", p.string(), t.name, "tensor is not listed in the index");
        if (im->second != shard) return bad("index.tensor_wrong_shard", p.string(), t.name, "index places it in " + im->second);
      }
      t.shard = shard_idx;
      ck.tensors_.push_back(std::move(t));
    }
    ck.shard_paths_.push_back(p);
    ck.files_.push_back(std::move(mapped));
  }
  for (const auto& [name, shard] : index_map)
    if (!seen.count(name))
      return bad("index.tensor_missing", (dir / shard).string(), name, "listed in the index but absent from its shard");
  std::sort(ck.tensors_.begin(), ck.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  if (index_total && *index_total != ck.total_bytes())
    return bad("index.total_size", (dir / "model.safetensors.index.json").string(), "",
               "metadata.total_size " + std::to_string(*index_total) + " != " + std::to_string(ck.total_bytes()) + " bytes of tensors");
  return ck;
}

Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const auto elems = checked_product(t.shape);
    if (!elems || *elems * dtype_size(t.dtype) != t.bytes.size())
      return invalid_argument("safetensors.write_size", t.name + ": byte count does not match shape × dtype");
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // align the data section to 8 bytes
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return io_error("safetensors.write_open", tmp.string() + ": cannot open for writing");
    const uint64_t n = text.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    if (!f.good()) return io_error("safetensors.write", tmp.string() + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("safetensors.write_rename", path.string() + ": " + ec.message());
  return Status::ok();
}

Status write_sharded_checkpoint(const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
                                int n_shards) {
  if (n_shards < 1) return invalid_argument("safetensors.shards", "n_shards must be >= 1");
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.bytes.size();
  const uint64_t per_shard = (total + n_shards - 1) / n_shards;
  json weight_map = json::object();
  std::vector<TensorToWrite> current;
  uint64_t current_bytes = 0;
  int shard = 0;
  auto shard_name = [&](int i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n_shards);
    return std::string(buf);
  };
  auto flush = [&]() -> Status {
    DSV4_RETURN_IF_ERROR(write_safetensors(dir / shard_name(shard), current));
    for (const auto& t : current) weight_map[t.name] = shard_name(shard);
    current.clear();
    current_bytes = 0;
    ++shard;
    return Status::ok();
  };
  for (const auto& t : tensors) {
    if (current_bytes >= per_shard && shard < n_shards - 1) DSV4_RETURN_IF_ERROR(flush());
    current.push_back(t);
    current_bytes += t.bytes.size();
  }
  while (shard < n_shards) DSV4_RETURN_IF_ERROR(flush());
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::ofstream f(dir / "model.safetensors.index.json", std::ios::trunc);
  if (!f) return io_error("safetensors.write_index", (dir / "model.safetensors.index.json").string() + ": cannot open");
  f << index.dump(2);
  return f.good() ? Status::ok() : io_error("safetensors.write_index", "write failed");
}

}  // namespace dsv4
