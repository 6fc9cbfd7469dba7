// tokenizer: reading and validating tokenizer.json into a TokenizerModel. Every rule a file can break
// has its own `tokenizer.*` rule id; features outside the byte-level BPE family are kUnimplemented.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_model.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace tok {

namespace {

using nlohmann::json;

// o[key] as a string, or "" when absent or not a string (const operator[] on a missing key is UB).
std::string str_field(const json& o, const char* key) {
  if (!o.is_object()) return "";
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}
const json& field(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it != o.end() ? *it : kNull;
}

// Ids beyond this are refused: no tokenizer of this family comes near, and it bounds the tables
// allocated from the file (reliability §A2).
constexpr int64_t kMaxId = (1 << 24) - 1;
constexpr size_t kMaxTokenBytes = 1 << 16;

void append_cp(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Inverse of byte_level_char for the 256 stand-ins, -1 for other code points.
int byte_of_char(uint32_t cp) {
  static const auto table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_level_char(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

// HF's ByteLevel decoder: a token whose characters are all byte stand-ins decodes to those bytes;
// any other token (e.g. "<｜User｜>") decodes to its own UTF-8.
std::string token_bytes_of(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Step st = next_utf8_unit(text, i);
    if (st.kind != Utf8Unit::kValid) return text;
    uint32_t cp;
    const auto* p = reinterpret_cast<const unsigned char*>(text.data() + i);
    if (st.len == 1)
      cp = p[0];
    else if (st.len == 2)
      cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    else if (st.len == 3)
      cp = ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    else
      return text;
    const int b = byte_of_char(cp);
    if (b < 0) return text;
    out.push_back(static_cast<char>(b));
    i += st.len;
  }
  return out;
}

class Loader {
 public:
  Loader(const std::string& origin) : origin_(origin) {}

  Status bad(const std::string& rule, const std::string& what) const {
    return invalid_file("tokenizer." + rule, origin_ + ": " + what);
  }
  Status unsupported(const std::string& rule, const std::string& what) const {
    return unimplemented("tokenizer." + rule, origin_ + ": " + what);
  }

  Status check_id(const json& v, const std::string& where, int32_t& out) const {
    if (!v.is_number_integer()) return bad("bad_id", where + ": id is not an integer");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > kMaxId)
      return bad("id_out_of_range",
                 where + ": id " + std::to_string(id) + " is outside [0, " + std::to_string(kMaxId) + "]");
    out = static_cast<int32_t>(id);
    return Status::ok();
  }

  Status set_token(TokenizerModel& m, int32_t id, const std::string& text, uint8_t flags) const {
    if (static_cast<size_t>(id) >= m.id_to_text.size()) {
      m.id_to_text.resize(id + 1);
      m.id_to_bytes.resize(id + 1);
      m.id_flags.resize(id + 1);
    }
    m.id_to_text[id] = text;
    m.id_to_bytes[id] = token_bytes_of(text);
    m.id_flags[id] |= flags;
    return Status::ok();
  }

  Status compile(const std::string& pattern, bool literal, const std::string& where, Regex& out) const {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // PCRE2_LITERAL allows only a few companion options (UCP is not one of them, nor needed).
    const uint32_t opts = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
    if (!is_valid_utf8(pattern)) return bad("bad_regex", where + ": pattern is not valid UTF-8");
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &err_off, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return bad("bad_regex", where + ": invalid regex at offset " + std::to_string(err_off) + ": " +
                                  reinterpret_cast<const char*>(msg));
    }
    // JIT is an optimisation: without it (unsupported CPU) pcre2_match interprets the same pattern.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    out = Regex(code);
    return Status::ok();
  }

  Status load_model(const json& model, TokenizerModel& m) const {
    if (!model.is_object()) return bad("missing_model", "no \"model\" object");
    if (model.contains("type") && str_field(model, "type") != "BPE")
      return unsupported("unsupported_model", "model type " + model["type"].dump() + " (only BPE is supported)");
    auto non_null = [&](const char* key) { return model.contains(key) && !model[key].is_null(); };
    if (non_null("dropout") && !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
      return unsupported("unsupported_model", "BPE dropout");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (non_null(key) && !(model[key].is_string() && model[key].get<std::string>().empty()))
        return unsupported("unsupported_model", std::string("BPE ") + key);
    }
    if (non_null("byte_fallback") && model["byte_fallback"] != false)
      return unsupported("unsupported_model", "BPE byte_fallback (byte-level BPE needs none)");
    if (non_null("ignore_merges")) {
      if (!model["ignore_merges"].is_boolean()) return bad("bad_model", "ignore_merges is not a boolean");
      m.ignore_merges = model["ignore_merges"].get<bool>();
    }

    const auto vit = model.find("vocab");
    if (vit == model.end() || !vit->is_object()) return bad("bad_vocab", "model.vocab is not an object");
    for (auto it = vit->begin(); it != vit->end(); ++it) {
      int32_t id;
      DSV4_RETURN_IF_ERROR(check_id(it.value(), "vocab entry " + json(it.key()).dump(), id));
      if (it.key().empty()) return bad("bad_vocab", "empty token string in vocab");
      if (it.key().size() > kMaxTokenBytes) return bad("bad_vocab", "token longer than 64 KiB in vocab");
      if (static_cast<size_t>(id) < m.id_to_text.size() && !m.id_to_text[id].empty())
        return bad("duplicate_id", "id " + std::to_string(id) + " is used by both " + json(m.id_to_text[id]).dump() +
                                       " and " + json(it.key()).dump());
      DSV4_RETURN_IF_ERROR(set_token(m, id, it.key(), 0));
      m.text_to_id.emplace(it.key(), id);
    }
    if (m.text_to_id.empty()) return bad("bad_vocab", "empty vocab");

    // The 256 single-byte tokens are where every BPE word starts.
    for (int b = 0; b < 256; ++b) {
      std::string s;
      append_cp(byte_level_char(static_cast<uint8_t>(b)), s);
      const auto it = m.text_to_id.find(s);
      if (it == m.text_to_id.end())
        return bad("missing_byte_token",
                   "vocab lacks the byte-level token for byte " + std::to_string(b) + " (" + s + ")");
      m.byte_to_id[b] = it->second;
    }

    const auto mit = model.find("merges");
    if (mit == model.end() || !mit->is_array()) return bad("bad_merges", "model.merges is not an array");
    m.merges.reserve(mit->size());
    int32_t rank = 0;
    for (const json& entry : *mit) {
      std::string a, b;
      const std::string where = "merge #" + std::to_string(rank + 1);
      if (entry.is_string()) {
        // HF: a string merge is exactly two parts separated by one space.
        const std::string& s = entry.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return bad("bad_merges", where + " " + entry.dump() + " is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
        a = entry[0].get<std::string>();
        b = entry[1].get<std::string>();
      } else {
        return bad("bad_merges", where + " is neither \"a b\" nor [\"a\", \"b\"]");
      }
      const auto ia = m.text_to_id.find(a), ib = m.text_to_id.find(b), iab = m.text_to_id.find(a + b);
      if (ia == m.text_to_id.end() || ib == m.text_to_id.end())
        return bad("bad_merges", where + " " + entry.dump() + " uses a token missing from the vocab");
      if (iab == m.text_to_id.end())
        return bad("bad_merges", where + " " + entry.dump() + " produces a token missing from the vocab");
      m.merges.insert_or_assign(ia->second, ib->second, MergeInfo{rank, iab->second});  // later rank wins, as HF
      ++rank;
    }
    if (m.ignore_merges) {
      for (const auto& [text, id] : m.text_to_id) m.bytes_to_id.emplace(m.id_to_bytes[id], id);
    }
    return Status::ok();
  }

  Status load_added(const json& root, TokenizerModel& m) const {
    const auto ait = root.find("added_tokens");
    if (ait == root.end() || ait->is_null()) return Status::ok();
    if (!ait->is_array()) return bad("bad_added_tokens", "added_tokens is not an array");
    std::vector<bool> seen;
    for (const json& t : *ait) {
      if (!t.is_object()) return bad("bad_added_tokens", "an added token is not an object");
      int32_t id;
      DSV4_RETURN_IF_ERROR(check_id(field(t, "id"), "added token", id));
      if (!t.contains("content") || !t["content"].is_string() || t["content"].get<std::string>().empty())
        return bad("bad_added_tokens", "added token " + std::to_string(id) + " has no content");
      const std::string content = t["content"].get<std::string>();
      if (content.size() > kMaxTokenBytes) return bad("bad_added_tokens", "added token longer than 64 KiB");
      if (!is_valid_utf8(content))
        return bad("bad_added_tokens", "added token " + std::to_string(id) + " is not UTF-8");
      auto flag = [&](const char* key, bool def) -> Result<bool> {
        if (!t.contains(key) || t[key].is_null()) return def;
        if (!t[key].is_boolean())
          return bad("bad_added_tokens", std::string("added token field ") + key + " is not a boolean");
        return t[key].get<bool>();
      };
      DSV4_ASSIGN_OR_RETURN(const bool special, flag("special", false));
      DSV4_ASSIGN_OR_RETURN(const bool normalized, flag("normalized", !special));
      for (const char* key : {"lstrip", "rstrip", "single_word"}) {
        DSV4_ASSIGN_OR_RETURN(const bool on, flag(key, false));
        if (on) return unsupported("unsupported_added_token", "added token " + json(content).dump() + " sets " + key);
      }
      if (static_cast<size_t>(id) >= seen.size()) seen.resize(id + 1);
      if (seen[id]) return bad("duplicate_id", "added token id " + std::to_string(id) + " appears twice");
      seen[id] = true;
      // An added token may restate a vocab entry (ids 0-2 here) but not take another token's id.
      if (static_cast<size_t>(id) < m.id_to_text.size() && !m.id_to_text[id].empty() && m.id_to_text[id] != content)
        return bad("duplicate_id", "added token " + json(content).dump() + " reuses id " + std::to_string(id) + " of " +
                                       json(m.id_to_text[id]).dump());
      const auto existing = m.text_to_id.find(content);
      if (existing != m.text_to_id.end() && existing->second != id)
        return bad("duplicate_token", "added token " + json(content).dump() + " has id " + std::to_string(id) +
                                          " but the vocab gives it " + std::to_string(existing->second));
      DSV4_RETURN_IF_ERROR(
          set_token(m, id, content, TokenizerModel::kAdded | (special ? TokenizerModel::kSpecial : 0)));
      m.text_to_id.emplace(content, id);
      (normalized ? m.added_normalized : m.added_raw).insert(content, id);
    }
    return Status::ok();
  }

  Status load_normalizer(const json& root) const {
    const auto it = root.find("normalizer");
    if (it == root.end() || it->is_null()) return Status::ok();
    if (str_field(*it, "type") == "Sequence" && field(*it, "normalizers").is_array() &&
        field(*it, "normalizers").empty())
      return Status::ok();
    return unsupported("unsupported_normalizer",
                       "normalizer " + it->dump().substr(0, 200) + " (only none is supported)");
  }

  Status load_byte_level(const json& step, TokenizerModel& m, bool& seen) const {
    seen = true;
    auto flag = [&](const char* key, bool def) -> Result<bool> {
      if (!step.contains(key) || step[key].is_null()) return def;
      if (!step[key].is_boolean())
        return bad("bad_pre_tokenizer", std::string("ByteLevel.") + key + " is not a boolean");
      return step[key].get<bool>();
    };
    DSV4_ASSIGN_OR_RETURN(m.byte_level_add_prefix_space, flag("add_prefix_space", true));
    DSV4_ASSIGN_OR_RETURN(m.byte_level_use_regex, flag("use_regex", true));
    if (m.byte_level_use_regex) {
      // GPT-2's pattern, which HF's ByteLevel applies when use_regex is on.
      DSV4_RETURN_IF_ERROR(compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                                   false, "ByteLevel regex", m.gpt2_regex));
    }
    return Status::ok();
  }

  Status load_split(const json& step, TokenizerModel& m, size_t index) const {
    const std::string where = "pre_tokenizer step " + std::to_string(index);
    SplitStep s;
    const auto pit = step.find("pattern");
    if (pit == step.end() || !pit->is_object()) return bad("bad_pre_tokenizer", where + ": Split has no pattern");
    if (pit->contains("Regex") && (*pit)["Regex"].is_string()) {
      DSV4_RETURN_IF_ERROR(compile((*pit)["Regex"].get<std::string>(), false, where, s.regex));
    } else if (pit->contains("String") && (*pit)["String"].is_string()) {
      if ((*pit)["String"].get<std::string>().empty()) return bad("bad_pre_tokenizer", where + ": empty Split string");
      DSV4_RETURN_IF_ERROR(compile((*pit)["String"].get<std::string>(), true, where, s.regex));
    } else {
      return bad("bad_pre_tokenizer", where + ": pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    const std::string behavior =
        step.contains("behavior") && step["behavior"].is_string() ? step["behavior"].get<std::string>() : "";
    if (behavior == "Isolated")
      s.behavior = SplitBehavior::kIsolated;
    else if (behavior == "Removed")
      s.behavior = SplitBehavior::kRemoved;
    else if (behavior == "MergedWithPrevious")
      s.behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext")
      s.behavior = SplitBehavior::kMergedWithNext;
    else if (behavior == "Contiguous")
      s.behavior = SplitBehavior::kContiguous;
    else
      return bad("bad_pre_tokenizer", where + ": unknown Split behavior \"" + behavior + "\"");
    if (step.contains("invert")) {
      if (!step["invert"].is_boolean()) return bad("bad_pre_tokenizer", where + ": invert is not a boolean");
      s.invert = step["invert"].get<bool>();
    }
    m.splits.push_back(std::move(s));
    return Status::ok();
  }

  Status load_pre_tokenizer(const json& root, TokenizerModel& m) const {
    const auto it = root.find("pre_tokenizer");
    if (it == root.end() || !it->is_object())
      return unsupported("unsupported_pre_tokenizer", "no pre_tokenizer: byte-level BPE needs a ByteLevel step");
    std::vector<const json*> steps;
    if (str_field(*it, "type") == "Sequence") {
      const auto& list = field(*it, "pretokenizers");
      if (!list.is_array()) return bad("bad_pre_tokenizer", "Sequence.pretokenizers is not an array");
      for (const json& s : list) steps.push_back(&s);
    } else {
      steps.push_back(&*it);
    }
    bool byte_level = false;
    for (size_t i = 0; i < steps.size(); ++i) {
      const json& s = *steps[i];
      if (!s.is_object() || !s.contains("type")) return bad("bad_pre_tokenizer", "a pre_tokenizer step has no type");
      if (byte_level) return unsupported("unsupported_pre_tokenizer", "a step after ByteLevel");
      if (str_field(s, "type") == "Split") {
        DSV4_RETURN_IF_ERROR(load_split(s, m, i));
      } else if (str_field(s, "type") == "ByteLevel") {
        DSV4_RETURN_IF_ERROR(load_byte_level(s, m, byte_level));
      } else {
        return unsupported("unsupported_pre_tokenizer", "pre_tokenizer type " + s["type"].dump());
      }
    }
    if (!byte_level)
      return unsupported("unsupported_pre_tokenizer", "no ByteLevel step (only byte-level BPE is supported)");
    return Status::ok();
  }

  Status load_decoder(const json& root) const {
    const auto it = root.find("decoder");
    if (it == root.end() || it->is_null()) return Status::ok();
    if (str_field(*it, "type") == "ByteLevel") return Status::ok();
    return unsupported("unsupported_decoder",
                       "decoder " + it->dump().substr(0, 200) + " (only ByteLevel is supported)");
  }

 private:
  std::string origin_;
};

}  // namespace

uint32_t byte_level_char(uint8_t b) {
  // GPT-2 bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes map
  // in order onto U+0100.. so every byte has a visible, non-space character.
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
      t[c] = printable ? static_cast<uint32_t>(c) : next++;
    }
    return t;
  }();
  return table[b];
}

void TokenTrie::insert(std::string_view s, int32_t id) {
  int32_t node = 0;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    auto& kids = nodes_[node].children;
    auto it =
        std::lower_bound(kids.begin(), kids.end(), c, [](const auto& kv, unsigned char x) { return kv.first < x; });
    if (it != kids.end() && it->first == c) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes_.size());
      kids.insert(it, {c, child});
      nodes_.emplace_back();  // may reallocate: `kids` is not used after this
      node = child;
    }
  }
  nodes_[node].token = id;
  first_[static_cast<unsigned char>(s[0])] = true;
}

std::pair<size_t, int32_t> TokenTrie::longest_prefix(std::string_view s) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto& kids = nodes_[node].children;
    auto it =
        std::lower_bound(kids.begin(), kids.end(), c, [](const auto& kv, unsigned char x) { return kv.first < x; });
    if (it == kids.end() || it->first != c) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = {i + 1, nodes_[node].token};
  }
  return best;
}

}  // namespace tok

Result<Tokenizer> Tokenizer::load_from_json(std::string_view json_text, const std::string& origin) {
  tok::Loader loader(origin);
  nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return loader.bad("bad_json", "not valid JSON");
  if (!root.is_object()) return loader.bad("bad_json", "the top level is not an object");
  auto m = std::make_unique<tok::TokenizerModel>();
  DSV4_RETURN_IF_ERROR(loader.load_normalizer(root));
  DSV4_RETURN_IF_ERROR(loader.load_model(tok::field(root, "model"), *m));
  DSV4_RETURN_IF_ERROR(loader.load_added(root, *m));
  DSV4_RETURN_IF_ERROR(loader.load_pre_tokenizer(root, *m));
  DSV4_RETURN_IF_ERROR(loader.load_decoder(root));
  return Tokenizer(std::move(m));
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  std::ifstream f(tokenizer_json, std::ios::binary);
  if (!f) return not_found("tokenizer.not_found", tokenizer_json.string() + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("tokenizer.read_failed", tokenizer_json.string() + ": read failed");
  return load_from_json(ss.str(), tokenizer_json.string());
}

}  // namespace dsv4
