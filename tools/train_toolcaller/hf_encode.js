#!/usr/bin/env node
// Encode texts with the Hugging Face `tokenizers` library (its Rust core through the npm binding,
// the reference tools/gen_tokenizer_goldens.js uses): check_tokenizer.py's reference.
//
// Usage: NODE_PATH=/tmp/npmwork/node_modules node hf_encode.js TOKENIZER.json < in.jsonl > out.jsonl
//   in:  {"text": ..., "mode": "template" | "plain"} per line
//   out: {"ids": [...], "decoded": ...} per line; "plain" encodes with the added tokens removed
//        (what ContextCache does with user text), "template" matches them as single tokens.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const file = process.argv[2];
  const tj = JSON.parse(fs.readFileSync(file, 'utf8'));
  const plainJson = JSON.parse(JSON.stringify(tj));
  plainJson.added_tokens = [];
  const tmp = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hfenc-')), 'plain.json');
  fs.writeFileSync(tmp, JSON.stringify(plainJson));
  const tok = { template: Tokenizer.fromFile(file), plain: Tokenizer.fromFile(tmp) };
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length);
  const out = [];
  for (const line of lines) {
    const c = JSON.parse(line);
    const t = tok[c.mode || 'plain'];
    const enc = await t.encode(c.text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const decoded = await tok.template.decode(ids, false);
    out.push(JSON.stringify({ ids, decoded }));
  }
  fs.unlinkSync(tmp);
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}
main().catch((e) => { console.error(e); process.exit(1); });
