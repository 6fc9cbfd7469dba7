// tests/js: end-to-end check of `dsv4 serve`'s OpenAI API with the official `openai` npm client.
// Driven by tests/server/openai_e2e_test.cc, which starts the server on 127.0.0.1 with a fake engine
// whose completions are injected per prompt (the texts below must match that test's script).
// usage: node openai_e2e.js <baseURL> <model> <apiKey> [--tools]
'use strict';
const OpenAI = require('openai');
const { ok, eq, expectApiError, collectChat, run } = require('./check');

const [baseURL, model, apiKey, ...flags] = process.argv.slice(2);
const withTools = flags.includes('--tools');

async function main() {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });

  // Models.
  const models = await client.models.list();
  eq(models.data.map((m) => m.id), [model], 'models.list');

  // Non-streaming chat: reasoning and content come back separately, usage counts them.
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'say hello' }] });
  eq(r.object, 'chat.completion', 'object');
  ok(r.id.startsWith('chatcmpl-'), 'id prefix');
  eq(r.choices[0].message.content, 'Hello from dsv4!', 'content');
  eq(r.choices[0].message.reasoning_content, 'Greeting the user.', 'reasoning_content');
  eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
  ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, 'usage');
  eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, 'total_tokens');
  ok(r.usage.completion_tokens_details.reasoning_tokens > 0, 'reasoning_tokens');

  // The reasoning goes back in on the next turn.
  const r2 = await client.chat.completions.create({
    model,
    messages: [
      { role: 'user', content: 'say hello' },
      { role: 'assistant', content: 'Hello from dsv4!', reasoning_content: 'Greeting the user.' },
      { role: 'user', content: 'say hello' },
    ],
    chat_template_kwargs: { thinking: false },
  });
  eq(r2.choices[0].message.content, 'Hello from dsv4!', 'turn 2, thinking off');
  eq(r2.choices[0].message.reasoning_content, undefined, 'no reasoning when thinking is off');

  // Streaming chat with usage: the deltas add up to the non-streaming answer.
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'say hello' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const s = await collectChat(stream);
  ok(s.chunks > 3, 'several chunks');
  eq(s.content, r.choices[0].message.content, 'streamed content');
  eq(s.reasoning, r.choices[0].message.reasoning_content, 'streamed reasoning');
  eq(s.finish, 'stop', 'streamed finish_reason');
  eq(s.usage.completion_tokens, r.usage.completion_tokens, 'streamed usage');

  // Completions.
  const c = await client.completions.create({ model, prompt: 'Once upon', max_tokens: 16 });
  eq(c.object, 'text_completion', 'completion object');
  eq(c.choices[0].text, ' a time, there was a server.', 'completion text');
  const cs = await client.completions.create({ model, prompt: 'Once upon', max_tokens: 16, stream: true });
  let text = '';
  for await (const chunk of cs) text += chunk.choices[0].text;
  eq(text, ' a time, there was a server.', 'streamed completion');

  // max_tokens → finish_reason length.
  const len = await client.completions.create({ model, prompt: 'Once upon', max_tokens: 2 });
  eq(len.choices[0].finish_reason, 'length', 'length');
  eq(len.usage.completion_tokens, 2, 'length tokens');

  if (withTools) {
    const tools = [{
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Get weather',
        parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
      },
    }];
    const messages = [{ role: 'user', content: 'weather in Paris?' }];
    const t = await client.chat.completions.create({ model, messages, tools });
    const msg = t.choices[0].message;
    eq(t.choices[0].finish_reason, 'tool_calls', 'tool finish_reason');
    eq(msg.tool_calls.length, 1, 'one tool call');
    eq(msg.tool_calls[0].type, 'function', 'tool type');
    eq(msg.tool_calls[0].function.name, 'get_weather', 'tool name');
    eq(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'Paris', days: 2 }, 'tool arguments');
    ok(/^call_[A-Za-z0-9]{24}$/.test(msg.tool_calls[0].id), 'tool call id');

    // Streamed: the call arrives as deltas whose arguments concatenate to the same JSON.
    const ts = await collectChat(await client.chat.completions.create({ model, messages, tools, stream: true }));
    eq(ts.finish, 'tool_calls', 'streamed tool finish');
    eq(ts.toolCalls[0].name, 'get_weather', 'streamed tool name');
    eq(JSON.parse(ts.toolCalls[0].arguments), { city: 'Paris', days: 2 }, 'streamed tool arguments');
    ok(ts.toolCalls[0].id !== msg.tool_calls[0].id, 'tool call ids are unique');

    // Round trip: the call and its result go back; the model answers.
    const back = await client.chat.completions.create({
      model,
      tools,
      messages: [
        ...messages,
        { role: 'assistant', content: msg.content, reasoning_content: msg.reasoning_content, tool_calls: msg.tool_calls },
        { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'Paris: 15C' },
      ],
    });
    eq(back.choices[0].message.content, 'It is 15C in Paris.', 'answer after tool result');
    eq(back.choices[0].finish_reason, 'stop', 'finish after tool result');
  }

  // Errors surface as the client's APIError with the right status.
  await expectApiError(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], temperature: 5 }),
    400, 'invalid_value', 'temperature out of range');
  await expectApiError(client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    404, 'model_not_found', 'unknown model');
  await expectApiError(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 10000000 }),
    400, 'context_length_exceeded', 'context exceeded');
  await expectApiError(client.completions.create({ model, prompt: 'x', logprobs: 50 }), 400, 'invalid_value', 'logprobs');
  const badKey = new OpenAI({ baseURL, apiKey: apiKey + 'x', maxRetries: 0 });
  await expectApiError(badKey.models.list(), 401, 'invalid_api_key', 'wrong api key');

  // Aborting a stream mid-way (the server must cancel the engine request; the C++ test checks).
  const ab = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'talk forever' }], stream: true });
  let seen = 0;
  for await (const chunk of ab) {
    if (++seen === 5) break;  // breaking out of the iterator aborts the HTTP request
  }
  eq(seen, 5, 'abort after 5 chunks');

}

run('openai e2e', main);
