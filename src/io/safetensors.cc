// io: safetensors parsing with strict validation, sharded checkpoints, and writing.
// Layout: u64 little-endian header length N | N bytes of JSON header | data section. Every tensor's
// data_offsets are relative to the data section; together they must tile it exactly.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/checked_math.h"
#include "io/residency_policy.h"
#include "io/strict_json.h"

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

// Parses an untrusted JSON document; `prefix` names the file kind in the rule ids ("safetensors", "index").
// A duplicate key of the top-level object gets `top_duplicate_rule` (a duplicate tensor name in a header).
Result<json> parse_json(std::string_view text, std::string_view source, const std::string& prefix,
                        const std::string& top_duplicate_rule) {
  StrictJson parsed = parse_strict_json(text, kMaxHeaderJsonDepth);
  switch (parsed.error) {
    case StrictJson::Error::kNone: return std::move(parsed.value);
    case StrictJson::Error::kTooDeep:
      return bad(prefix + ".json_too_deep", source, "", "JSON nesting deeper than " + std::to_string(kMaxHeaderJsonDepth));
    case StrictJson::Error::kSyntax: return bad(prefix + ".json_syntax", source, "", "not valid JSON");
    case StrictJson::Error::kDuplicateKey:
      if (parsed.duplicate_depth == 1)
        return bad(top_duplicate_rule, source, parsed.duplicate_key, "name appears twice");
      return bad(prefix + ".duplicate_key", source, "", "key '" + parsed.duplicate_key + "' appears twice in one object");
  }
  return bad(prefix + ".json_syntax", source, "", "not valid JSON");
}

// A non-negative JSON integer; `negative` tells a negative integer apart from a float, string, ...
std::optional<uint64_t> json_u64(const json& v, bool* negative) {
  *negative = false;
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    if (v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    *negative = true;
  } else if (v.is_number_float() && v.get<double>() < 0) {
    *negative = true;
  }
  return std::nullopt;
}

// Shard names in an index must name a file directly inside the model directory. Returns the rule a bad
// name breaks, or empty when the name is a plain file name.
std::string shard_name_rule(std::string_view name) {
  if (name.empty()) return "index.shard_empty";
  if (name.size() > 255) return "index.shard_too_long";
  if (name.front() == '/' || name.front() == '\\') return "index.shard_absolute";
  if (name == "." || name == ".." || name.starts_with("../") || name.starts_with("..\\")) return "index.shard_parent";
  for (char c : name) {
    if (c == '/' || c == '\\') return "index.shard_subdir";
    if (static_cast<unsigned char>(c) < 0x20) return "index.shard_chars";
  }
  return {};
}

bool has_control_char(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

// Validates one header entry (everything but its place in the data section).
Status parse_entry(const std::string& name, const json& e, uint64_t data_size, std::string_view src, TensorInfo& t,
                   uint64_t& begin, uint64_t& end) {
  if (name.empty()) return bad("safetensors.name_empty", src, "", "a tensor has an empty name");
  if (name.size() > kMaxTensorNameBytes)
    return bad("safetensors.name_too_long", src, name.substr(0, 64) + "...", "tensor name is longer than 1024 bytes");
  if (has_control_char(name)) return bad("safetensors.name_chars", src, "", "a tensor name holds control characters");
  if (!e.is_object()) return bad("safetensors.entry_not_object", src, name, "entry is not an object");
  for (auto f = e.begin(); f != e.end(); ++f)
    if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
      return bad("safetensors.entry_field", src, name, "unknown field '" + f.key() + "'");

  auto dt = e.find("dtype");
  if (dt == e.end()) return bad("safetensors.dtype_missing", src, name, "no dtype");
  if (!dt->is_string()) return bad("safetensors.dtype_type", src, name, "dtype is not a string");
  const auto dtype = parse_dtype(dt->get<std::string>());
  if (!dtype) return bad("safetensors.dtype_unknown", src, name, "unsupported dtype '" + dt->get<std::string>() + "'");

  auto sh = e.find("shape");
  if (sh == e.end()) return bad("safetensors.shape_missing", src, name, "no shape");
  if (!sh->is_array()) return bad("safetensors.shape_type", src, name, "shape is not an array");
  if (sh->size() > kMaxTensorRank)
    return bad("safetensors.rank", src, name, "rank " + std::to_string(sh->size()) + " exceeds " + std::to_string(kMaxTensorRank));
  t.name = name;
  t.dtype = *dtype;
  for (const auto& d : *sh) {
    bool negative = false;
    auto v = json_u64(d, &negative);
    if (!v) {
      if (negative) return bad("safetensors.shape_negative", src, name, "shape holds a negative value");
      return bad("safetensors.shape_not_integer", src, name, "shape holds a value that is not an integer");
    }
    t.shape.push_back(*v);
  }

  auto off = e.find("data_offsets");
  if (off == e.end()) return bad("safetensors.offsets_missing", src, name, "no data_offsets");
  if (!off->is_array()) return bad("safetensors.offsets_type", src, name, "data_offsets is not an array");
  if (off->size() != 2)
    return bad("safetensors.offsets_arity", src, name, "data_offsets has " + std::to_string(off->size()) + " values, not [begin, end]");
  bool neg_b = false, neg_e = false;
  auto b = json_u64((*off)[0], &neg_b);
  auto en = json_u64((*off)[1], &neg_e);
  if (neg_b || neg_e) return bad("safetensors.offsets_negative", src, name, "data_offsets hold a negative value");
  if (!b || !en) return bad("safetensors.offsets_not_integer", src, name, "data_offsets hold a value that is not an integer");
  if (*b > *en) return bad("safetensors.offsets_order", src, name, "data_offsets begin > end");

  // Every partial product must fit, also when a zero dim makes the element count 0: strides computed
  // from such a shape would overflow downstream.
  std::optional<uint64_t> bytes = dtype_size(t.dtype);
  for (uint64_t d : t.shape)
    if (bytes) bytes = checked_mul(*bytes, std::max<uint64_t>(d, 1));
  if (!bytes) return bad("safetensors.size_overflow", src, name, "shape × dtype size overflows 64 bits");
  const uint64_t elems = *checked_product(t.shape);  // <= bytes, cannot overflow
  const uint64_t nbytes = elems * dtype_size(t.dtype);
  if (nbytes != *en - *b)
    return bad("safetensors.byte_count", src, name,
               "shape × dtype size = " + std::to_string(nbytes) + " bytes but data_offsets span " + std::to_string(*en - *b));
  if (*en > data_size)
    return bad("safetensors.offsets_past_eof", src, name,
               "data_offsets end " + std::to_string(*en) + " is past the data section (" + std::to_string(data_size) + " bytes)");
  t.n_elements = elems;
  begin = *b;
  end = *en;
  return Status::ok();
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
  if (n == 0) return bad("safetensors.header_empty", src, "", "header length is 0");
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), n);
  DSV4_ASSIGN_OR_RETURN(json header, parse_json(text, src, "safetensors", "safetensors.duplicate_tensor"));
  if (!header.is_object()) return bad("safetensors.header_not_object", src, "", "header is not a JSON object");

  const uint64_t data_size = file.size() - 8 - n;
  const std::byte* data_begin = file.data() + 8 + n;
  std::vector<TensorInfo> out;
  struct Range { uint64_t begin, end; size_t idx; };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("safetensors.metadata_not_object", src, "", "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (!m->is_string()) return bad("safetensors.metadata_value", src, "", "__metadata__ value '" + m.key() + "' is not a string");
      continue;
    }
    TensorInfo t;
    uint64_t b = 0, e = 0;
    DSV4_RETURN_IF_ERROR(parse_entry(it.key(), *it, data_size, src, t, b, e));
    t.data = std::span<const std::byte>(data_begin + b, e - b);
    ranges.push_back({b, e, out.size()});
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
  if (it == tensors_.end() || it->name != name) return nullptr;
  if (progress_) note_found(*it);
  return &*it;
}

// Behind a pointer so Checkpoint stays movable (the mutex is not).
struct Checkpoint::ProgressState {
  Progress callback;
  std::mutex mu;
  std::vector<bool> reached;  // by index into tensors_
  uint64_t done = 0;
  uint64_t total = 0;
};

void Checkpoint::set_progress(Progress progress) {
  if (!progress) {
    progress_.reset();
    return;
  }
  progress_ = std::make_shared<ProgressState>();
  progress_->callback = std::move(progress);
  progress_->reached.assign(tensors_.size(), false);
  progress_->total = total_bytes();
}

void Checkpoint::note_found(const TensorInfo& t) const {
  ProgressState& p = *progress_;
  std::lock_guard<std::mutex> lock(p.mu);
  const auto i = static_cast<size_t>(&t - tensors_.data());
  if (p.reached[i]) return;
  p.reached[i] = true;
  p.done += t.data.size();
  p.callback(p.done, p.total);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t s = 0;
  for (const auto& t : tensors_) s += t.data.size();
  return s;
}

std::vector<AddressRange> Checkpoint::resident_ranges() const {
  std::vector<AddressRange> r;
  for (const auto& f : files_) {
    if (f->size() == 0) continue;
    const auto b = reinterpret_cast<uintptr_t>(f->bytes().data());
    r.emplace_back(b, b + f->size());
  }
  return r;
}

std::optional<uint64_t> Checkpoint::resident_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) {
    const auto r = f->resident_bytes();
    if (!r) return std::nullopt;
    n += *r;
  }
  return n;
}

namespace {

struct IndexFile {
  std::vector<std::string> shard_names;          // sorted, unique
  std::map<std::string, std::string> tensor_to_shard;
  std::optional<uint64_t> total_size;
};

Result<IndexFile> read_index(const std::filesystem::path& index_path) {
  const std::string src = index_path.string();
  DSV4_ASSIGN_OR_RETURN(auto idx_file, MappedFile::open(index_path));
  if (idx_file->size() > kMaxIndexBytes) return bad("index.too_large", src, "", "index file exceeds 64 MiB");
  const std::string_view text(reinterpret_cast<const char*>(idx_file->bytes().data()), idx_file->size());
  DSV4_ASSIGN_OR_RETURN(json idx, parse_json(text, src, "index", "index.duplicate_key"));
  if (!idx.is_object()) return bad("index.not_object", src, "", "index is not a JSON object");
  auto wm = idx.find("weight_map");
  if (wm == idx.end()) return bad("index.weight_map_missing", src, "", "no weight_map");
  if (!wm->is_object()) return bad("index.weight_map_type", src, "", "weight_map is not an object");
  if (wm->empty()) return bad("index.weight_map_empty", src, "", "weight_map lists no tensors");
  IndexFile out;
  std::set<std::string> shard_set;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return bad("index.shard_type", src, it.key(), "shard is not a string");
    const std::string shard = it->get<std::string>();
    if (std::string rule = shard_name_rule(shard); !rule.empty())
      return bad(rule, src, it.key(), "shard '" + shard + "' is not a plain file name in the model directory");
    out.tensor_to_shard[it.key()] = shard;
    shard_set.insert(shard);
  }
  out.shard_names.assign(shard_set.begin(), shard_set.end());
  if (auto md = idx.find("metadata"); md != idx.end()) {
    if (!md->is_object()) return bad("index.metadata_type", src, "", "metadata is not an object");
    if (auto ts = md->find("total_size"); ts != md->end()) {
      bool negative = false;
      auto v = json_u64(*ts, &negative);
      if (!v) return bad("index.total_size_type", src, "", "metadata.total_size is not a non-negative integer");
      out.total_size = *v;
    }
  }
  return out;
}

}  // namespace

const char* resident_mode_name(const ResidencyChoice& c) {
  if (c.copied_bytes > 0 && c.mapped_bytes > 0) return "mixed";
  return c.copied_bytes > 0 ? "copy" : "mmap";
}

Result<ResidencyChoice> choose_residency(const CheckpointOptions& options, uint64_t file_bytes) {
  ResidencyChoice c;
  c.requested = options.residency;
  c.file_bytes = file_bytes;
  c.mem_available = options.mem_available ? options.mem_available() : mem_available_bytes();
  c.proactive_reclaim = proactive_reclaim_active();
  const ResidencyFacts facts{file_bytes, c.mem_available, lockable_bytes(), c.proactive_reclaim};
  DSV4_ASSIGN_OR_RETURN(const ResidencyDecision d,
                        decide_residency({options.residency, options.populate, options.auto_copy_fraction}, facts));
  c.resolved = d.resolved;
  c.populate = d.populate;
  c.lock = d.lock;
  c.reason = d.reason;
  return c;
}

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& dir_or_file, const CheckpointOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  Checkpoint ck;
  std::vector<std::string> shard_names;
  IndexFile index;
  bool has_index = false;
  fs::path dir;
  const fs::path index_name = "model.safetensors.index.json";
  if (fs::is_regular_file(dir_or_file, ec)) {
    dir = dir_or_file.parent_path();
    shard_names.push_back(dir_or_file.filename().string());
  } else if (fs::is_directory(dir_or_file, ec)) {
    dir = dir_or_file;
    if (fs::exists(dir / index_name, ec)) {
      DSV4_ASSIGN_OR_RETURN(index, read_index(dir / index_name));
      has_index = true;
      shard_names = index.shard_names;
    } else {
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().extension() == ".safetensors") shard_names.push_back(entry.path().filename().string());
      std::sort(shard_names.begin(), shard_names.end());
    }
    if (shard_names.empty()) return not_found("checkpoint.no_weights", dir.string() + ": no .safetensors files");
  } else {
    return not_found("checkpoint.missing", dir_or_file.string() + ": no such file or directory");
  }

  if (dir.empty()) dir = ".";
  const fs::path canon_dir = fs::weakly_canonical(dir, ec);
  if (ec) return io_error("checkpoint.dir", dir.string() + ": " + ec.message());
  uint64_t file_bytes = 0;
  for (const std::string& shard : shard_names) {
    const auto n = fs::file_size(dir / shard, ec);  // a missing shard is reported below, by name
    if (!ec) file_bytes += n;
  }
  DSV4_ASSIGN_OR_RETURN(ck.residency_, choose_residency(options, file_bytes));
  FileLoadOptions load;
  load.residency = ck.residency_.resolved;
  load.populate = ck.residency_.populate;
  load.lock = ck.residency_.lock;
  load.chunk_bytes = options.copy_chunk_bytes;
  load.placement = options.placement;
  ck.residency_.placement = options.placement;
  // Pass 1: map (or copy) and validate every shard on its own — the same validation for every residency.
  std::vector<std::vector<TensorInfo>> per_shard;
  for (const std::string& shard : shard_names) {
    const fs::path p = dir / shard;
    if (has_index && !fs::exists(fs::symlink_status(p, ec)))
      return not_found("index.shard_missing", (dir / index_name).string() + ": shard '" + shard + "' does not exist");
    // A shard the index names must resolve inside the model directory, also through symlinks (a file
    // named directly, or found by listing the directory, is the user's own choice).
    if (has_index) {
      const fs::path canon = fs::weakly_canonical(p, ec);
      const fs::path rel = ec ? fs::path() : canon.lexically_relative(canon_dir);
      if (rel.empty() || *rel.begin() == "..")
        return bad("index.shard_escapes", p.string(), "", "shard resolves outside the model directory");
    }
    DSV4_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(p, load));
    DSV4_ASSIGN_OR_RETURN(auto infos, SafetensorsFile::parse(mapped->bytes(), p.string()));
    (mapped->residency() == Residency::kCopy ? ck.residency_.copied_bytes : ck.residency_.mapped_bytes) += mapped->size();
    if (ck.residency_.placement_note.empty()) ck.residency_.placement_note = mapped->placement_note();
    if (mapped->locked()) ck.residency_.locked_bytes += mapped->size();
    if (ck.residency_.lock_note.empty()) ck.residency_.lock_note = mapped->lock_note();
    ck.shard_paths_.push_back(p);
    ck.files_.push_back(std::move(mapped));
    per_shard.push_back(std::move(infos));
  }
  // Pass 2: no tensor in two shards (checked over all shards first, so the rule does not depend on
  // which shard sorts first), then agreement with the index in both directions.
  std::map<std::string_view, int> seen;  // tensor -> shard
  for (size_t s = 0; s < per_shard.size(); ++s)
    for (const TensorInfo& t : per_shard[s])
      if (auto [it, inserted] = seen.emplace(t.name, static_cast<int>(s)); !inserted)
        return bad("checkpoint.duplicate_tensor", ck.shard_paths_[s].string(), t.name,
                   "also present in " + ck.shard_paths_[static_cast<size_t>(it->second)].string());
  if (has_index) {
    for (size_t s = 0; s < per_shard.size(); ++s)
      for (const TensorInfo& t : per_shard[s]) {
        auto im = index.tensor_to_shard.find(t.name);
        if (im == index.tensor_to_shard.end())
          return bad("index.tensor_unlisted", ck.shard_paths_[s].string(), t.name, "tensor is not listed in the index");
        if (im->second != shard_names[s])
          return bad("index.tensor_wrong_shard", ck.shard_paths_[s].string(), t.name, "index places it in " + im->second);
      }
    for (const auto& [name, shard] : index.tensor_to_shard)
      if (!seen.count(name))
        return bad("index.tensor_missing", (dir / shard).string(), name, "listed in the index but absent from its shard");
  }
  for (size_t s = 0; s < per_shard.size(); ++s)
    for (TensorInfo& t : per_shard[s]) {
      t.shard = static_cast<int>(s);
      ck.tensors_.push_back(std::move(t));
    }
  std::sort(ck.tensors_.begin(), ck.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  if (index.total_size && *index.total_size != ck.total_bytes())
    return bad("index.total_size", (dir / index_name).string(), "",
               "metadata.total_size " + std::to_string(*index.total_size) + " != " + std::to_string(ck.total_bytes()) + " bytes of tensors");
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
