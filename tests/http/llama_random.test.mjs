// llama-2-tiny-random: the real 32000-token Llama 2 vocabulary (byte-fallback tokens, multi-byte
// characters split across tokens) with random weights. 500 tokens at temperature 1.5 must come
// back as valid UTF-8 JSON, streamed and not, and the server must keep serving.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LLAMA_RANDOM, startServer } from './lib/server.mjs';
import { assertIdle, client, post, sse } from './lib/http.mjs';

const T = { timeout: 60000 };
const N = 500;

describe('llama-2-tiny-random at temperature 1.5', () => {
  let srv;
  before(async () => { srv = await startServer({ model: LLAMA_RANDOM }); });
  after(async () => { if (srv) await srv.stop(); });

  it('GET /v1/models names it llama-2-tiny-random', T, async () => {
    const ids = [];
    for await (const m of client(srv).models.list()) ids.push(m.id);
    assert.deepEqual(ids, ['llama-2-tiny-random', 'm']);
  });

  it(`${N} tokens non-streamed: strict UTF-8 JSON, text is a string`, T, async () => {
    for (const seed of [1, 2, 3]) {
      // post() decodes with a fatal UTF-8 decoder and JSON.parse.
      const r = await post(srv, '/v1/completions', {
        model: 'm', prompt: 'Once upon a time', max_tokens: N, temperature: 1.5, seed, ignore_eos: true,
      });
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.ok(r.json, 'body is not JSON');
      assert.equal(typeof r.json.choices[0].text, 'string');
      assert.equal(r.json.usage.completion_tokens, N);
    }
  });

  it(`${N} tokens streamed: every chunk strict UTF-8 JSON; the text equals the non-streamed one`, T, async () => {
    for (const seed of [1, 4]) {
      const body = { model: 'm', prompt: 'Once upon a time', max_tokens: N, temperature: 1.5, seed, ignore_eos: true };
      const s = await sse(srv, '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
      assert.equal(s.status, 200, s.raw?.slice(0, 300));
      assert.ok(s.done, 'no [DONE]');
      const text = s.events.map((e) => {
        if (e.choices.length === 0) return '';
        assert.equal(typeof e.choices[0].text, 'string');
        return e.choices[0].text;
      }).join('');
      assert.equal(s.events.at(-1).usage?.completion_tokens, N);
      const whole = await post(srv, '/v1/completions', body);
      assert.equal(text, whole.json.choices[0].text, 'streamed and non-streamed texts differ for the same seed');
    }
  });

  it('chat at temperature 1.5, streamed and not, with logprobs: strict UTF-8 JSON', T, async () => {
    const body = {
      model: 'm', messages: [{ role: 'user', content: 'Écris une histoire 日本語 🙂' }], max_tokens: 200, temperature: 1.5,
      seed: 5, ignore_eos: true, logprobs: true, top_logprobs: 3,
    };
    const r = await post(srv, '/v1/chat/completions', body);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(typeof r.json.choices[0].message.content, 'string');
    for (const t of r.json.choices[0].logprobs.content) {
      assert.equal(typeof t.token, 'string');
      t.top_logprobs.forEach((x) => assert.equal(typeof x.token, 'string'));
    }
    const s = await sse(srv, '/v1/chat/completions', { ...body, stream: true });
    assert.ok(s.done);
    const text = s.events.map((e) => e.choices[0]?.delta?.content || '').join('');
    assert.equal(text, r.json.choices[0].message.content);
  });

  it('completions logprobs at temperature 1.5: token strings are valid UTF-8 JSON', T, async () => {
    const r = await post(srv, '/v1/completions', {
      model: 'm', prompt: 'Hello', max_tokens: 200, temperature: 1.5, seed: 9, ignore_eos: true, logprobs: 5,
    });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    const lp = r.json.choices[0].logprobs;
    assert.equal(lp.tokens.length, 200);
    lp.tokens.forEach((t) => assert.equal(typeof t, 'string'));
  });

  it('the server still serves afterwards', T, async () => {
    await assertIdle(srv, 2000, 'after the random-model runs');
    const c = await client(srv).completions.create({ model: 'm', prompt: 'Hello', max_tokens: 8, temperature: 0 });
    assert.equal(c.choices[0].finish_reason === 'length' || c.choices[0].finish_reason === 'stop', true);
    const tk = await post(srv, '/tokenize', { prompt: 'Once upon a time' });
    assert.deepEqual(tk.json.tokens.filter((x) => x !== 1), [9038, 2501, 263, 931]);
  });
});
