#!/usr/bin/env python3
# fuzz: derives tests/fuzz/data/tokenizer_small.json from DeepSeek's tokenizer.json: the same normalizer,
# pre-tokenizer (Split regexes + ByteLevel), decoder and added tokens (same ids), the 256 byte tokens and
# only the first N merges with the tokens they use and make. The fuzz and replay targets load it in
# milliseconds (the 4.3 MB original takes over a minute under ASan) while exercising the same code paths.
# Usage: tests/fuzz/make_small_tokenizer.py ../shared/tokenizer/tokenizer.json tests/fuzz/data/tokenizer_small.json [N]
import json
import sys

src, dst = sys.argv[1], sys.argv[2]
n_merges = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
with open(src, encoding="utf-8") as f:
    tok = json.load(f)
model = tok["model"]
vocab = model["vocab"]


def byte_chars():
    # GPT-2's byte → printable code point table (the ByteLevel alphabet).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


keep = set(byte_chars())
merges = []
for m in model["merges"][:n_merges]:
    a, b = m.split(" ") if isinstance(m, str) else m
    keep.update((a, b, a + b))
    merges.append(m)
model["vocab"] = {t: i for t, i in vocab.items() if t in keep}
model["merges"] = merges
with open(dst, "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
print(f"{dst}: {len(model['vocab'])} tokens, {len(merges)} merges")
