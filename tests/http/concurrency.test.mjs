// Concurrency: 16 streams at once must all be running together (seen in /metrics while they
// stream), and 64 concurrent streams must all complete.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { STORIES, sleep, startServer } from './lib/server.mjs';
import { RUNNING, assertIdle, assertServes, client, metrics, rawHttp, rawPost, statuses, sse } from './lib/http.mjs';

const T = { timeout: 120000 };
const names = ['Lily', 'Tom', 'Sue', 'Max', 'Ben', 'Anna', 'Tim', 'Sam', 'Mia', 'Zoe', 'Jack', 'Lucy', 'Bob', 'Kim', 'Dan', 'Eve'];

describe('concurrent streams on stories260K', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES }); });
  after(async () => { if (srv) await srv.stop(); });

  it('16 concurrent streams: /metrics shows 16 running while they stream; all finish', T, async () => {
    const openai = client(srv);
    const N = 16;
    const MAX = 800;
    let finished = 0;
    const streams = Array.from({ length: N }, (_, i) => (async () => {
      const s = await openai.completions.create({
        model: 'm', prompt: `${names[i]} went to the park`, max_tokens: MAX, temperature: 0.8, seed: i,
        ignore_eos: true, stream: true, stream_options: { include_usage: true },
      });
      let usage = null;
      let finish = null;
      for await (const ch of s) {
        if (ch.usage) usage = ch.usage;
        if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
      }
      ++finished;
      return { usage, finish };
    })());
    // Poll /metrics while the streams are open (bounded: until all finish or 60 s).
    let maxRunning = 0;
    const seen = [];
    const t0 = Date.now();
    while (finished < N && Date.now() - t0 < 60000 && maxRunning < N) {
      const m = await metrics(srv);
      const r = m.get(RUNNING);
      seen.push(r);
      maxRunning = Math.max(maxRunning, r);
      await sleep(10);
    }
    const results = await Promise.all(streams);
    assert.equal(maxRunning, N, `lift:num_requests_running never reached ${N} while ${N} streams ran; samples: ${seen.slice(-40).join(',')}`);
    for (const r of results) {
      assert.equal(r.finish, 'length');
      assert.equal(r.usage?.completion_tokens, MAX);
    }
    await assertIdle(srv, 2000, 'after 16 streams');
  });

  it('64 concurrent streams all complete with [DONE] and full usage', T, async () => {
    const N = 64;
    const MAX = 64;
    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: N }, (_, i) => sse(srv, '/v1/completions', {
      model: 'm', prompt: `${names[i % 16]} had ${i} apples`, max_tokens: MAX, temperature: 1, seed: i, ignore_eos: true,
      stream: true, stream_options: { include_usage: true },
    }, { timeoutMs: 90000 })));
    results.forEach((r, i) => {
      assert.equal(r.status, 200, `stream ${i}: HTTP ${r.status} ${r.raw?.slice(0, 200)}`);
      assert.ok(r.done, `stream ${i}: no [DONE]`);
      const u = r.events.at(-1).usage;
      assert.equal(u?.completion_tokens, MAX, `stream ${i}: usage ${JSON.stringify(u)}`);
      const text = r.events.map((e) => e.choices[0]?.text || '').join('');
      assert.ok(text.length > 0, `stream ${i}: no text`);
    });
    console.log(`# 64 streams x ${MAX} tokens in ${Date.now() - t0} ms`);
    await assertIdle(srv, 2000, 'after 64 streams');
    await assertServes(srv, 'after 64 streams');
  });

  it('128 clients connecting at the same moment (new connections) are all answered within 2 s', T, async () => {
    // Each opens its own TCP connection: a listen backlog too small for a burst shows up here as
    // resets, or connections that hang (SYN cookies) or wait for SYN retransmits (1 s, 3 s, ...).
    // A server with a large enough backlog answers all of them in well under a second.
    const req = rawPost('/v1/completions', { model: 'm', prompt: 'Hi', max_tokens: 4, temperature: 0 }, { Connection: 'close' });
    const t0 = Date.now();
    const res = await Promise.all(Array.from({ length: 128 }, () => rawHttp(srv, [req.head + req.body], { timeoutMs: 2000 })));
    const bad = res.map((r, i) => ({ i, r })).filter(({ r }) => statuses(r.text)[0] !== 200);
    assert.equal(bad.length, 0, `${bad.length} of 128 connections got no 200 within 2 s (e.g. ${bad.slice(0, 3).map(({ r }) => (r.timedOut ? 'timeout' : r.error || r.text.slice(0, 30))).join('; ')}); slowest answered in ${Math.max(...res.map((r) => r.ms))} ms`);
    console.log(`# 128 fresh connections answered in ${Date.now() - t0} ms (slowest ${Math.max(...res.map((r) => r.ms))} ms)`);
    await assertIdle(srv, 2000, 'after the connection burst');
  });

  it('64 concurrent non-streamed chat requests all complete', T, async () => {
    const openai = client(srv);
    const res = await Promise.all(Array.from({ length: 64 }, (_, i) => openai.chat.completions.create({
      model: 'm', messages: [{ role: 'user', content: `Tell a story about ${names[i % 16]}.` }], max_tokens: 16,
      temperature: 0.5, seed: i, ignore_eos: true,
    })));
    res.forEach((c) => {
      assert.equal(c.choices[0].finish_reason, 'length');
      assert.equal(c.usage.completion_tokens, 16);
    });
    await assertIdle(srv, 2000, 'after 64 chats');
  });
});
