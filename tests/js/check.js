// tests/js: what the OpenAI end-to-end client scripts share — counted assertions, the expected-APIError
// check, a collector for streamed chat chunks, and the runner that prints the count or fails the process.
'use strict';
const assert = require('assert');
const OpenAI = require('openai');

let checks = 0;
function ok(cond, what) {
  assert.ok(cond, what);
  checks++;
}
function eq(a, b, what) {
  assert.deepStrictEqual(a, b, what);
  checks++;
}

// Awaits `promise`, which must reject with the client's APIError carrying `status` (and `code`, if given)
// and a non-empty message; returns the error.
async function expectApiError(promise, status, code, what) {
  try {
    await promise;
  } catch (e) {
    ok(e instanceof OpenAI.APIError, `${what}: an APIError (${e})`);
    eq(e.status, status, `${what}: status`);
    if (code) eq(e.code, code, `${what}: code`);
    ok(typeof e.message === 'string' && e.message.length > 0, `${what}: message`);
    return e;
  }
  assert.fail(`${what}: expected an APIError ${status}`);
}

// Drains a streamed chat completion: the concatenated content/reasoning deltas, tool calls by index (their
// argument deltas concatenated), the finish reason, the usage chunk and the chunk count.
async function collectChat(stream) {
  const out = { content: '', reasoning: '', finish: null, usage: null, chunks: 0, toolCalls: {} };
  for await (const chunk of stream) {
    out.chunks++;
    eq(chunk.object, 'chat.completion.chunk', 'chunk object');
    if (chunk.usage) out.usage = chunk.usage;
    if (!chunk.choices.length) continue;
    const d = chunk.choices[0].delta;
    if (d.content) out.content += d.content;
    if (d.reasoning_content) out.reasoning += d.reasoning_content;
    for (const tc of d.tool_calls || []) {
      const c = (out.toolCalls[tc.index] = out.toolCalls[tc.index] || { id: '', name: '', arguments: '' });
      if (tc.id) c.id = tc.id;
      if (tc.function && tc.function.name) c.name = tc.function.name;
      if (tc.function && tc.function.arguments) c.arguments += tc.function.arguments;
    }
    if (chunk.choices[0].finish_reason) out.finish = chunk.choices[0].finish_reason;
  }
  return out;
}

// Runs the async `main`; prints "<name>: N checks passed" (what the C++ drivers look for) or the first
// failure, exiting 1.
function run(name, main) {
  main().then(
    () => console.log(`${name}: ${checks} checks passed`),
    (e) => {
      console.error(`${name} FAILED:`, e);
      process.exit(1);
    });
}

module.exports = { ok, eq, expectApiError, collectChat, run };
