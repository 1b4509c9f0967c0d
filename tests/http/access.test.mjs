// Who may use the server and how much a hostile request can cost: browser origins (CORS),
// DNS rebinding (Host), API keys from every source, unknown model names, bodies built to
// crash parsers, oversized heads and bodies refused before they are read, HTTP framing
// edge cases, and one access-log line per request.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { STORIES, sleep, startServer } from './lib/server.mjs';
import { assertError, assertServes, get, post, rawHttp, rawPost, statuses } from './lib/http.mjs';

const T = { timeout: 60000 };
const ok = { model: 'm', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 };

function raw(method, p, { headers = {}, body = '' } = {}) {
  const h = { Host: '127.0.0.1', ...headers };
  if (body && !('Content-Length' in h) && !('Transfer-Encoding' in h)) h['Content-Length'] = Buffer.byteLength(body);
  return `${method} ${p} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}`;
}

// Headers of the first response in a raw byte stream, lower-cased names.
function headersOf(text) {
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  const out = {};
  for (const line of head.split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    out[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

describe('origins, hosts and hostile bodies (default server: loopback, no key)', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES }); });
  after(async () => { if (srv) await srv.stop(); });

  it('a request from a web page (Origin) gets 403; curl and the SDKs, which send none, are served', T, async () => {
    const r = await post(srv, '/v1/completions', ok, { headers: { Origin: 'http://evil.example' } });
    assertError(r, 403, 'POST with a foreign Origin');
    assert.equal(r.json.error.code, 'origin_not_allowed');
    assertError(await get(srv, '/v1/models', { headers: { Origin: 'http://evil.example' } }), 403, 'GET with a foreign Origin');
    const pre = await rawHttp(srv, [raw('OPTIONS', '/v1/completions', {
      headers: { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'POST', Connection: 'close' },
    })]);
    assert.deepEqual(statuses(pre.text), [403], 'preflight from a foreign origin');
    assert.ok(!('access-control-allow-origin' in headersOf(pre.text)));
    await assertServes(srv, 'after foreign origins');
  });

  it('DNS rebinding: a Host that is not a loopback name gets 403; loopback names are served', T, async () => {
    const bad = await rawHttp(srv, [raw('GET', '/health', { headers: { Host: 'attacker.example:8080', Connection: 'close' } })]);
    assert.deepEqual(statuses(bad.text), [403], bad.text.slice(0, 300));
    assert.match(bad.text, /host_not_allowed/);
    for (const host of ['localhost', `localhost:${srv.port}`, '127.0.0.1', `127.0.0.2:${srv.port}`, `[::1]:${srv.port}`, 'app.localhost']) {
      const r = await rawHttp(srv, [raw('GET', '/health', { headers: { Host: host, Connection: 'close' } })]);
      assert.deepEqual(statuses(r.text), [200], `Host: ${host} -> ${r.text.slice(0, 200)}`);
    }
  });

  it('JSON nested 100,000 deep (in n, messages, logit_bias, stop) gets 400 and the server keeps serving', T, async () => {
    const deep = '['.repeat(100000) + ']'.repeat(100000);
    const bodies = [
      ['/v1/completions', `{"model":"m","prompt":"x","n":${deep}}`],
      ['/v1/chat/completions', `{"model":"m","messages":${deep}}`],
      ['/v1/completions', `{"model":"m","prompt":"x","logit_bias":{"1":${deep}}}`],
      ['/v1/completions', `{"model":"m","prompt":"x","stop":${'{"a":'.repeat(50000)}1${'}'.repeat(50000)}}`],
      ['/tokenize', `{"prompt":${deep}}`],
      ['/detokenize', `{"tokens":${deep}}`],
    ];
    for (const [p, body] of bodies) {
      const r = await post(srv, p, body);
      assertError(r, 400, `${p} with deep nesting`);
      assert.ok(r.text.length < 1000, `the error echoes the body: ${r.text.length} bytes`);
    }
    await assertServes(srv, 'after deep nesting');
  });

  it('error messages quote a huge value briefly', T, async () => {
    const huge = 'x'.repeat(1 << 20);
    for (const body of [{ ...ok, max_tokens: huge }, { ...ok, temperature: [huge, huge] }, { ...ok, logit_bias: { [huge]: 1 } }]) {
      const r = await post(srv, '/v1/completions', body);
      assertError(r, 400, 'huge value');
      assert.ok(r.text.length < 1000, `error body of ${r.text.length} bytes`);
    }
  });

  it('an unknown model gets 404 model_not_found; the served names work', T, async () => {
    const r = await post(srv, '/v1/completions', { ...ok, model: 'gpt-4o' });
    assertError(r, 404, 'unknown model');
    assert.equal(r.json.error.code, 'model_not_found');
    assert.equal(r.json.error.param, 'model');
    for (const model of ['stories260K', 'm']) {
      assert.equal((await post(srv, '/v1/completions', { ...ok, model })).status, 200, model);
    }
    const { model, ...noModel } = ok;
    assert.equal((await post(srv, '/v1/completions', noModel)).status, 200, 'no model field');
  });

  it('heads beyond the limits get 431, bodies beyond --max-body-bytes 413 before they are sent', T, async () => {
    const many = {};
    for (let i = 0; i < 200; ++i) many[`X-H${i}`] = 'v';
    const a = await rawHttp(srv, [raw('GET', '/health', { headers: many })]);
    assert.deepEqual(statuses(a.text), [431]);
    const b = await rawHttp(srv, [raw('GET', '/health', { headers: { 'X-Big': 'y'.repeat(20000) } })]);
    assert.deepEqual(statuses(b.text), [431]);
    // The head announces 100 MB; the answer comes at once, without waiting for any of it.
    const c = await rawHttp(srv, [raw('POST', '/v1/completions', { headers: { 'Content-Length': '100000000', 'Content-Type': 'application/json' } })], { timeoutMs: 5000 });
    assert.deepEqual(statuses(c.text), [413], c.text.slice(0, 200));
    assert.ok(c.ms < 1000, `413 after ${c.ms} ms`);
    await assertServes(srv, 'after oversized heads');
  });

  it('HTTP framing: chunked bodies, Expect: 100-continue, pipelining, and malformed requests', T, async () => {
    const body = JSON.stringify(ok);
    const chunked = `${(body.length >> 1).toString(16)}\r\n${body.slice(0, body.length >> 1)}\r\n` +
      `${(body.length - (body.length >> 1)).toString(16)};ext=1\r\n${body.slice(body.length >> 1)}\r\n0\r\n\r\n`;
    const ch = await rawHttp(srv, [raw('POST', '/v1/completions', {
      headers: { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/json', Connection: 'close' }, body: chunked,
    })]);
    assert.deepEqual(statuses(ch.text), [200], ch.text.slice(0, 300));
    const { head, body: b } = rawPost('/v1/completions', ok, { Expect: '100-continue', Connection: 'close' });
    const ex = await rawHttp(srv, [head, 300, b]);
    assert.deepEqual(statuses(ex.text), [100, 200], ex.text.slice(0, 300));
    const pipe = await rawHttp(srv, [raw('GET', '/health') + raw('POST', '/v1/completions', { body }) +
      raw('GET', '/health', { headers: { Connection: 'close' } })]);
    assert.deepEqual(statuses(pipe.text), [200, 200, 200]);
    // Generations pipelined behind each other each get their own answer, once.
    const first = JSON.stringify({ ...ok, prompt: 'Once upon a time', max_tokens: 1 });
    const second = JSON.stringify({ ...ok, prompt: 'Tom and Sue went to the park to play', max_tokens: 2 });
    for (let i = 0; i < 10; ++i) {
      const two = await rawHttp(srv, [raw('POST', '/v1/completions', { body: first }) +
        raw('POST', '/v1/completions', { body: second, headers: { Connection: 'close' } })]);
      assert.deepEqual(statuses(two.text), [200, 200], two.text.slice(0, 300));
      const usage = [...two.text.matchAll(/"completion_tokens":(\d+)/g)].map((m) => Number(m[1]));
      assert.deepEqual(usage, [1, 2], `answers out of order or repeated: ${two.text.slice(0, 600)}`);
    }
    // Thousands of pipelined requests in one write are answered in order, none lost.
    const many = raw('GET', '/health').repeat(20000) + raw('GET', '/health', { headers: { Connection: 'close' } });
    const burst = await rawHttp(srv, [many], { timeoutMs: 30000 });
    assert.equal(statuses(burst.text).filter((x) => x === 200).length, 20001, burst.error || '');
    const bad = [
      ['GARBAGE\r\n\r\n', 400],
      ['GET /health HTTP/2.0\r\nHost: x\r\n\r\n', 505],
      ['GET /health HTTP/1.1\r\n\r\n', 400],  // no Host
      [raw('POST', '/v1/completions', { headers: { 'Content-Length': '5', 'Transfer-Encoding': 'chunked' }, body: '0\r\n\r\n' }), 400],
      [raw('POST', '/v1/completions', { headers: { 'Content-Length': '-1' } }), 400],
      [raw('POST', '/v1/completions', { headers: { 'Transfer-Encoding': 'gzip' } }), 501],
      [raw('POST', '/v1/completions', { headers: { 'Transfer-Encoding': 'chunked' }, body: 'zz\r\n\r\n' }), 400],
      ['GET /health HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n', 400],
      [raw('DELETE', '/v1/completions', { headers: { Connection: 'close' } }), 405],
    ];
    bad.push([raw('POST', '/v1/completions', { headers: { 'Transfer-Encoding': 'gzip, chunked' }, body: '0\r\n\r\n' }), 501]);
    for (const [req, status] of bad) {
      const r = await rawHttp(srv, [req]);
      assert.deepEqual(statuses(r.text), [status], `${JSON.stringify(req.slice(0, 80))} -> ${r.text.slice(0, 200)}`);
      // Refused before the head was whole or not: an id to quote all the same.
      assert.match(r.text, /x-request-id: req-\S+\r\n/i, r.text.slice(0, 300));
    }
    // HEAD on a GET route: the GET's head (its Content-Length), no body.
    const headOnly = await rawHttp(srv, [raw('HEAD', '/health', { headers: { Connection: 'close' } })]);
    assert.deepEqual(statuses(headOnly.text), [200], headOnly.text);
    assert.match(headOnly.text, /content-length: 15\r\n/i);
    assert.ok(headOnly.text.endsWith("\r\n\r\n"), JSON.stringify(headOnly.text));
    await assertServes(srv, 'after malformed requests');
  });

  it('a non-zero priority without --scheduling-policy priority gets 400', T, async () => {
    assertError(await post(srv, '/v1/completions', { ...ok, priority: 5 }), 400, 'priority 5');
    assert.equal((await post(srv, '/v1/completions', { ...ok, priority: 0 })).status, 200);
  });

  it('every response carries a request id; the client\'s own X-Request-Id is kept', T, async () => {
    const r = await post(srv, '/v1/completions', ok, { headers: { 'X-Request-Id': 'client-id-42' } });
    assert.equal(r.headers.get('x-request-id'), 'client-id-42');
    const s = await post(srv, '/v1/completions', ok);
    assert.match(s.headers.get('x-request-id'), /^req-/);
    await sleep(100);
    assert.match(srv.logTail(20000), /"POST \/v1\/completions" 200 prompt=\d+ output=4 [0-9.]+s id=client-id-42/);
  });
});

describe('allowed origins (--allowed-origins)', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES, args: ['--allowed-origins', 'http://ui.example:3000,http://other.example'] }); });
  after(async () => { if (srv) await srv.stop(); });

  it('preflight and requests from an allowed origin get CORS headers; others 403', T, async () => {
    const pre = await rawHttp(srv, [raw('OPTIONS', '/v1/chat/completions', {
      headers: {
        Origin: 'http://ui.example:3000', 'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type', Connection: 'close',
      },
    })]);
    assert.deepEqual(statuses(pre.text), [204], pre.text.slice(0, 300));
    const h = headersOf(pre.text);
    assert.equal(h['access-control-allow-origin'], 'http://ui.example:3000');
    assert.match(h['access-control-allow-methods'], /POST/);
    assert.match(h['access-control-allow-headers'], /Authorization/i);
    assert.match(h['access-control-allow-headers'], /Content-Type/i);
    const r = await post(srv, '/v1/completions', ok, { headers: { Origin: 'http://other.example' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://other.example');
    assertError(await post(srv, '/v1/completions', ok, { headers: { Origin: 'http://third.example' } }), 403, 'not listed');
  });
});

describe('API keys: flag, file and LIFT_API_KEY', () => {
  let srv, dir;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lift-keys-'));
    fs.writeFileSync(path.join(dir, 'keys'), '# team keys\nsk-file-one\n\n  sk-file-two  \n');
    srv = await startServer({
      model: STORIES, apiKey: 'sk-flag',
      args: ['--api-key-file', path.join(dir, 'keys')], env: { LIFT_API_KEY: 'sk-env-a,sk-env-b' },
    });
  });
  after(async () => {
    if (srv) await srv.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('each key works, others get 401, and the key does not show in the log', T, async () => {
    for (const key of ['sk-flag', 'sk-file-one', 'sk-file-two', 'sk-env-a', 'sk-env-b']) {
      const r = await post(srv, '/v1/completions', ok, { headers: { Authorization: `Bearer ${key}` } });
      assert.equal(r.status, 200, `${key}: ${r.text}`);
    }
    for (const auth of ['Bearer sk-flag2', 'Bearer sk-fla', 'Bearer ', 'sk-flag', 'Basic c2stZmxhZw==']) {
      assertError(await post(srv, '/v1/completions', ok, { headers: { Authorization: auth } }), 401, auth);
    }
    assert.ok(!srv.logTail(60000).includes('sk-file-one'));
  });

  it('an unauthenticated client is refused after its head, whatever body it announces', T, async () => {
    const r = await rawHttp(srv, [raw('POST', '/v1/completions', { headers: { 'Content-Length': '8000000', 'Content-Type': 'application/json' } })], { timeoutMs: 5000 });
    assert.deepEqual(statuses(r.text), [401], r.text.slice(0, 200));
    assert.ok(r.ms < 1000, `401 after ${r.ms} ms`);
    assert.match(r.text, /Connection: close/i);
  });

  it('a client that sends a whole 4 MB body without a key reads its 401 (no reset)', T, async () => {
    for (let i = 0; i < 5; ++i) {
      const { head, body } = rawPost('/v1/completions', { ...ok, prompt: 'x'.repeat(4 << 20) });
      const r = await rawHttp(srv, [head + body], { timeoutMs: 5000 });
      assert.deepEqual(statuses(r.text), [401], `try ${i}: ${r.error || ''} ${r.text.slice(0, 200)}`);
    }
  });

  it('with a key, the Host check is off (the key protects the server)', T, async () => {
    const r = await rawHttp(srv, [raw('GET', '/v1/models', { headers: { Host: 'my-box.lan', Authorization: 'Bearer sk-env-b', Connection: 'close' } })]);
    assert.deepEqual(statuses(r.text), [200], r.text.slice(0, 200));
  });
});

describe('served model names and JSON access logs', () => {
  let srv;
  before(async () => {
    srv = await startServer({ model: STORIES, args: ['--served-model-name', 'tiny-stories,story-alias', '--log-format', 'json'] });
  });
  after(async () => { if (srv) await srv.stop(); });

  it('responses carry the first name; both names are accepted; others 404', T, async () => {
    const r = await post(srv, '/v1/completions', { ...ok, model: 'story-alias' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.model, 'tiny-stories');
    assert.equal((await post(srv, '/v1/completions', { ...ok, model: 'tiny-stories' })).status, 200);
    assertError(await post(srv, '/v1/completions', { ...ok, model: 'stories260K' }), 404, 'the file name is not served');
    const models = await get(srv, '/v1/models');
    assert.deepEqual(models.json.data.map((x) => x.id), ['tiny-stories', 'story-alias']);
  });

  it('one JSON log line per request with status, tokens, latency and id', T, async () => {
    await post(srv, '/v1/completions', { ...ok, model: 'tiny-stories' }, { headers: { 'X-Request-Id': 'json-log-1' } });
    await post(srv, '/v1/completions', { ...ok, model: 'nope' }, { headers: { 'X-Request-Id': 'json-log-2' } });
    await sleep(100);
    const lines = srv.logTail(20000).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const one = lines.find((l) => l.request_id === 'json-log-1');
    assert.ok(one, 'no log line for json-log-1');
    assert.equal(one.status, 200);
    assert.equal(one.method, 'POST');
    assert.equal(one.path, '/v1/completions');
    assert.equal(one.completion_tokens, 4);
    assert.ok(one.prompt_tokens > 0);
    assert.ok(one.latency_s >= 0);
    const two = lines.find((l) => l.request_id === 'json-log-2');
    assert.equal(two && two.status, 404);
  });
});
