// tests/js: the official `openai` npm client against `dsv4 serve` on a real (random-weight) make-tiny
// model. The model's text is gibberish, so this checks protocol shape and self-consistency (greedy
// streaming == non-streaming), not content. Driven by tests/server/real_model_serve_test.cc.
// usage: node openai_real_model_e2e.js <baseURL> <model> <apiKey>
'use strict';
const OpenAI = require('openai');
const { ok, eq, expectApiError, collectChat, run } = require('./check');

const [baseURL, model, apiKey] = process.argv.slice(2);

async function main() {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
  const models = await client.models.list();
  eq(models.data.map((m) => m.id), [model], 'models.list');

  // Chat, greedy, thinking on (the default): reasoning and content come back in their own fields.
  for (const thinking of [true, false]) {
    const req = {
      model,
      messages: [{ role: 'user', content: 'Hello!' }],
      max_tokens: 6,
      temperature: 0,
      chat_template_kwargs: { thinking },
    };
    const r = await client.chat.completions.create(req);
    eq(r.object, 'chat.completion', 'object');
    ok(r.id.startsWith('chatcmpl-'), 'id prefix');
    eq(r.model, model, 'model');
    eq(r.choices.length, 1, 'one choice');
    eq(r.choices[0].message.role, 'assistant', 'role');
    ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason), 'finish_reason');
    ok(r.usage.prompt_tokens > 0, 'prompt tokens');
    ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 6, 'completion tokens');
    eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, 'total_tokens');

    const s = await collectChat(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    ok(s.chunks >= 2, 'several chunks');
    eq(s.content, r.choices[0].message.content || '', `streamed content == non-streamed (thinking ${thinking})`);
    eq(s.reasoning, r.choices[0].message.reasoning_content || '', `streamed reasoning == non-streamed (thinking ${thinking})`);
    eq(s.finish, r.choices[0].finish_reason, 'streamed finish_reason');
    eq(s.usage, r.usage, 'streamed usage');
    if (!thinking) eq(r.choices[0].message.reasoning_content, undefined, 'no reasoning when thinking is off');
  }

  // Completions, streamed and not.
  const creq = { model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 };
  const c = await client.completions.create(creq);
  eq(c.object, 'text_completion', 'completion object');
  ok(typeof c.choices[0].text === 'string', 'completion text');
  let text = '';
  let cfinish = null;
  for await (const chunk of await client.completions.create({ ...creq, stream: true })) {
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) cfinish = chunk.choices[0].finish_reason;
  }
  eq(text, c.choices[0].text, 'streamed completion == non-streamed');
  eq(cfinish, c.choices[0].finish_reason, 'streamed completion finish');

  // Tool round trip at protocol level: tools offered, a call and its result sent back; the answer is
  // well-formed whatever the random model says.
  const tools = [{
    type: 'function',
    function: { name: 'get_weather', description: 'Get weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  }];
  const messages = [{ role: 'user', content: 'weather in Paris?' }];
  const t = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 2, temperature: 0 });
  ok(['stop', 'length', 'tool_calls'].includes(t.choices[0].finish_reason), 'tool request finish_reason');
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 1, temperature: 0 });
  ok(t.usage.prompt_tokens > plain.usage.prompt_tokens, 'the tool schema is part of the prompt');
  const call = { id: 'call_abc123', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
  const back = await client.chat.completions.create({
    model, tools, max_tokens: 2, temperature: 0,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: 'Paris: 15C' }],
  });
  eq(back.object, 'chat.completion', 'answer after the tool result');
  ok(back.usage.prompt_tokens > t.usage.prompt_tokens, 'the call and its result are in the prompt');

  // Errors.
  const over = await expectApiError(client.chat.completions.create({ model, messages, max_tokens: 5000 }),
    400, 'context_length_exceeded', 'context exceeded');
  ok(over.message.includes(`${plain.usage.prompt_tokens} in the prompt`) && over.message.includes('5000'),
    `context error names both counts: ${over.message}`);
  await expectApiError(client.chat.completions.create({ model: 'no-such-model', messages }), 404, 'model_not_found', 'unknown model');
  await expectApiError(client.chat.completions.create({ model, messages, temperature: -1 }), 400, 'invalid_value', 'temperature');
  const badKey = new OpenAI({ baseURL, apiKey: apiKey + 'x', maxRetries: 0 });
  await expectApiError(badKey.models.list(), 401, 'invalid_api_key', 'wrong api key');

  // Abort a long stream after a few chunks (the C++ side checks the pool comes back).
  const ab = await client.completions.create({ model, prompt: 'talk', max_tokens: 900, temperature: 0, stream: true });
  let seen = 0;
  for await (const chunk of ab) {
    if (++seen === 4) break;
  }
  eq(seen, 4, 'abort after 4 chunks');
}

run('openai real-model e2e', main);
