// Raw HTTP helpers (fetch), SSE parsing, /metrics parsing, bounded polling and shape checks.
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { sleep } from './server.mjs';

export const REQUEST_TIMEOUT_MS = 60000;

export function client(srv, opts = {}) {
  return new OpenAI({
    baseURL: `${srv.url}/v1`,
    apiKey: srv.apiKey || 'sk-no-key',
    maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
    ...opts,
  });
}

function headersFor(srv, extra = {}) {
  const h = { ...extra };
  if (srv.apiKey && !('Authorization' in h)) h.Authorization = `Bearer ${srv.apiKey}`;
  return h;
}

// POSTs `body` (an object is JSON-encoded; a string is sent as is). Returns
// { status, headers, bytes, text, json } where json is undefined when the body is not JSON.
// Decodes as strict UTF-8: invalid bytes throw.
export async function post(srv, path, body, { headers = {}, signal, timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
  const r = await fetch(`${srv.url}${path}`, {
    method: 'POST',
    headers: headersFor(srv, { 'Content-Type': 'application/json', ...headers }),
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
    signal: signal || AbortSignal.timeout(timeoutMs),
  });
  return readResponse(r);
}

export async function get(srv, path, { headers = {}, timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
  const r = await fetch(`${srv.url}${path}`, { headers: headersFor(srv, headers), signal: AbortSignal.timeout(timeoutMs) });
  return readResponse(r);
}

async function readResponse(r) {
  const bytes = new Uint8Array(await r.arrayBuffer());
  const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, bytes, text, json };
}

// Asserts an OpenAI-style error response: the status, a JSON body
// {"error": {"message": non-empty string, "type": non-empty string, "param", "code"}}.
export function assertError(res, status, what = '') {
  const ctx = `${what} -> HTTP ${res.status} ${res.text.slice(0, 300)}`;
  assert.equal(res.status, status, `expected HTTP ${status}: ${ctx}`);
  assert.ok(res.json && typeof res.json === 'object', `error body is not JSON: ${ctx}`);
  const e = res.json.error;
  assert.ok(e && typeof e === 'object', `no "error" object: ${ctx}`);
  assert.equal(typeof e.message, 'string', `error.message not a string: ${ctx}`);
  assert.ok(e.message.length > 0, `empty error.message: ${ctx}`);
  assert.equal(typeof e.type, 'string', `error.type not a string: ${ctx}`);
  assert.ok(e.type.length > 0, `empty error.type: ${ctx}`);
  assert.ok('param' in e, `error.param missing: ${ctx}`);
  assert.ok('code' in e, `error.code missing: ${ctx}`);
}

// Reads an SSE response to the end (or until `onEvent` returns false). Checks the framing
// strictly: every event is exactly one `data: ...` line followed by a blank line (comment-only
// events are counted and skipped). Returns { status, headers, events: [parsed JSON], done: saw
// [DONE], raw, comments }.
export async function sse(srv, path, body, { signal, timeoutMs = REQUEST_TIMEOUT_MS, onEvent } = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new Error(`SSE ${path} timed out after ${timeoutMs} ms`)), timeoutMs);
  if (signal) signal.addEventListener('abort', () => ctl.abort(signal.reason), { once: true });
  try {
    const r = await fetch(`${srv.url}${path}`, {
      method: 'POST',
      headers: headersFor(srv, { 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    if (r.status !== 200) {
      const res = await readResponse(r);
      return { ...res, events: [], done: false, raw: res.text };
    }
    const decoder = new TextDecoder('utf-8', { fatal: true });
    const reader = r.body.getReader();
    let buf = '';
    let raw = '';
    const events = [];
    let done = false;
    let comments = 0;
    outer: for (;;) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      const s = decoder.decode(value, { stream: true });
      buf += s;
      raw += s;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        // SSE comments (": keep-alive") are allowed between events; clients ignore them.
        if (ev.split('\n').every((l) => l.startsWith(':'))) { ++comments; continue; }
        assert.ok(!done, `SSE event after [DONE]: ${JSON.stringify(ev)}`);
        assert.ok(ev.startsWith('data: '), `SSE event does not start with "data: ": ${JSON.stringify(ev.slice(0, 200))}`);
        assert.ok(!ev.includes('\n'), `SSE event spans several lines: ${JSON.stringify(ev.slice(0, 200))}`);
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const obj = JSON.parse(data);
        events.push(obj);
        if (onEvent && onEvent(obj, events.length) === false) {
          ctl.abort(new Error('stopped by the test'));
          break outer;
        }
      }
    }
    if (!ctl.signal.aborted) {
      decoder.decode();  // throws on a truncated UTF-8 sequence
      assert.equal(buf, '', `SSE stream ends with an incomplete event: ${JSON.stringify(buf.slice(0, 200))}`);
    }
    return { status: r.status, headers: r.headers, events, done, raw, comments };
  } finally {
    clearTimeout(timer);
  }
}

// /metrics as { name -> value } for unlabelled samples, and `name{labels}` keys as well;
// metric(m, name) finds a sample whatever its labels.
export async function metrics(srv) {
  const r = await get(srv, '/metrics', { timeoutMs: 5000 });
  assert.equal(r.status, 200, `GET /metrics -> ${r.status}`);
  return parseMetrics(r.text);
}

export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3] === '+Inf' ? Infinity : m[3]);
    out.set(m[1] + (m[2] || ''), v);
    if (!out.has(m[1])) out.set(m[1], v);
  }
  return out;
}

export function metric(m, name) {
  assert.ok(m.has(name), `metric ${name} missing from /metrics`);
  return m.get(name);
}

// Polls /metrics every `everyMs` until pred(m) holds or `ms` passes; returns
// { ok, m, elapsedMs }.
export async function pollMetrics(srv, pred, { ms = 2000, everyMs = 20 } = {}) {
  const t0 = Date.now();
  let m;
  for (;;) {
    m = await metrics(srv);
    if (pred(m)) return { ok: true, m, elapsedMs: Date.now() - t0 };
    if (Date.now() - t0 > ms) return { ok: false, m, elapsedMs: Date.now() - t0 };
    await sleep(everyMs);
  }
}

export const RUNNING = 'lift:num_requests_running';
export const WAITING = 'lift:num_requests_waiting';
export const KV_USED = 'lift:kv_cache_used_blocks';
export const GEN_TOKENS = 'lift:generation_tokens_total';
export const PROMPT_TOKENS = 'lift:prompt_tokens_total';

export function describeMetrics(m) {
  return [RUNNING, WAITING, KV_USED, GEN_TOKENS].map((k) => `${k}=${m.get(k)}`).join(' ');
}

// Waits (≤ ms) for an idle engine: nothing running or waiting, no KV blocks in use.
export async function assertIdle(srv, ms = 2000, what = '') {
  const r = await pollMetrics(srv, (m) => m.get(RUNNING) === 0 && m.get(WAITING) === 0 && m.get(KV_USED) === 0, { ms });
  assert.ok(r.ok, `${what}: engine not idle ${ms} ms later: ${describeMetrics(r.m)}`);
  return r;
}

// A random-looking but reproducible prompt of `n` token ids in [3, 511] (stories260K's vocab
// without <unk>, <s>, </s>), different for each `salt`, so the prefix cache cannot serve it.
export function randomTokens(n, salt) {
  let x = (salt * 2654435761 + 12345) >>> 0;
  const out = [1];
  for (let i = 1; i < n; ++i) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out.push(3 + (x % 509));
  }
  return out;
}

// A quick sanity request: a short greedy completion must succeed.
export async function assertServes(srv, what = '') {
  const r = await post(srv, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r.status, 200, `${what}: a normal request afterwards failed: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  assert.equal(r.json.object, 'text_completion');
  assert.equal(typeof r.json.choices[0].text, 'string');
}

// Raw HTTP/1.1 over one TCP connection, for what fetch hides (connection reuse, bursts of new
// connections). `steps` are strings to write or numbers of ms to pause; resolves with all bytes
// read until the server closes, `closeAfterMs` passes, or `timeoutMs` passes
// ({ text, error, ms, timedOut }).
export function rawHttp(srv, steps, { timeoutMs = 10000, closeAfterMs } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(srv.port, '127.0.0.1');
    let text = '';
    let settled = false;
    const finish = (extra) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(closer);
      s.destroy();
      resolve({ text, ms: Date.now() - t0, ...extra });
    };
    const timer = setTimeout(() => finish({ timedOut: true }), timeoutMs);
    let closer;
    s.on('data', (d) => { text += d.toString('latin1'); });
    s.on('error', (e) => finish({ error: e.code || e.message }));
    s.on('close', () => finish({}));
    s.on('connect', async () => {
      for (const st of steps) {
        if (settled) break;  // the server closed: no point pausing on
        if (typeof st === 'number') await sleep(st);
        else if (!s.destroyed) s.write(st);
      }
      if (closeAfterMs !== undefined) closer = setTimeout(() => finish({}), closeAfterMs);
    });
  });
}

export function rawPost(path, body, headers = {}) {
  const b = typeof body === 'string' ? body : JSON.stringify(body);
  const h = { Host: '127.0.0.1', 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(b), ...headers };
  return { head: `POST ${path} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`, body: b };
}

// The status codes of the HTTP responses in a raw byte stream, in order.
export function statuses(text) {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}
