// The official `openai` npm client through HAProxy in front of the replicas (tests/serve/run_cluster.sh
// passes the balancer's base URL, the group key `contextcache-cli key` computed and the tools file).
// The key goes in `defaultHeaders`, as a user would set it; every reply must name the same group in
// its X-ContextCache-Group header and in `contextcache.group_key`, and answer the same tokens.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

const [baseURL, groupKey, toolsFile] = process.argv.slice(2);
const client = new OpenAI({
  baseURL, apiKey: 'unused', timeout: 120_000, maxRetries: 0,
  defaultHeaders: { 'X-ContextCache-Group': groupKey },
});
const tools = JSON.parse(readFileSync(toolsFile, 'utf8'));
const model = (await client.models.list()).data[0].id;
const messages = [{ role: 'user', content: "What's the weather in Paris?" }];
const tiers = [];
let text;
for (let i = 0; i < 3; i++) {
  const { data, response } = await client.chat.completions
    .create({ model, messages, tools, max_tokens: 4, temperature: 0 })
    .withResponse();
  assert.equal(response.headers.get('x-contextcache-group'), groupKey);
  assert.equal(data.contextcache.group_key, groupKey);
  const content = JSON.stringify(data.choices[0].message);
  if (text === undefined) text = content;
  assert.equal(content, text, 'the same request answered differently');
  tiers.push(data.contextcache.tier);
}
// Routed by the key: the first request compiled (or fetched) the group, the rest found it in memory.
assert.deepEqual(tiers.slice(1), ['memory', 'memory'], tiers.join(','));
console.log(`ok - openai client through HAProxy: tiers ${tiers.join(',')}`);
