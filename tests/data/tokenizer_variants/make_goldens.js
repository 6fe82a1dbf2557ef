// Regenerates the tokenizer variant goldens in this folder with the reference HF `tokenizers`
// library (Node binding, 0.23.2 was used):
//   node make_goldens.js <path to node_modules/tokenizers> <repo root> <stories260k tokenizer.json>
// Variants exercise what the bundled files do not: added-token lstrip / rstrip / single_word /
// normalized, and the Metaspace pre-tokenizer and decoder. Plain-mode ids come from the same file
// with added_tokens emptied (plain mode recognises no added token).
const [tokenizersPath, repoRoot, storiesPath] = process.argv.slice(2);
const {Tokenizer} = require(tokenizersPath);
const fs = require('fs');
const os = require('os');
const path = require('path');
const here = __dirname;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tokvariants-'));

// qwen3opts: the bundled Qwen3 file with changed added-token options. Too big to check in; the test
// applies the same edits (tests/test_tokenizer.cpp, qwen3_with_token_options()).
// (stored as resources/tokenizers/qwen3/tokenizer.json.tar.xz: unpacked here with `tar`)
require('child_process').execFileSync('tar', ['-xJf',
    path.join(repoRoot, 'resources/tokenizers/qwen3/tokenizer.json.tar.xz'), '-C', tmp]);
const q = JSON.parse(fs.readFileSync(path.join(tmp, 'tokenizer.json')));
for (const t of q.added_tokens) {
  if (t.content === '<tool_call>') t.lstrip = true;
  if (t.content === '</tool_call>') t.rstrip = true;
  if (t.content === '<think>') t.single_word = true;
  if (t.content === '</think>') { t.lstrip = true; t.rstrip = true; }
}
q.added_tokens.push({id: 151669, content: 'he\u0301llo', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false});
q.added_tokens.push({id: 151670, content: 'wor', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false});
const variants = {qwen3opts: path.join(tmp, 'qwen3opts.tokenizer.json')};
fs.writeFileSync(variants.qwen3opts, JSON.stringify(q));

const stories = () => JSON.parse(fs.readFileSync(storiesPath));
const s = stories();
for (const t of s.added_tokens) { if (t.content === '</s>') { t.lstrip = true; t.rstrip = true; } }
s.added_tokens.push({id: 512, content: 'time', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false});
s.added_tokens.push({id: 513, content: ' cat', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true});
const m1 = stories();
m1.normalizer = null;
m1.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: true};
m1.decoder = {type: 'Sequence', decoders: [{type: 'ByteFallback'}, {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: true}]};
const m2 = stories();
m2.normalizer = null;
m2.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: false};
m2.decoder = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: false};
for (const [name, j] of [['storiesopts', s], ['metaspace_first', m1], ['metaspace_always', m2]]) {
  variants[name] = path.join(here, `${name}.tokenizer.json`);
  fs.writeFileSync(variants[name], JSON.stringify(j));
}

const texts = ['', ' ', 'hello', 'x <tool_call> y', 'x   <tool_call>   y', '</tool_call>   \n  z', 'a</think>  b', 'a  </think>b',
  '<think>', 'x<think>y', 'x <think> y', '_<think>_', 'é<think>', 'hello world', 'héllo he\u0301llo hello', 'wor world wor. sword wor_',
  'Once upon a time', 'time time', 'atime', 'the cat sat', 'a cat', 'cat', ' cat', 'x </s> y', 'x</s>y', '<s> time </s>  cat',
  'Hello  world  ', '  leading', 'a\nb\n\nc', 'I ❤ 🦀', '中文 time', '<s>Once</s> upon'];
let seed = 99;
const rnd = (n) => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed % n; };
const pool = [' ', '  ', '\n', '\t', 'a', 'time', ' cat', 'cat', 'wor', 'hello', 'he\u0301llo', 'héllo', '<think>', '</think>',
  '<tool_call>', '</tool_call>', '</s>', '<s>', 'x', '.', '_', 'é', '中', '😀', '\u00a0', '\u3000', 'Once', ' upon'];
for (let i = 0; i < 150; ++i) { let t = ''; const n = 1 + rnd(12); for (let k = 0; k < n; ++k) t += pool[rnd(pool.length)]; texts.push(t); }
(async () => {
  for (const [name, file] of Object.entries(variants)) {
    const tok = Tokenizer.fromFile(file);
    const j = JSON.parse(fs.readFileSync(file)); j.added_tokens = [];
    const plainFile = path.join(tmp, `${name}_plain.json`);
    fs.writeFileSync(plainFile, JSON.stringify(j));
    const plain = Tokenizer.fromFile(plainFile);
    const lines = [];
    for (const text of texts) {
      for (const [mode, t] of [['template', tok], ['plain', plain]]) {
        const ids = Array.from((await t.encode(text, null, {addSpecialTokens: false})).getIds());
        const rec = {text, mode, ids};
        if (mode === 'template') { rec.decoded = await tok.decode(ids, false); rec.decoded_skip = await tok.decode(ids, true); }
        lines.push(JSON.stringify(rec));
      }
    }
    fs.writeFileSync(path.join(here, `${name}.jsonl`), lines.join('\n') + '\n');
    console.log(name, lines.length);
  }
  fs.rmSync(tmp, {recursive: true});
})();
