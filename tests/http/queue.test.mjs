// Admission limits and disconnects on a small server (--max-seqs 2 --max-waiting 2): a request
// over the queue limit is answered 503 at once; clients that go away while queued, in prefill,
// while streaming, or while waiting for a non-streamed answer are aborted within ~1 s and
// their KV blocks come back (running 0, kv_cache_used_blocks 0).
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { STORIES, sleep, startServer } from './lib/server.mjs';
import {
  GEN_TOKENS, RUNNING, WAITING, assertError, assertIdle, assertServes, describeMetrics, metrics, pollMetrics, post,
  randomTokens, sse,
} from './lib/http.mjs';

const T = { timeout: 60000 };
const LONG = 1900;  // tokens a long request generates (context 2048)
let salt = 100;

// Starts a streamed completion that runs long; returns { ctl, events, finished, promise }.
function longStream(srv, extra = {}, path = '/v1/completions') {
  const ctl = new AbortController();
  const st = { ctl, events: 0, finished: false, error: null };
  const body = path === '/v1/completions'
    ? { model: 'm', prompt: randomTokens(8, ++salt), max_tokens: LONG, temperature: 1, seed: salt, ignore_eos: true, stream: true, ...extra }
    : { model: 'm', messages: [{ role: 'user', content: `Story number ${++salt}` }], max_tokens: LONG, temperature: 1, seed: salt, ignore_eos: true, stream: true, ...extra };
  st.promise = sse(srv, path, body, { signal: ctl.signal, onEvent: () => { ++st.events; } })
    .then((r) => { st.result = r; })
    .catch((e) => { st.error = e; })
    .finally(() => { st.finished = true; });
  return st;
}

// Starts a non-streamed completion; same shape as longStream().
function longPlain(srv, extra = {}) {
  const ctl = new AbortController();
  const st = { ctl, finished: false, error: null };
  st.promise = post(srv, '/v1/completions', {
    model: 'm', prompt: randomTokens(8, ++salt), max_tokens: LONG, temperature: 1, seed: salt, ignore_eos: true, ...extra,
  }, { signal: ctl.signal })
    .then((r) => { st.result = r; })
    .catch((e) => { st.error = e; })
    .finally(() => { st.finished = true; });
  return st;
}

async function abortAll(list) {
  for (const s of list) s.ctl.abort();
  await Promise.all(list.map((s) => s.promise));
}

async function waitFor(srv, pred, what, ms = 10000) {
  const r = await pollMetrics(srv, pred, { ms, everyMs: 5 });
  assert.ok(r.ok, `${what} not reached in ${ms} ms: ${describeMetrics(r.m)}`);
  return r.m;
}

// Aborts `victims`, then checks that the engine is idle within `ms` once `others` are aborted
// too, that aborting took effect within ~1 s, and that the victims did not run to completion.
async function checkAborted(srv, victims, genBefore, what) {
  const t0 = Date.now();
  await abortAll(victims);
  const r = await pollMetrics(srv, (m) => m.get(RUNNING) === 0 && m.get(WAITING) === 0, { ms: 2000, everyMs: 10 });
  assert.ok(r.ok, `${what}: requests still running/waiting 2 s after the client went away: ${describeMetrics(r.m)}`);
  await assertIdle(srv, 2000, what);
  const m = await metrics(srv);
  const generated = m.get(GEN_TOKENS) - genBefore;
  assert.ok(generated < LONG * victims.length,
    `${what}: ${generated} tokens generated after the disconnect (the request ran to completion, not aborted)`);
  return { ms: Date.now() - t0, generated };
}

describe('queue limit and disconnects (--max-seqs 2 --max-waiting 2)', () => {
  // A fresh server for each test, so that one test's leftovers cannot fail the next.
  let srv;
  beforeEach(async () => {
    srv = await startServer({ model: STORIES, args: ['--max-seqs', '2', '--max-waiting', '2', '--max-prefill-chunk', '16'] });
    await assertIdle(srv, 5000, 'fresh server');
  });
  afterEach(async () => { if (srv) await srv.stop(); srv = undefined; });

  it('a request over the waiting limit gets 503 at once (non-streamed and streamed)', T, async () => {
    const held = [longStream(srv), longStream(srv), longStream(srv), longStream(srv)];
    try {
      await waitFor(srv, (m) => m.get(RUNNING) === 2 && m.get(WAITING) === 2, '2 running + 2 waiting');
      let t0 = Date.now();
      const r = await post(srv, '/v1/completions', { model: 'm', prompt: 'Hello', max_tokens: 4 }, { timeoutMs: 10000 });
      const ms = Date.now() - t0;
      assertError(r, 503, 'fifth request');
      assert.ok(ms < 1000, `503 took ${ms} ms (must be answered at once)`);
      t0 = Date.now();
      const s = await post(srv, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true }, { timeoutMs: 10000 });
      assertError(s, 503, 'fifth request, streamed chat');
      assert.ok(Date.now() - t0 < 1000, `streamed 503 took ${Date.now() - t0} ms`);
      assert.ok(held.every((h) => !h.finished), 'a held request finished early; the 503 check ran without a full queue');
    } finally {
      await abortAll(held);
    }
    await assertIdle(srv, 2000, 'after aborting the held requests');
    await assertServes(srv, 'after 503');
  });

  it('disconnect while queued (streamed and non-streamed): leaves the queue at once', T, async () => {
    const runners = [longStream(srv), longStream(srv)];
    try {
      await waitFor(srv, (m) => m.get(RUNNING) === 2, '2 running');
      for (const kind of ['stream', 'plain']) {
        const q = kind === 'stream' ? longStream(srv) : longPlain(srv);
        await waitFor(srv, (m) => m.get(WAITING) === 1, `1 waiting (${kind})`);
        const t0 = Date.now();
        await abortAll([q]);
        const r = await pollMetrics(srv, (m) => m.get(WAITING) === 0, { ms: 2000, everyMs: 10 });
        assert.ok(r.ok, `queued ${kind} request still waiting 2 s after its client went away: ${describeMetrics(r.m)}`);
        assert.ok(runners.every((h) => !h.finished), 'the running requests ended before the check; cannot tell');
        assert.equal(r.m.get(RUNNING), 2, `the aborted queued ${kind} request was scheduled instead: ${describeMetrics(r.m)}`);
        console.log(`# queued ${kind} request left the queue ${Date.now() - t0} ms after the disconnect`);
      }
    } finally {
      await abortAll(runners);
    }
    await assertIdle(srv, 2000, 'after queued disconnects');
    await assertServes(srv, 'after queued disconnects');
  });

  it('disconnect in prefill (long prompt), streamed and non-streamed', T, async () => {
    for (const kind of ['stream', 'plain']) {
      const genBefore = (await metrics(srv)).get(GEN_TOKENS);
      const prompt = randomTokens(1000, ++salt);
      const req = { prompt, max_tokens: 1000 };
      const v = kind === 'stream' ? longStream(srv, req) : longPlain(srv, req);
      await waitFor(srv, (m) => m.get(RUNNING) === 1, `prefill running (${kind})`, 5000);
      const genAtAbort = (await metrics(srv)).get(GEN_TOKENS) - genBefore;
      const r = await checkAborted(srv, [v], genBefore, `disconnect in prefill (${kind})`);
      assert.ok(r.generated < 1000, `prefill ${kind}: ${r.generated} tokens generated`);
      console.log(`# prefill ${kind}: ${genAtAbort} tokens generated at the disconnect, ${r.generated} in all, idle after ${r.ms} ms`);
    }
    await assertServes(srv, 'after prefill disconnects');
  });

  it('disconnect while streaming (completions and chat)', T, async () => {
    for (const path of ['/v1/completions', '/v1/chat/completions']) {
      const genBefore = (await metrics(srv)).get(GEN_TOKENS);
      const v = longStream(srv, {}, path);
      const t0 = Date.now();
      while (v.events < 5 && !v.finished && Date.now() - t0 < 10000) await sleep(5);
      assert.ok(v.events >= 5, `no streamed chunks from ${path}: ${v.error || ''}`);
      const r = await checkAborted(srv, [v], genBefore, `disconnect while streaming ${path}`);
      console.log(`# streaming ${path}: ${r.generated} tokens generated, idle ${r.ms} ms after the disconnect`);
    }
    await assertServes(srv, 'after streaming disconnects');
  });

  it('disconnect while waiting for a non-streamed answer', T, async () => {
    const genBefore = (await metrics(srv)).get(GEN_TOKENS);
    const v = longPlain(srv);
    await waitFor(srv, (m) => m.get(RUNNING) === 1 && m.get(GEN_TOKENS) - genBefore > 20, 'non-streamed request generating', 5000);
    const r = await checkAborted(srv, [v], genBefore, 'disconnect of a non-streamed request');
    console.log(`# non-streamed: ${r.generated} tokens generated, idle ${r.ms} ms after the disconnect`);
    await assertServes(srv, 'after a non-streamed disconnect');
  });

  it('two disconnects at once free everything', T, async () => {
    const genBefore = (await metrics(srv)).get(GEN_TOKENS);
    const a = longStream(srv);
    const b = longPlain(srv);
    await waitFor(srv, (m) => m.get(RUNNING) === 2, '2 running', 5000);
    await checkAborted(srv, [a, b], genBefore, 'two disconnects');
    await assertServes(srv, 'after two disconnects');
  });
});
