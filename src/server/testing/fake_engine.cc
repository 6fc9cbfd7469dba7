// server/testing: the fake engine's loop. Mirrors the real engine's contract (engine.h): callbacks run
// on the loop thread, outside the engine lock, so a callback may call cancel().
#include "server/testing/fake_engine.h"

#include <algorithm>

namespace dsv4::server::testing {
namespace {

uint64_t fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t hash_string(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = fnv1a(h, c);
  return h;
}

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`.
size_t stop_prefix_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& s : stops) {
    for (size_t len = std::min(s.size() - 1, text.size()); len > best; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// Largest end <= `end` that does not split a UTF-8 character of `text`.
size_t utf8_safe_end(const std::string& text, size_t end) {
  size_t lead = end;
  int back = 0;
  while (lead > 0 && back < 4 && (static_cast<unsigned char>(text[lead - 1]) & 0xC0) == 0x80) {
    --lead;
    ++back;
  }
  if (lead == 0) return end;
  const unsigned char c = static_cast<unsigned char>(text[lead - 1]);
  size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return (static_cast<size_t>(back) + 1 >= need) ? end : lead - 1;
}

GenerationUpdate cancelled_update(RequestId id) {
  GenerationUpdate u;
  u.id = id;
  u.finish = FinishReason::kCancelled;
  return u;
}

}  // namespace

FakeEngine::FakeEngine(FakeEngineOptions options) : options_(std::move(options)) {
  info_.model_name = options_.model_name;
  info_.context_size = options_.context_size;
  info_.vocab_size = options_.vocab_size;
  free_blocks_ = options_.pool_blocks;
  thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() {
  std::vector<std::pair<UpdateCallback, GenerationUpdate>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // Whatever is left ends as cancelled, so no consumer waits forever.
  for (auto& seq : queue_) pending.push_back({seq.on_update, cancelled_update(seq.id)});
  for (auto& [id, seq] : running_) pending.push_back({seq.on_update, cancelled_update(id)});
  for (auto& [cb, u] : pending) cb(u);
}

std::vector<std::string> FakeEngine::split_tokens(const std::string& text) {
  static const char* kMarkers[] = {"<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>"};
  std::vector<std::string> out;
  size_t i = 0;
  size_t k = 0;
  while (i < text.size()) {
    bool matched = false;
    for (const char* m : kMarkers) {
      const std::string_view mv(m);
      if (text.compare(i, mv.size(), mv) == 0) {
        out.emplace_back(mv);
        i += mv.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t len = 1 + (k++ % 3);  // 1, 2, 3, 1, 2, 3...: splits multi-byte characters now and then
    size_t end = std::min(text.size(), i + len);
    // Never swallow the start of a marker into a plain piece.
    for (size_t j = i + 1; j < end; ++j) {
      if (text[j] == '<' || static_cast<unsigned char>(text[j]) == 0xEF) {
        end = j;
        break;
      }
    }
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

std::string FakeEngine::default_text(const GenerationRequest& request) {
  static const char* kWords[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
                                 "iota", "kappa", "lambda", "mu", "café", "naïve", "日本", "über"};
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : request.prompt_ids) h = fnv1a(h, static_cast<uint64_t>(id));
  if (request.sampling.temperature > 0.0f) {
    h = fnv1a(h, request.sampling.seed.value_or(0x9e3779b97f4a7c15ull));
  }
  std::string text;
  for (int i = 0; i < 24; ++i) {
    h = fnv1a(h, static_cast<uint64_t>(i));
    if (i > 0) text += ' ';
    text += kWords[h % 16];
  }
  return text + ".";
}

Result<RequestId> FakeEngine::submit(GenerationRequest request, UpdateCallback on_update) {
  if (request.prompt_ids.empty()) return invalid_argument("engine.empty_prompt", "the prompt has no tokens");
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= options_.vocab_size) {
      return invalid_argument("engine.token_out_of_range", "prompt token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  if (request.stop.max_tokens < 1) return invalid_argument("engine.max_tokens", "max_tokens must be at least 1");
  const int64_t total = static_cast<int64_t>(request.prompt_ids.size()) + request.stop.max_tokens;
  if (total > options_.context_size) {
    return out_of_range("engine.context_exceeded", "prompt (" + std::to_string(request.prompt_ids.size()) +
                                                       ") + max_tokens (" + std::to_string(request.stop.max_tokens) +
                                                       ") exceeds the context of " + std::to_string(options_.context_size));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(queue_.size()) >= options_.max_queued) {
    return resource_exhausted("engine.queue_full", "the engine queue is full");
  }
  Sequence seq;
  seq.id = next_id_++;
  seq.pieces = split_tokens(script_ ? script_(request) : default_text(request));
  seq.request = std::move(request);
  seq.on_update = std::move(on_update);
  last_request_ = seq.request;
  ++submitted_;
  const RequestId id = seq.id;
  queue_.push_back(std::move(seq));
  cv_.notify_all();
  return id;
}

void FakeEngine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_requests_.insert(id);
  cv_.notify_all();
}

EngineStats FakeEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s;
  s.queued = static_cast<int64_t>(queue_.size());
  s.running = static_cast<int64_t>(running_.size());
  s.prompt_tokens_total = prompt_tokens_total_;
  s.generated_tokens_total = generated_tokens_total_;
  s.pool_blocks_total = options_.pool_blocks;
  s.pool_blocks_free = free_blocks_;
  return s;
}

void FakeEngine::set_script(Script script) {
  std::lock_guard<std::mutex> lock(mu_);
  script_ = std::move(script);
}

void FakeEngine::set_paused(bool paused) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = paused;
  cv_.notify_all();
}

int64_t FakeEngine::cancels_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancels_applied_;
}

int64_t FakeEngine::submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

GenerationRequest FakeEngine::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_;
}

bool FakeEngine::step_sequence(Sequence& seq, std::vector<std::pair<UpdateCallback, GenerationUpdate>>* out) {
  GenerationUpdate u;
  u.id = seq.id;
  u.prompt_tokens = static_cast<int32_t>(seq.request.prompt_ids.size());
  const bool exhausted = seq.next_piece >= seq.pieces.size();
  if (!exhausted) {
    const std::string& piece = seq.pieces[seq.next_piece++];
    seq.text += piece;
    ++seq.generated;
    ++generated_tokens_total_;
    TokenEvent ev;
    ev.token = static_cast<int32_t>(10 + hash_string(piece) % static_cast<uint64_t>(options_.vocab_size - 10));
    if (seq.request.sampling.top_logprobs >= 0) {
      ev.logprob = TokenLogprob{ev.token, -static_cast<float>(hash_string(piece) % 100) / 50.0f};
      for (int32_t j = 0; j < seq.request.sampling.top_logprobs; ++j) {
        const int32_t alt = j == 0 ? ev.token : static_cast<int32_t>((ev.token + 7 * j) % options_.vocab_size);
        ev.top_logprobs.push_back({alt, ev.logprob->logprob - 0.5f * static_cast<float>(j)});
      }
    }
    u.tokens.push_back(std::move(ev));
  }
  // Stop strings: the earliest complete match ends the sequence and is not released.
  const auto& stops = seq.request.stop.stop_strings;
  size_t max_stop = 0;
  for (const auto& s : stops) max_stop = std::max(max_stop, s.size());
  size_t stop_at = std::string::npos;
  const size_t from = seq.released > max_stop ? seq.released - max_stop : 0;
  for (const auto& s : stops) {
    const size_t p = seq.text.find(s, from);
    if (p != std::string::npos && p < stop_at) stop_at = p;
  }
  size_t release_end;
  if (stop_at != std::string::npos) {
    u.finish = FinishReason::kStop;
    release_end = std::max(stop_at, seq.released);
  } else if (exhausted || seq.next_piece >= seq.pieces.size()) {
    u.finish = seq.request.stop.ignore_eos && seq.generated < seq.request.stop.max_tokens ? FinishReason::kNone
                                                                                             : FinishReason::kStop;
    release_end = seq.text.size();
    if (u.finish == FinishReason::kNone) {
      // ignore_eos: keep "generating" the script again.
      seq.next_piece = 0;
    }
  } else if (seq.generated >= seq.request.stop.max_tokens) {
    u.finish = FinishReason::kLength;
    release_end = seq.text.size();
  } else {
    release_end = utf8_safe_end(seq.text, seq.text.size() - stop_prefix_holdback(seq.text, stops));
  }
  // Held-back text is always released together with the token that resolves it: text only grows
  // when a token is generated, so there is a token in this update whenever release_end moved.
  if (release_end > seq.released && !u.tokens.empty()) {
    u.tokens.back().text = seq.text.substr(seq.released, release_end - seq.released);
    seq.released = release_end;
  }
  if (seq.generated >= seq.request.stop.max_tokens && u.finish == FinishReason::kNone) u.finish = FinishReason::kLength;
  u.completion_tokens = seq.generated;
  out->push_back({seq.on_update, std::move(u)});
  return out->back().second.finish != FinishReason::kNone;
}

void FakeEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !running_.empty() || (!queue_.empty() && !paused_) || !cancel_requests_.empty(); });
    if (stop_) return;
    std::vector<std::pair<UpdateCallback, GenerationUpdate>> updates;

    // 1. Cancellations, applied at the start of the step: the state is freed within one step.
    for (RequestId id : cancel_requests_) {
      auto it = running_.find(id);
      if (it != running_.end()) {
        free_blocks_ += it->second.blocks;
        GenerationUpdate u = cancelled_update(id);
        u.prompt_tokens = static_cast<int32_t>(it->second.request.prompt_ids.size());
        u.completion_tokens = it->second.generated;
        updates.push_back({it->second.on_update, std::move(u)});
        running_.erase(it);
        ++cancels_applied_;
        continue;
      }
      auto q = std::find_if(queue_.begin(), queue_.end(), [&](const Sequence& s) { return s.id == id; });
      if (q != queue_.end()) {
        updates.push_back({q->on_update, cancelled_update(id)});
        queue_.erase(q);
        ++cancels_applied_;
      }
    }
    cancel_requests_.clear();

    // 2. Admission: FIFO, while a running slot and the blocks for prompt + max_tokens are free.
    while (!paused_ && !queue_.empty() && static_cast<int32_t>(running_.size()) < options_.max_running) {
      Sequence& head = queue_.front();
      const int64_t tokens = static_cast<int64_t>(head.request.prompt_ids.size()) + head.request.stop.max_tokens;
      const int64_t need = (tokens + options_.block_tokens - 1) / options_.block_tokens;
      if (need > free_blocks_) break;
      free_blocks_ -= need;
      head.blocks = need;
      prompt_tokens_total_ += static_cast<int64_t>(head.request.prompt_ids.size());
      const RequestId id = head.id;
      running_.emplace(id, std::move(head));
      queue_.pop_front();
    }

    // 3. One decode step for every running sequence.
    for (auto it = running_.begin(); it != running_.end();) {
      if (step_sequence(it->second, &updates)) {
        free_blocks_ += it->second.blocks;
        it = running_.erase(it);
      } else {
        ++it;
      }
    }

    lock.unlock();
    for (auto& [cb, u] : updates) cb(u);
    std::this_thread::sleep_for(options_.step_time);
    lock.lock();
  }
}

}  // namespace dsv4::server::testing
