// Error handling: every bad request gets its 4xx status and OpenAI's error JSON
// {"error": {"message", "type", "param", "code"}}, and the server keeps serving afterwards.
// Also --api-key (401) and --max-body-bytes (413).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { STORIES, startServer } from './lib/server.mjs';
import { assertError, assertServes, client, get, post, randomTokens, rawHttp, rawPost, statuses } from './lib/http.mjs';

const T = { timeout: 60000 };
const MAX_BODY = 65536;
const ok = { model: 'm', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 };
const okChat = { model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 };

// [what, path, body (object or raw string), status]
const cases = [
  ['malformed JSON', '/v1/completions', '{"model": "m", "prompt": "Once', 400],
  ['JSON that is not an object', '/v1/completions', '[1, 2, 3]', 400],
  ['empty body', '/v1/completions', '', 400],
  ['missing prompt', '/v1/completions', { model: 'm', max_tokens: 4 }, 400],
  ['prompt of the wrong type', '/v1/completions', { ...ok, prompt: 42 }, 400],
  ['prompt token id out of the vocabulary', '/v1/completions', { ...ok, prompt: [1, 403, 99999] }, 400],
  ['prompt token id negative', '/v1/completions', { ...ok, prompt: [1, -5] }, 400],
  ['max_tokens a string', '/v1/completions', { ...ok, max_tokens: 'ten' }, 400],
  ['max_tokens negative', '/v1/completions', { ...ok, max_tokens: -5 }, 400],
  ['max_tokens fractional', '/v1/completions', { ...ok, max_tokens: 2.5 }, 400],
  ['temperature a string', '/v1/completions', { ...ok, temperature: 'hot' }, 400],
  ['temperature negative', '/v1/completions', { ...ok, temperature: -1 }, 400],
  ['top_p above 1', '/v1/completions', { ...ok, top_p: 1.5 }, 400],
  ['n zero', '/v1/completions', { ...ok, n: 0 }, 400],
  ['presence_penalty above 2', '/v1/completions', { ...ok, presence_penalty: 3 }, 400],
  ['frequency_penalty below -2', '/v1/completions', { ...ok, frequency_penalty: -2.5 }, 400],
  ['stop of the wrong type', '/v1/completions', { ...ok, stop: 7 }, 400],
  ['stream of the wrong type', '/v1/completions', { ...ok, stream: 'yes' }, 400],
  ['seed a string', '/v1/completions', { ...ok, seed: 'abc' }, 400],
  ['logit_bias token out of the vocabulary', '/v1/completions', { ...ok, logit_bias: { 99999: 5 } }, 400],
  ['logit_bias value above 100', '/v1/completions', { ...ok, logit_bias: { 13: 1000 } }, 400],
  ['logprobs negative', '/v1/completions', { ...ok, logprobs: -1 }, 400],
  ['prompt longer than the context (token ids)', '/v1/completions', { ...ok, prompt: randomTokens(2100, 1) }, 400],
  ['prompt longer than the context (text)', '/v1/completions', { ...ok, prompt: 'the cat sat on the mat. '.repeat(700) }, 400],
  ['missing messages', '/v1/chat/completions', { model: 'm', max_tokens: 4 }, 400],
  ['messages not an array', '/v1/chat/completions', { ...okChat, messages: 'Hi' }, 400],
  ['empty messages', '/v1/chat/completions', { ...okChat, messages: [] }, 400],
  ['message with an unknown role', '/v1/chat/completions', { ...okChat, messages: [{ role: 'wizard', content: 'Hi' }] }, 400],
  ['message content of the wrong type', '/v1/chat/completions', { ...okChat, messages: [{ role: 'user', content: 5 }] }, 400],
  ['chat logprobs not a bool', '/v1/chat/completions', { ...okChat, logprobs: 'yes' }, 400],
  ['chat top_logprobs negative', '/v1/chat/completions', { ...okChat, logprobs: true, top_logprobs: -1 }, 400],
  ['chat max_completion_tokens negative', '/v1/chat/completions', { ...okChat, max_completion_tokens: -1 }, 400],
  ['/tokenize without prompt', '/tokenize', { nothing: 1 }, 400],
  ['/detokenize with ids out of the vocabulary', '/detokenize', { tokens: [1, 99999] }, 400],
  ['/detokenize with tokens not an array', '/detokenize', { tokens: 'abc' }, 400],
];

describe('errors on stories260K', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES, args: ['--max-body-bytes', String(MAX_BODY)] }); });
  after(async () => { if (srv) await srv.stop(); });

  for (const [what, path, body, status] of cases) {
    it(`${what} -> ${status}, then a normal request works`, T, async () => {
      const r = await post(srv, path, body);
      assertError(r, status, `POST ${path} (${what})`);
      await assertServes(srv, what);
    });
  }

  it('the same errors streamed (stream: true) are plain JSON errors, not SSE', T, async () => {
    const r = await post(srv, '/v1/completions', { ...ok, temperature: -1, stream: true });
    assertError(r, 400, 'stream with temperature -1');
    const c = await post(srv, '/v1/chat/completions', { ...okChat, messages: [], stream: true });
    assertError(c, 400, 'stream with empty messages');
    await assertServes(srv, 'streamed errors');
  });

  it('unknown routes -> 404 with an error body', T, async () => {
    assertError(await get(srv, '/v1/nope'), 404, 'GET /v1/nope');
    assertError(await post(srv, '/v1/engines/x/completions', ok), 404, 'POST /v1/engines/x/completions');
    await assertServes(srv, '404');
  });

  it(`body over --max-body-bytes (${MAX_BODY}) -> 413`, T, async () => {
    const r = await post(srv, '/v1/completions', { ...ok, prompt: 'a '.repeat(MAX_BODY) });
    assertError(r, 413, 'oversized body');
    await assertServes(srv, '413');
  });

  it('the SDK surfaces errors as typed APIError with the server message', T, async () => {
    const openai = client(srv);
    await assert.rejects(
      openai.completions.create({ ...ok, temperature: -1 }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.status, 400);
        assert.equal(typeof e.error?.message, 'string');
        assert.ok(e.error.message.length > 0);
        return true;
      },
    );
    await assert.rejects(
      openai.chat.completions.create({ ...okChat, stream: true, top_p: 7 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400,
    );
    const c = await openai.completions.create(ok);
    assert.equal(c.choices.length, 1);
  });
});

describe('--api-key', () => {
  const KEY = 'sk-lift-test-0123456789';
  let srv;
  before(async () => { srv = await startServer({ model: STORIES, apiKey: KEY }); });
  after(async () => { if (srv) await srv.stop(); });

  it('requests without or with a wrong key -> 401; with the key -> 200', T, async () => {
    // No Authorization header at all (post() would add the server's key).
    const bare = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(ok), signal: AbortSignal.timeout(10000),
    });
    const bareText = await bare.text();
    let bareJson;
    try { bareJson = JSON.parse(bareText); } catch { bareJson = undefined; }
    assertError({ status: bare.status, text: bareText, json: bareJson }, 401, 'no Authorization header');
    assertError(await post(srv, '/v1/completions', ok, { headers: { Authorization: 'Bearer wrong-key' } }), 401, 'wrong key');
    assertError(await post(srv, '/v1/chat/completions', okChat, { headers: { Authorization: `Basic ${KEY}` } }), 401, 'not Bearer');
    assertError(await get(srv, '/v1/models', { headers: { Authorization: 'Bearer nope' } }), 401, 'models with a wrong key');
    const good = await post(srv, '/v1/completions', ok);
    assert.equal(good.status, 200, good.text);
  });

  it('a 401 leaves a keep-alive connection usable (the rejected body is not parsed as the next request)', T, async () => {
    // The client sends headers, then the body a little later (as fetch may), then a good
    // request on the same connection: the answers must be 401, then 200.
    const bad = rawPost('/v1/completions', ok, { Authorization: 'Bearer wrong-key' });
    const good = rawPost('/v1/completions', ok, { Authorization: `Bearer ${KEY}`, Connection: 'close' });
    const r = await rawHttp(srv, [bad.head, 100, bad.body, 300, good.head + good.body], { timeoutMs: 10000 });
    const first = r.text.split('\r\n\r\n')[0];
    if (/^connection:\s*close\s*$/im.test(first)) {
      // Closing the connection after the 401 is fine too; the client then reconnects.
      assert.deepEqual(statuses(r.text), [401], `401 with Connection: close, then:\n${r.text.slice(0, 600)}`);
    } else {
      assert.deepEqual(statuses(r.text), [401, 200], `two requests on one kept-alive connection; got:\n${r.text.slice(0, 600)}`);
    }
  });

  it('the SDK with a wrong key gets AuthenticationError; with the key it works', T, async () => {
    const bad = client(srv, { apiKey: 'sk-wrong' });
    await assert.rejects(bad.completions.create(ok), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const good = client(srv);
    const c = await good.chat.completions.create(okChat);
    assert.equal(c.choices[0].message.role, 'assistant');
    const models = [];
    for await (const m of good.models.list()) models.push(m.id);
    assert.deepEqual(models, ['stories260K', 'm']);
  });
});
