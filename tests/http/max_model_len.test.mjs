// --max-model-len (-c) and the memory defaults: a chat request without max_tokens is given what
// is left of max-model-len after its prompt (as vLLM does) and completes on each small model;
// prompt + max_tokens beyond it is a 400; a -c above the model's context stops the start-up.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LLAMA_RANDOM, STORIES, startServer } from './lib/server.mjs';
import { assertError, assertIdle, get, post } from './lib/http.mjs';

const T = { timeout: 60000 };

async function maxModelLen(srv) {
  const r = await get(srv, '/v1/models');
  assert.equal(r.status, 200, r.text);
  return r.json.data[0].max_model_len;
}

for (const [name, model, context] of [['stories260K', STORIES, 2048], ['llama-2-tiny-random', LLAMA_RANDOM, 4096]]) {
  describe(`${name} with the default memory options`, () => {
    let srv;
    before(async () => { srv = await startServer({ model }); });
    after(async () => { if (srv) await srv.stop(); });

    it('max-model-len is the model context (under the 8192 cap)', T, async () => {
      assert.equal(await maxModelLen(srv), context);
    });

    it('a chat request without max_tokens runs to the end of max-model-len', T, async () => {
      const r = await post(srv, '/v1/chat/completions', {
        model: 'm', messages: [{ role: 'user', content: 'Tell me a story.' }], temperature: 0, ignore_eos: true,
      });
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.equal(r.json.choices[0].finish_reason, 'length');
      const u = r.json.usage;
      assert.equal(u.prompt_tokens + u.completion_tokens, context);
      await assertIdle(srv);
    });
  });
}

describe('lift serve -c 200', () => {
  let srv;
  before(async () => { srv = await startServer({ args: ['-c', '200'] }); });
  after(async () => { if (srv) await srv.stop(); });

  it('reports it and fills a chat request up to it', T, async () => {
    assert.equal(await maxModelLen(srv), 200);
    const r = await post(srv, '/v1/chat/completions', {
      model: 'm', messages: [{ role: 'user', content: 'Hello' }], temperature: 0, ignore_eos: true,
    });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(r.json.usage.prompt_tokens + r.json.usage.completion_tokens, 200);
  });

  it('prompt + max_tokens beyond it is a 400 naming the numbers', T, async () => {
    const r = await post(srv, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 199 });
    assertError(r, 400, 'max_tokens');
    assert.match(r.json.error.message, /maximum context length is 200 tokens/);
    assert.equal(r.json.error.code, 'context_length_exceeded');
    const fits = await post(srv, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 195 });
    assert.equal(fits.status, 200, fits.text.slice(0, 300));
  });
});

describe('lift serve -c above the model context', () => {
  it('does not start, and says why', T, async () => {
    await assert.rejects(startServer({ args: ['-c', '4096'], readyMs: 10000 }),
      /--max-model-len 4096 is longer than the model's context of 2048 tokens/);
  });
});
