// tests: builds tests/data/tokenizer_corpus.txt, the ≥ 1 MB corpus on which our tokenizer must give
// the same ids as the JS port of HF tokenizers. Deterministic; reads only text that ships with the
// Debian image (licenses, C/C++ headers, Python/Perl/JS/shell sources) plus our own multilingual
// samples, and generates Unicode mixtures, digit and whitespace runs, special-token strings and
// invalid UTF-8 with a fixed-seed PRNG. Usage: node build_tokenizer_corpus.js [OUT]
"use strict";
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "..", "..");
const out = process.argv[2] || path.join(root, "tests", "data", "tokenizer_corpus.txt");

// Files from the image (skipped if absent), each capped so no single source dominates.
const sources = [
  ["/usr/share/common-licenses/GPL-3", 40000],
  ["/usr/share/common-licenses/Apache-2.0", 12000],
  ["/usr/share/common-licenses/LGPL-2.1", 27000],
  ["/usr/share/common-licenses/MPL-2.0", 17000],
  ["/usr/share/common-licenses/GFDL-1.3", 23000],
  ["/usr/share/common-licenses/Artistic", 7000],
  ["/usr/include/stdio.h", 40000],
  ["/usr/include/stdlib.h", 40000],
  ["/usr/include/pcre2.h", 50000],
  ["/usr/include/c++/12/bits/stl_vector.h", 50000],
  ["/usr/include/c++/12/bits/stl_algo.h", 40000],
  ["/usr/lib/python3.11/textwrap.py", 20000],
  ["/usr/lib/python3.11/json/encoder.py", 17000],
  ["/usr/lib/python3.11/argparse.py", 60000],
  ["/usr/lib/python3.11/difflib.py", 40000],
  ["/usr/lib/python3.11/tokenize.py", 27000],
  ["/usr/lib/python3.11/shlex.py", 14000],
  ["/usr/include/c++/12/bits/basic_string.h", 40000],
  ["/usr/share/perl/5.36.0/Text/Wrap.pm", 15000],
  ["/usr/share/perl/5.36.0/File/Find.pm", 30000],
  ["/usr/bin/apt-key", 30000],
  ["/usr/bin/bzdiff", 5000],
  ["/usr/bin/bashbug", 10000],
  ["/usr/lib/node_modules/npm/lib/npm.js", 20000],
  ["/usr/lib/node_modules/npm/lib/base-cmd.js", 20000],
  ["/usr/lib/node_modules/npm/lib/cli.js", 10000],
];

let rng = 0x2545f491;
function rand(n) {  // xorshift32, deterministic across machines
  rng ^= rng << 13; rng >>>= 0;
  rng ^= rng >>> 17;
  rng ^= rng << 5; rng >>>= 0;
  return rng % n;
}
function pick(a) { return a[rand(a.length)]; }
function range(a, b) { const r = []; for (let c = a; c <= b; ++c) r.push(String.fromCodePoint(c)); return r; }

const parts = [];
function add(label, text) { parts.push(Buffer.from(`\n===== ${label} =====\n`, "utf8")); parts.push(Buffer.isBuffer(text) ? text : Buffer.from(text, "utf8")); }

for (const [file, cap] of sources) {
  if (!fs.existsSync(file)) continue;
  add(file, fs.readFileSync(file).subarray(0, cap));
}
add("multilingual", fs.readFileSync(path.join(root, "tests", "data", "tokenizer_corpus_multilingual.txt")));

// Unicode mixtures: "words" drawn from many scripts and classes (letters, marks, digits of several
// systems, punctuation, symbols, emoji with modifiers and ZWJ). Only code points assigned before
// Unicode 14 are used, so engines on different Unicode versions classify them alike. U+0085 and
// U+FEFF are left out on purpose: JS's \s includes U+FEFF and excludes U+0085, Oniguruma (HF) and
// PCRE2 do the opposite (see tokenizer_oracle_test.cc).
const pools = [
  range(0x41, 0x5a), range(0x61, 0x7a), range(0xc0, 0xff), range(0x100, 0x17f), range(0x391, 0x3a9), range(0x3b1, 0x3c9),
  range(0x410, 0x44f), range(0x5d0, 0x5ea), range(0x591, 0x5af), range(0x621, 0x64a), range(0x64b, 0x652), range(0x660, 0x669),
  range(0x905, 0x939), range(0x93e, 0x94d), range(0x966, 0x96f), range(0xe01, 0xe2e), range(0xe31, 0xe3a),
  range(0x300, 0x36f), range(0x1100, 0x1112), range(0x3041, 0x3096), range(0x30a1, 0x30fa), range(0x4e00, 0x4fff),
  range(0x9f00, 0x9fa5), range(0xac00, 0xad00), range(0xff01, 0xff5e), range(0xff10, 0xff19), range(0x2010, 0x2027),
  range(0x2030, 0x205e), range(0x20a0, 0x20bf), range(0x2100, 0x214f), range(0x2190, 0x21ff), range(0x2200, 0x22ff),
  range(0x2500, 0x257f), range(0x2600, 0x26ff), range(0x3000, 0x303f), range(0x1f300, 0x1f64f), range(0x1f680, 0x1f6c5),
  range(0x1f900, 0x1f9ff), range(0x1d400, 0x1d44e), range(0x21, 0x2f), range(0x3a, 0x40), range(0x5b, 0x60), range(0x7b, 0x7e),
  range(0x30, 0x39), range(0xa1, 0xbf), range(0x2070, 0x2079), range(0x2080, 0x2089), range(0x2460, 0x249b),
];
const seps = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "", "", " \n", "\n\n"];
const emojiMods = ["\u200d", "\ufe0f", "\u{1f3fb}", "\u{1f3fd}", "\u{1f3ff}", "\u200d\u2764\ufe0f\u200d", "\u20e3"];
let mix = "";
while (Buffer.byteLength(mix) < 400000) {
  const pool = pick(pools);
  const n = 1 + rand(9);
  let w = "";
  for (let i = 0; i < n; ++i) {
    w += pick(pool);
    if (rand(12) === 0) w += pick(emojiMods);
    if (rand(10) === 0) w += pick(pick(pools));  // cross-class neighbours
  }
  mix += w + pick(seps);
}
add("unicode mixtures", mix);

// Digit runs of every length 1..64 and a few long ones, in several digit systems and groupings.
let digits = "";
for (let n = 1; n <= 64; ++n) {
  let d = "";
  for (let i = 0; i < n; ++i) d += String(rand(10));
  digits += d + (n % 3 === 0 ? "\n" : " ") + "x" + d + " " + d + "." + d.slice(0, 3) + ",";
}
for (const n of [100, 257, 1000]) { let d = ""; for (let i = 0; i < n; ++i) d += String(rand(10)); digits += "\n" + d + "\n"; }
digits += "\n١٢٣٤٥٦٧٨٩٠١٢٣ １２３４５６７８９０ १२३४५६७८९० 1,234,567.890 3.14159e-10 0x7fffffff 0b1010_1010 v1.2.3-rc.4\n";
add("digit runs", digits);

// Whitespace and newline runs of many lengths and mixes, around text.
let ws = "";
const wsChars = [" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u000b", "\u000c"];
for (let i = 0; i < 600; ++i) {
  let run = "";
  const n = 1 + rand(i % 50 === 0 ? 300 : 12);
  const kind = rand(3);
  for (let k = 0; k < n; ++k) run += kind === 0 ? " " : kind === 1 ? pick(["\n", " ", "\t"]) : pick(wsChars);
  ws += pick(["word", "中文", "x", "", ".", "}", "if (a)", "😀", "ان"]) + run;
}
add("whitespace runs", ws);

// Special-token strings, whole, adjacent, partial and nested, in running text.
const specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
  "｜DSML｜", "<｜DSML｜tool_calls>", "</｜DSML｜invoke>", "<｜latest_reminder｜>", "<｜tool▁calls▁begin｜>", "<｜fim▁hole｜>",
  "<|EOT|>", "<｜▁pad▁｜>", "<｜User", "<thin", "think>", "<<think>>", "｜", "▁", "<｜", "｜>", "<｜action｜>", "<｜query｜>"];
let sp = "";
for (let i = 0; i < 1500; ++i) sp += pick(specials) + pick(["", "", " ", "\n", "hello", "你好", "<", ">", "\n\n"]);
add("special tokens", sp);

// Invalid UTF-8: stray continuation bytes, truncated sequences, overlongs, surrogates, > U+10FFFF,
// bytes that never occur. Decoders replace each maximal subpart with U+FFFD (HF sees that string).
const bad = [];
const badSeqs = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
  [0xf5], [0xff], [0xfe], [0xe4, 0xbd], [0xf0, 0x9f, 0x98], [0xc3], [0xe4], [0xf0, 0x9f], [0xc3, 0x28], [0xe2, 0x28, 0xa1]];
for (let i = 0; i < 3000; ++i) {
  bad.push(Buffer.from(pick(["abc", " the", "中", "é", "😀", " ", "\n", "12", "<think>"]), "utf8"));
  if (rand(2) === 0) bad.push(Buffer.from(pick(badSeqs)));
}
add("invalid utf-8", Buffer.concat(bad));

fs.writeFileSync(out, Buffer.concat(parts));
console.log(`wrote ${out}: ${fs.statSync(out).size} bytes`);
