// Functional tests of `lift serve` on stories260K through the OpenAI Node SDK (and raw fetch
// where the SDK hides the wire format): completions and chat, streamed and not, usage,
// stop strings, n > 1, seeds, logprobs, sampling extras, the reference greedy continuation,
// /tokenize, /detokenize, /v1/models, /health and /metrics.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { STORIES, modelsDir, readJson, startServer } from './lib/server.mjs';
import {
  GEN_TOKENS, KV_USED, PROMPT_TOKENS, RUNNING, WAITING, assertIdle, client, get, metric, metrics, pollMetrics, post, sse,
} from './lib/http.mjs';

const ref = readJson(path.join(modelsDir, 'stories260K', 'reference_outputs.json'))
  .runs.find((r) => r.name === 'prompt_once_upon_a_time_greedy_60');
const PROMPT = ref.prompt;                        // "Once upon a time"
const PROMPT_IDS = ref.prompt_ids;                // [1, 403, 407, 261, 378]
const REF_TEXT = ref.text.slice(PROMPT.length);   // ", there was a little girl named Lily. ..."
const REF_N = ref.generated_ids.length;           // 56
const T = { timeout: 60000 };

function assertUsage(u, promptTokens, completionTokens) {
  assert.ok(u && typeof u === 'object', `usage missing: ${JSON.stringify(u)}`);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.ok(Number.isInteger(u[k]) && u[k] >= 0, `usage.${k} is not a count: ${JSON.stringify(u)}`);
  }
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens, `total_tokens != prompt + completion: ${JSON.stringify(u)}`);
  if (promptTokens !== undefined) assert.equal(u.prompt_tokens, promptTokens, `usage.prompt_tokens: ${JSON.stringify(u)}`);
  if (completionTokens !== undefined) assert.equal(u.completion_tokens, completionTokens, `usage.completion_tokens: ${JSON.stringify(u)}`);
}

function assertCompletion(c, nChoices = 1) {
  assert.equal(typeof c.id, 'string');
  assert.ok(c.id.length > 0, 'empty id');
  assert.equal(c.object, 'text_completion');
  assert.ok(Number.isInteger(c.created) && c.created > 1.6e9 && c.created < 4e9, `created is not unix seconds: ${c.created}`);
  assert.equal(typeof c.model, 'string');
  assert.equal(c.choices.length, nChoices);
  c.choices.forEach((ch, i) => {
    assert.equal(ch.index, i);
    assert.equal(typeof ch.text, 'string');
    assert.ok(['stop', 'length'].includes(ch.finish_reason), `finish_reason ${ch.finish_reason}`);
    assert.ok('logprobs' in ch, 'choice.logprobs key missing (OpenAI sends null)');
  });
}

function assertChat(c, nChoices = 1) {
  assert.equal(typeof c.id, 'string');
  assert.ok(c.id.length > 0, 'empty id');
  assert.equal(c.object, 'chat.completion');
  assert.ok(Number.isInteger(c.created) && c.created > 1.6e9 && c.created < 4e9, `created is not unix seconds: ${c.created}`);
  assert.equal(typeof c.model, 'string');
  assert.equal(c.choices.length, nChoices);
  c.choices.forEach((ch, i) => {
    assert.equal(ch.index, i);
    assert.equal(ch.message.role, 'assistant');
    assert.equal(typeof ch.message.content, 'string');
    assert.ok(['stop', 'length'].includes(ch.finish_reason), `finish_reason ${ch.finish_reason}`);
    assert.ok('logprobs' in ch, 'choice.logprobs key missing (OpenAI sends null)');
  });
}

describe('lift serve on stories260K', () => {
  let srv;
  let openai;
  before(async () => {
    srv = await startServer({ model: STORIES });
    openai = client(srv);
  });
  after(async () => { if (srv) await srv.stop(); });

  it('GET /health answers 200', T, async () => {
    const r = await get(srv, '/health');
    assert.equal(r.status, 200);
  });

  it('GET /v1/models lists the model by its file name, then its aliases (SDK)', T, async () => {
    const models = [];
    for await (const m of openai.models.list()) models.push(m);
    assert.deepEqual(models.map((m) => m.id), ['stories260K', 'm'], JSON.stringify(models));
    assert.equal(models[0].object, 'model');
    assert.ok(Number.isInteger(models[0].created), 'created');
    assert.equal(typeof models[0].owned_by, 'string');
    const raw = await get(srv, '/v1/models');
    assert.equal(raw.json.object, 'list');
  });

  it('/tokenize and /detokenize round-trip', T, async () => {
    const t = await post(srv, '/tokenize', { prompt: PROMPT });
    assert.equal(t.status, 200, t.text);
    const ids = t.json.tokens;
    assert.ok(Array.isArray(ids) && ids.every(Number.isInteger), t.text);
    // With or without BOS, the text's ids are the reference's.
    assert.deepEqual(ids[0] === 1 ? ids : [1, ...ids], PROMPT_IDS, `tokens of ${JSON.stringify(PROMPT)}`);
    const c = await post(srv, '/tokenize', { content: PROMPT });
    assert.equal(c.status, 200, c.text);
    assert.deepEqual(c.json.tokens.filter((x) => x !== 1), PROMPT_IDS.slice(1));

    const d = await post(srv, '/detokenize', { tokens: PROMPT_IDS.slice(1) });
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.prompt, PROMPT);
    const dref = await post(srv, '/detokenize', { tokens: ref.generated_ids });
    assert.equal(dref.json.prompt, REF_TEXT);

    for (const s of ['Lily and Tom went to the park.', 'héllo wörld — 日本語 🙂!', 'a\nb\tc  d', '"quotes" \\ and {braces}']) {
      const tk = await post(srv, '/tokenize', { prompt: s });
      assert.equal(tk.status, 200, tk.text);
      const dk = await post(srv, '/detokenize', { tokens: tk.json.tokens });
      assert.equal(dk.status, 200, dk.text);
      assert.equal(dk.json.prompt, s, `round trip of ${JSON.stringify(s)} via ${JSON.stringify(tk.json.tokens)}`);
    }
  });

  it('greedy "Once upon a time" gives the reference continuation (SDK, non-streamed)', T, async () => {
    const c = await openai.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: REF_N, temperature: 0 });
    assertCompletion(c);
    assert.ok(c.choices[0].text.startsWith(', there was a little girl named Lily. She loved to play outside in the park.'), JSON.stringify(c.choices[0].text));
    assert.equal(c.choices[0].text, REF_TEXT);
    assert.equal(c.choices[0].finish_reason, 'length');
    assertUsage(c.usage, PROMPT_IDS.length, REF_N);
  });

  it('a prompt given as token ids is used as is', T, async () => {
    const c = await openai.completions.create({ model: 'm', prompt: PROMPT_IDS, max_tokens: REF_N, temperature: 0 });
    assert.equal(c.choices[0].text, REF_TEXT);
    assertUsage(c.usage, PROMPT_IDS.length, REF_N);
  });

  it('greedy continuation streamed (SDK) equals the non-streamed one, with an include_usage chunk', T, async () => {
    const stream = await openai.completions.create({
      model: 'stories260K', prompt: PROMPT, max_tokens: REF_N, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    let nChunks = 0;
    for await (const ch of stream) {
      ++nChunks;
      assert.equal(ch.object, 'text_completion');
      if (ch.usage) {
        assert.equal(usage, null, 'two usage chunks');
        assert.deepEqual(ch.choices, [], 'the usage chunk must have empty choices');
        usage = ch.usage;
        continue;
      }
      assert.equal(usage, null, 'a chunk after the usage chunk');
      assert.equal(ch.choices.length, 1);
      assert.equal(ch.choices[0].index, 0);
      text += ch.choices[0].text;
      if (ch.choices[0].finish_reason) {
        assert.equal(finish, null, 'two finish_reasons');
        finish = ch.choices[0].finish_reason;
      }
    }
    assert.ok(nChunks > 2, `only ${nChunks} chunks: not streamed`);
    assert.equal(text, REF_TEXT);
    assert.equal(finish, 'length');
    assertUsage(usage, PROMPT_IDS.length, REF_N);
  });

  it('completions SSE wire format (raw)', T, async () => {
    const r = await sse(srv, '/v1/completions', { model: 'm', prompt: PROMPT, max_tokens: 12, temperature: 0, stream: true });
    assert.equal(r.status, 200, r.raw);
    assert.match(r.headers.get('content-type') || '', /^text\/event-stream/);
    assert.ok(r.done, 'no data: [DONE]');
    assert.ok(r.events.length >= 2);
    for (const e of r.events) {
      assert.equal(e.object, 'text_completion');
      assert.equal(typeof e.id, 'string');
      assert.equal(e.id, r.events[0].id, 'id changes within one stream');
      assert.ok(!e.usage, 'usage chunk without stream_options.include_usage');
      assert.equal(e.choices.length, 1);
    }
    assert.equal(r.events.at(-1).choices[0].finish_reason, 'length');
    r.events.slice(0, -1).forEach((e) => assert.equal(e.choices[0].finish_reason, null));
    assert.equal(r.events.map((e) => e.choices[0].text).join(''), REF_TEXT.slice(0, r.events.map((e) => e.choices[0].text).join('').length));
  });

  it('chat completion (SDK, non-streamed) with usage and max_completion_tokens', T, async () => {
    const c = await openai.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me a story about a cat.' }],
      max_completion_tokens: 40, temperature: 0, ignore_eos: true, user: 'http-tests',
    });
    assertChat(c);
    assert.equal(c.choices[0].finish_reason, 'length');
    assertUsage(c.usage, undefined, 40);
    assert.ok(c.usage.prompt_tokens > 5, 'the chat template should add tokens around the messages');
  });

  it('chat streaming (SDK): role first, content deltas, finish, include_usage, same text as non-streamed', T, async () => {
    const req = { model: 'stories260K', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 30, temperature: 0 };
    const whole = await openai.chat.completions.create(req);
    const stream = await openai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const ch of stream) chunks.push(ch);
    const usageChunk = chunks.at(-1);
    assert.deepEqual(usageChunk.choices, [], 'last chunk must be the usage chunk with empty choices');
    assertUsage(usageChunk.usage, whole.usage.prompt_tokens, whole.usage.completion_tokens);
    const body = chunks.slice(0, -1);
    for (const ch of body) {
      assert.equal(ch.object, 'chat.completion.chunk');
      assert.equal(ch.id, body[0].id);
      assert.ok(ch.usage == null, 'usage on a non-final chunk must be null');
      assert.equal(ch.choices.length, 1);
      assert.equal(ch.choices[0].index, 0);
    }
    assert.equal(body[0].choices[0].delta.role, 'assistant');
    body.slice(1).forEach((ch) => assert.ok(!ch.choices[0].delta.role, 'role repeated after the first chunk'));
    const text = body.map((ch) => ch.choices[0].delta.content || '').join('');
    assert.equal(text, whole.choices[0].message.content);
    const finishes = body.filter((ch) => ch.choices[0].finish_reason);
    assert.equal(finishes.length, 1);
    assert.equal(finishes[0], body.at(-1), 'finish_reason must be on the last choice chunk');
    assert.equal(finishes[0].choices[0].finish_reason, whole.choices[0].finish_reason);
  });

  it('chat SSE wire format (raw): data: lines, [DONE] last', T, async () => {
    const r = await sse(srv, '/v1/chat/completions', {
      model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0, stream: true,
    });
    assert.equal(r.status, 200, r.raw);
    assert.match(r.headers.get('content-type') || '', /^text\/event-stream/);
    assert.ok(r.done, 'no data: [DONE]');
    assert.equal(r.events[0].choices[0].delta.role, 'assistant');
    assert.ok(r.events.every((e) => e.object === 'chat.completion.chunk'));
  });

  it('stop strings end the text before the stop string (completions and chat, streamed and not)', T, async () => {
    const expect = ', there was a little girl named ';
    for (const stop of ['Lily', ['zzz', 'Lily'], ['Lily.', 'named Lily', 'Lily']]) {
      const c = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: REF_N, temperature: 0, stop });
      const want = Array.isArray(stop) && stop.includes('named Lily') ? ', there was a little girl ' : expect;
      assert.equal(c.choices[0].text, want, `stop ${JSON.stringify(stop)}`);
      assert.equal(c.choices[0].finish_reason, 'stop');
      const s = await sse(srv, '/v1/completions', { model: 'm', prompt: PROMPT, max_tokens: REF_N, temperature: 0, stop, stream: true });
      assert.equal(s.events.map((e) => e.choices[0].text).join(''), want, `streamed, stop ${JSON.stringify(stop)}`);
      assert.equal(s.events.at(-1).choices[0].finish_reason, 'stop');
    }
    // A stop string that spans several tokens and sits in the middle of the text.
    const c2 = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: REF_N, temperature: 0, stop: 'in the park' });
    assert.equal(c2.choices[0].text, ', there was a little girl named Lily. She loved to play outside ');
    assert.equal(c2.choices[0].finish_reason, 'stop');
    assert.ok(c2.usage.completion_tokens < REF_N);
    // Chat.
    const chat = await openai.chat.completions.create({
      model: 'm', messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 60, temperature: 0, ignore_eos: true,
    });
    const text = chat.choices[0].message.content;
    const word = text.trim().split(/\s+/).find((w, i) => i >= 2 && w.length >= 3);
    if (word) {
      const cut = text.indexOf(word);
      const chat2 = await openai.chat.completions.create({
        model: 'm', messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 60, temperature: 0, ignore_eos: true, stop: [word],
      });
      assert.equal(chat2.choices[0].message.content, text.slice(0, cut), `chat stop ${JSON.stringify(word)}`);
      assert.equal(chat2.choices[0].finish_reason, 'stop');
    }
  });

  it('n > 1: choices indexed 0..n-1, usage counts all of them (non-streamed and streamed)', T, async () => {
    const c = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 20, temperature: 1, n: 3, seed: 7, ignore_eos: true });
    assertCompletion(c, 3);
    assertUsage(c.usage, PROMPT_IDS.length, 60);
    const s = await sse(srv, '/v1/completions', {
      model: 'm', prompt: PROMPT, max_tokens: 20, temperature: 1, n: 2, seed: 7, ignore_eos: true, stream: true,
      stream_options: { include_usage: true },
    });
    assert.ok(s.done);
    const texts = ['', ''];
    const finish = [null, null];
    for (const e of s.events) {
      if (e.usage) { assertUsage(e.usage, PROMPT_IDS.length, 40); continue; }
      for (const ch of e.choices) {
        assert.ok(ch.index === 0 || ch.index === 1, `index ${ch.index}`);
        texts[ch.index] += ch.text;
        if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
      }
    }
    assert.deepEqual(finish, ['length', 'length']);
    assert.ok(texts[0].length > 0 && texts[1].length > 0);
    const chat = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10, temperature: 1, n: 2, ignore_eos: true });
    assertChat(chat, 2);
    assertUsage(chat.usage, undefined, 20);
  });

  it('same seed at temperature 1 gives the same text; other seeds differ', T, async () => {
    const req = { model: 'm', prompt: PROMPT, max_tokens: 40, temperature: 1, ignore_eos: true };
    const a = await openai.completions.create({ ...req, seed: 1234 });
    const b = await openai.completions.create({ ...req, seed: 1234 });
    assert.equal(a.choices[0].text, b.choices[0].text);
    const s = await sse(srv, '/v1/completions', { ...req, seed: 1234, stream: true });
    assert.equal(s.events.map((e) => e.choices[0].text).join(''), a.choices[0].text, 'streamed run with the same seed');
    const others = [];
    for (const seed of [1, 2, 3]) others.push((await openai.completions.create({ ...req, seed })).choices[0].text);
    assert.ok(others.some((t) => t !== a.choices[0].text), 'three other seeds all gave the same text');
    const ca = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30, temperature: 1, seed: 99 });
    const cb = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30, temperature: 1, seed: 99 });
    assert.equal(ca.choices[0].message.content, cb.choices[0].message.content);
  });

  it('completions logprobs: 3 gives tokens, token_logprobs, top_logprobs (3 each), text_offset', T, async () => {
    const c = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 3 });
    const lp = c.choices[0].logprobs;
    assert.ok(lp && typeof lp === 'object', `logprobs: ${JSON.stringify(lp)}`);
    const n = c.usage.completion_tokens;
    assert.equal(n, 10);
    for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
      assert.ok(Array.isArray(lp[k]), `${k} not an array`);
      assert.equal(lp[k].length, n, `${k} length`);
    }
    assert.equal(lp.tokens.join(''), c.choices[0].text, 'tokens must concatenate to the text');
    for (let i = 0; i < n; ++i) {
      assert.equal(typeof lp.tokens[i], 'string');
      assert.ok(lp.token_logprobs[i] <= 0, `token_logprobs[${i}]=${lp.token_logprobs[i]}`);
      const top = lp.top_logprobs[i];
      assert.ok(top && typeof top === 'object' && !Array.isArray(top), `top_logprobs[${i}]: ${JSON.stringify(top)}`);
      const vals = Object.values(top);
      assert.ok(vals.length >= 1 && vals.length <= 3, `top_logprobs[${i}] has ${vals.length} entries`);
      vals.forEach((v) => assert.ok(typeof v === 'number' && v <= 0));
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(lp.token_logprobs[i] - Math.max(...vals)) < 1e-4, `greedy token ${i} is not the top: ${lp.token_logprobs[i]} vs ${JSON.stringify(top)}`);
    }
    assert.equal(lp.text_offset[0] >= 0, true);
    for (let i = 1; i < n; ++i) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length, 'text_offset');
    // Most positions of a TinyStories continuation have 3 distinct strings among the top 3.
    assert.ok(lp.top_logprobs.filter((t) => Object.keys(t).length === 3).length >= n / 2);
    // Streamed, logprobs come with each chunk.
    const s = await sse(srv, '/v1/completions', { model: 'm', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 3, stream: true });
    const toks = s.events.flatMap((e) => e.choices[0].logprobs?.tokens || []);
    assert.deepEqual(toks, lp.tokens, 'streamed logprobs tokens');
    // Offsets run on across chunks: into the whole text, as unstreamed.
    const offs = s.events.flatMap((e) => e.choices[0].logprobs?.text_offset || []);
    assert.deepEqual(offs, lp.text_offset, 'streamed text_offset');
  });

  it('chat logprobs: true with top_logprobs: 2', T, async () => {
    const c = await openai.chat.completions.create({
      model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 2,
    });
    const content = c.choices[0].logprobs?.content;
    assert.ok(Array.isArray(content), `choices[0].logprobs.content: ${JSON.stringify(c.choices[0].logprobs)}`);
    assert.equal(content.length, 8);
    for (const e of content) {
      assert.equal(typeof e.token, 'string');
      assert.ok(typeof e.logprob === 'number' && e.logprob <= 0);
      assert.ok(e.bytes === null || (Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256)), 'bytes');
      assert.ok(Array.isArray(e.top_logprobs), 'top_logprobs');
      assert.equal(e.top_logprobs.length, 2);
      for (const t of e.top_logprobs) {
        assert.equal(typeof t.token, 'string');
        assert.ok(typeof t.logprob === 'number' && t.logprob <= 0);
      }
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, 'top_logprobs sorted');
      assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4, 'greedy token is the top one');
    }
    assert.equal(content.map((e) => e.token).join(''), c.choices[0].message.content);
    const plain = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    assert.equal(plain.choices[0].logprobs, null, 'logprobs must be null when not asked for');
  });

  it('sampling extras: top_k 1 and tiny top_p are greedy; logit_bias forces and bans tokens; penalties accepted', T, async () => {
    const base = { model: 'm', prompt: PROMPT, max_tokens: REF_N };
    const k1 = await openai.completions.create({ ...base, temperature: 1, top_k: 1, seed: 5 });
    assert.equal(k1.choices[0].text, REF_TEXT, 'top_k 1');
    const p0 = await openai.completions.create({ ...base, temperature: 1, top_p: 1e-6, seed: 5 });
    assert.equal(p0.choices[0].text, REF_TEXT, 'top_p 1e-6');
    const mp = await openai.completions.create({ ...base, temperature: 1, min_p: 1, seed: 5 });
    assert.equal(mp.choices[0].text, REF_TEXT, 'min_p 1');
    // Token 13 is the byte <0x0A>, "\n".
    const nl = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 5, temperature: 0, logit_bias: { 13: 100 } });
    assert.equal(nl.choices[0].text, '\n\n\n\n\n', 'logit_bias +100 on "\\n"');
    const ban = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 5, temperature: 0, logit_bias: { [ref.generated_ids[0]]: -100 } });
    assert.ok(!ban.choices[0].text.startsWith(', there'), `logit_bias -100 did not ban the greedy token: ${JSON.stringify(ban.choices[0].text)}`);
    for (const extra of [{ presence_penalty: 1.5 }, { frequency_penalty: 1.5 }, { repetition_penalty: 1.3 }, { presence_penalty: -1, frequency_penalty: -1 }]) {
      const r = await openai.completions.create({ ...base, temperature: 0, ...extra });
      assertCompletion(r);
    }
    const pen = await openai.completions.create({ ...base, temperature: 0, frequency_penalty: 2 });
    assert.notEqual(pen.choices[0].text, REF_TEXT, 'frequency_penalty 2 changed nothing over 56 tokens');
  });

  it('ignore_eos and min_tokens', T, async () => {
    const c = await openai.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 300, temperature: 0, ignore_eos: true });
    assert.equal(c.usage.completion_tokens, 300);
    assert.equal(c.choices[0].finish_reason, 'length');
    const m = await openai.completions.create({ model: 'm', prompt: 'The end.', max_tokens: 40, min_tokens: 12, temperature: 1, seed: 3 });
    assert.ok(m.usage.completion_tokens >= 12, `min_tokens 12 but ${m.usage.completion_tokens} tokens`);
  });

  it('/metrics: Prometheus text with every required metric; counters move with requests', T, async () => {
    await assertIdle(srv, 5000, 'before /metrics check');
    const r = await get(srv, '/metrics');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') || '', /^text\/plain/);
    const m0 = await metrics(srv);
    for (const name of [RUNNING, WAITING, 'lift:kv_cache_usage_perc', KV_USED, 'lift:prefix_cache_queries_total',
      'lift:prefix_cache_hits_total', 'lift:num_preemptions_total', PROMPT_TOKENS, GEN_TOKENS]) {
      metric(m0, name);
    }
    for (const h of ['lift:time_to_first_token_seconds', 'lift:inter_token_latency_seconds', 'lift:e2e_request_latency_seconds',
      'lift:request_queue_time_seconds']) {
      assert.match(r.text, new RegExp(`^# TYPE ${h} histogram$`, 'm'), `${h} TYPE line`);
      assert.match(r.text, new RegExp(`^${h}_bucket\\{[^}]*le="\\+Inf"[^}]*\\} \\d+`, 'm'), `${h} +Inf bucket`);
      metric(m0, `${h}_sum`);
      metric(m0, `${h}_count`);
    }
    assert.equal(metric(m0, RUNNING), 0);
    assert.equal(metric(m0, KV_USED), 0);
    const c = await openai.completions.create({ model: 'm', prompt: 'Tom had a red ball', max_tokens: 17, temperature: 0, ignore_eos: true });
    // Counters may trail the response by an engine step: wait (≤ 1 s) for the request to be counted.
    const { m: m1 } = await pollMetrics(srv, (m) => m.get('lift:e2e_request_latency_seconds_count') > m0.get('lift:e2e_request_latency_seconds_count')
      && m.get(GEN_TOKENS) - m0.get(GEN_TOKENS) >= 17, { ms: 1000 });
    assert.equal(metric(m1, PROMPT_TOKENS) - metric(m0, PROMPT_TOKENS), c.usage.prompt_tokens, 'prompt_tokens_total delta');
    assert.equal(metric(m1, GEN_TOKENS) - metric(m0, GEN_TOKENS), 17, 'generation_tokens_total delta');
    assert.equal(metric(m1, 'lift:e2e_request_latency_seconds_count') - metric(m0, 'lift:e2e_request_latency_seconds_count'), 1);
    assert.equal(metric(m1, 'lift:time_to_first_token_seconds_count') - metric(m0, 'lift:time_to_first_token_seconds_count'), 1);
    // The same long prompt twice: the second run finds its full blocks in the prefix cache.
    const long = 'Once upon a time there was a little dog named Max. Max liked to run and play in the big green park with his friends every day.';
    await openai.completions.create({ model: 'm', prompt: long, max_tokens: 2, temperature: 0 });
    const m2 = await metrics(srv);
    await openai.completions.create({ model: 'm', prompt: long, max_tokens: 2, temperature: 0 });
    const { m: m3 } = await pollMetrics(srv, (m) => m.get(RUNNING) === 0 && m.get(KV_USED) === 0, { ms: 1000 });
    assert.ok(metric(m3, 'lift:prefix_cache_queries_total') - metric(m2, 'lift:prefix_cache_queries_total') >= 16, 'prefix cache queries of a long prompt');
    assert.ok(metric(m3, 'lift:prefix_cache_hits_total') - metric(m2, 'lift:prefix_cache_hits_total') >= 16, 'prefix cache hits on a repeated prompt');
    assert.equal(metric(m3, RUNNING), 0);
    assert.equal(metric(m3, KV_USED), 0);
  });
});
