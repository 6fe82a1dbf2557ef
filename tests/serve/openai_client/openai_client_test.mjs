// The official `openai` npm client against `contextcache-cli serve` (tests/serve/run_openai_client.sh
// starts the server and passes its base URL, API key and tools file). Every check throws on failure;
// the process exits 0 only when all pass.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

const [baseURL, apiKey, toolsFile] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, timeout: 120_000, maxRetries: 0 });
const tools = JSON.parse(readFileSync(toolsFile, 'utf8'));
const model = (await client.models.list()).data[0].id;
const system = { role: 'system', content: 'You are a helpful assistant with tools.' };
const user = { role: 'user', content: "What's the weather like in Austin, TX right now?" };
let passed = 0;
const check = async (name, fn) => {
  await fn();
  passed += 1;
  console.log(`ok - ${name}`);
};

await check('a wrong API key is an AuthenticationError (401)', async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

let first;
await check('a completion in the OpenAI shape', async () => {
  first = await client.chat.completions.create({ model, messages: [system, user], tools, max_tokens: 24 });
  assert.equal(first.object, 'chat.completion');
  assert.match(first.id, /^chatcmpl-/);
  const choice = first.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
  assert.ok(first.usage.prompt_tokens > 0);
  assert.equal(first.usage.total_tokens, first.usage.prompt_tokens + first.usage.completion_tokens);
  assert.equal(typeof first.usage.prompt_tokens_details.cached_tokens, 'number');
  assert.match(first.contextcache.group_key, /^[0-9a-f]{64}$/);
  for (const call of choice.message.tool_calls ?? []) {
    assert.equal(call.type, 'function');
    JSON.parse(call.function.arguments); // a JSON string
  }
});

await check('the same tools in another order hit the same group: cached_tokens = the group prefix', async () => {
  const reordered = [...tools].reverse();
  const second = await client.chat.completions.create({ model, messages: [system, user], tools: reordered, max_tokens: 24 });
  assert.equal(second.contextcache.group_key, first.contextcache.group_key);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= second.contextcache.group_reused_tokens);
  assert.ok(['memory', 'gpu', 'disk'].includes(second.contextcache.tier), second.contextcache.tier);
  // Greedy and exact: the cached answer is the uncached one.
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
});

await check('streaming: the client accumulates the same completion (content or tool-call deltas), usage last', async () => {
  const stream = await client.chat.completions.create({
    model, messages: [system, user], tools, max_tokens: 24, stream: true, stream_options: { include_usage: true },
  });
  let role, content = '', finish, usage, chunks = 0;
  const calls = [];
  for await (const chunk of stream) {
    chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    role ??= choice.delta.role;
    content += choice.delta.content ?? '';
    for (const d of choice.delta.tool_calls ?? []) {
      calls[d.index] ??= { id: d.id, name: '', arguments: '' };
      calls[d.index].name += d.function?.name ?? '';
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  assert.equal(role, 'assistant');
  assert.ok(chunks >= 3);
  assert.equal(finish, first.choices[0].finish_reason);
  assert.equal(content, first.choices[0].message.content ?? '');
  assert.equal(calls.length, (first.choices[0].message.tool_calls ?? []).length);
  calls.forEach((c, i) => {
    assert.equal(c.name, first.choices[0].message.tool_calls[i].function.name);
    assert.equal(c.arguments, first.choices[0].message.tool_calls[i].function.arguments);
  });
  assert.ok(usage && usage.prompt_tokens === first.usage.prompt_tokens, JSON.stringify(usage));
  // The SDK's own accumulator (ChatCompletionStream) agrees.
  const runner = client.chat.completions.stream({ model, messages: [system, user], tools, max_tokens: 24 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content ?? '', first.choices[0].message.content ?? '');
  assert.equal(final.choices[0].finish_reason, first.choices[0].finish_reason);
});

await check('tool_choice "required" and a named function answer with a call to an offered tool', async () => {
  const names = tools.map((t) => t.function?.name ?? t.name);
  const required = await client.chat.completions.create({ model, messages: [user], tools, tool_choice: 'required', max_tokens: 64 });
  assert.equal(required.choices[0].finish_reason, 'tool_calls');
  assert.ok(names.includes(required.choices[0].message.tool_calls[0].function.name));
  const named = names[names.length - 1];
  const stream = await client.chat.completions.create({
    model, messages: [user], tools, max_tokens: 64, stream: true,
    tool_choice: { type: 'function', function: { name: named } } });
  let called = '', finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const d of c.delta?.tool_calls ?? []) if (d.function?.name) called = d.function.name;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(called, named);
  assert.equal(finish, 'tool_calls');
  await assert.rejects(
    client.chat.completions.create({ model, messages: [user], tools, tool_choice: { type: 'function', function: { name: 'not_offered' } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'tool_choice.function.name');
});

await check("a tool-call round trip: the model's own call -> tool result -> answer", async () => {
  // The call is the model's own (tool_choice names the function, so it is a call whatever the
  // bundled model's quality), sent back as the assistant turn with its id and arguments as written.
  const forced = await client.chat.completions.create({
    model, messages: [system, user], tools, max_tokens: 48,
    tool_choice: { type: 'function', function: { name: tools[0].function.name } } });
  const said = forced.choices[0].message;
  assert.equal(said.tool_calls?.length, 1, JSON.stringify(said));
  const call = said.tool_calls[0];
  assert.equal(call.function.name, tools[0].function.name);
  assert.match(call.id, /^call_/);
  const messages = [system, user, said,
                    { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature_c: 31, sky: 'clear' }) }];
  const answer = await client.chat.completions.create({ model, messages, tools, max_tokens: 24 });
  assert.equal(answer.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
  // The group prefix is reused for the longer conversation too.
  assert.ok(answer.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(answer.usage));
  assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens);
  // The next turn, with the answer appended: the conversation state is reused as well.
  const next = await client.chat.completions.create({
    model, tools, max_tokens: 8,
    messages: [...messages, answer.choices[0].message, { role: 'user', content: 'And tomorrow?' }],
  });
  assert.ok(next.usage.prompt_tokens_details.cached_tokens > answer.contextcache.group_reused_tokens,
            JSON.stringify(next.contextcache));
});

const { version } = JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url), 'utf8'));
console.log(`openai ${version} (npm) client: ${passed} checks passed against ${baseURL} (${model})`);
