// Connections that cannot starve others: idle keep-alive connections, clients that trickle
// their request a byte a second, bursts of thousands of connections and clients that never
// read their stream must not hold the server's capacity or its memory.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { STORIES, sleep, startServer } from './lib/server.mjs';
import { assertIdle, metrics, metric, pollMetrics, post, rawHttp, rawPost, statuses } from './lib/http.mjs';

const T = { timeout: 120000 };

// Resident memory of the server process, in MiB.
function rssMiB(srv) {
  const status = fs.readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

// Latency of one normal completion, in ms.
async function timedRequest(srv) {
  const t0 = Date.now();
  const r = await post(srv, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r.status, 200, r.text);
  return Date.now() - t0;
}

describe('connections', () => {
  let srv;
  before(async () => {
    srv = await startServer({
      model: STORIES,
      args: ['--max-connections', '1024', '--idle-timeout', '30', '--read-timeout', '3', '--write-timeout', '2'],
    });
  });
  after(async () => { if (srv) await srv.stop(); });

  it('512 idle connections and a client sending a byte a second delay nobody by a second', T, async () => {
    const idle = [];
    for (let i = 0; i < 512; ++i) idle.push(await connect(srv.port));
    // The slow client trickles a request head one byte a second; the server cuts it off
    // with 408 once --read-timeout (3 s) has passed, whatever its rate.
    const head = 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
    const steps = [];
    for (const ch of head) steps.push(ch, 1000);
    const slow = rawHttp(srv, steps, { timeoutMs: 15000 });
    await sleep(300);
    try {
      const lat = [];
      for (let i = 0; i < 5; ++i) lat.push(await timedRequest(srv));
      const worst = Math.max(...lat);
      console.log(`# latency with 512 idle + 1 slow connection: ${lat.join(', ')} ms`);
      assert.ok(worst < 1000, `a normal request took ${worst} ms`);
      const s = await slow;
      assert.deepEqual(statuses(s.text), [408], `the slow client got ${s.text.slice(0, 200)}`);
      assert.ok(s.ms < 6000, `the slow client was cut off only after ${s.ms} ms`);
      // The idle connections are still open and usable.
      const one = idle[0];
      const got = new Promise((resolve) => {
        let text = '';
        one.on('data', (d) => { text += d.toString(); if (text.includes('\r\n\r\n')) resolve(text); });
      });
      one.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      assert.match(await got, /^HTTP\/1\.1 200 /);
    } finally {
      for (const s of idle) s.destroy();
    }
  });

  it('2,000 connections opened at once get service or a fast 503, with memory bounded', T, async () => {
    const before0 = rssMiB(srv);
    const N = 2000;
    const t0 = Date.now();
    const req = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';
    const results = await Promise.all(Array.from({ length: N }, () => new Promise((resolve) => {
      const s = net.connect(srv.port, '127.0.0.1');
      let text = '';
      const t = Date.now();
      const timer = setTimeout(() => { s.destroy(); resolve({ text, ms: Date.now() - t, timedOut: true }); }, 10000);
      s.on('connect', () => s.write(req));
      s.on('data', (d) => { text += d.toString(); });
      s.on('error', (e) => { clearTimeout(timer); resolve({ text, ms: Date.now() - t, error: e.code }); });
      s.on('close', () => { clearTimeout(timer); resolve({ text, ms: Date.now() - t }); });
    })));
    const peak = rssMiB(srv);
    const count = (st) => results.filter((r) => statuses(r.text)[0] === st).length;
    const ok = count(200), busy = count(503);
    const other = results.filter((r) => ![200, 503].includes(statuses(r.text)[0]));
    const slowest = Math.max(...results.map((r) => r.ms));
    console.log(`# 2000 connections at once: ${ok} x 200, ${busy} x 503, ${other.length} other, slowest ${slowest} ms, ` +
      `all in ${Date.now() - t0} ms; server RSS ${before0.toFixed(1)} -> ${peak.toFixed(1)} MiB`);
    assert.equal(ok + busy, N, `unanswered: ${JSON.stringify(other.slice(0, 3))}`);
    assert.ok(ok >= 1024 - 10, `only ${ok} were served`);
    assert.ok(slowest < 5000, `slowest answer ${slowest} ms`);
    assert.ok(peak - before0 < 64, `RSS grew by ${(peak - before0).toFixed(1)} MiB`);
    assert.equal((await post(srv, '/v1/completions', { model: 'm', prompt: 'Hi', max_tokens: 2 })).status, 200);
  });

  it('a connection that sends nothing is closed after --idle-timeout; one over the limit waits for nobody', T, async () => {
    const quick = await startServer({ model: STORIES, args: ['--idle-timeout', '1', '--max-connections', '4'] });
    try {
      const r = await rawHttp(quick, [], { timeoutMs: 5000 });
      assert.ok(!r.timedOut && r.ms < 3000, `idle connection closed after ${r.ms} ms (timed out: ${r.timedOut})`);
      // Four connections in the middle of a request head hold the four slots; a fifth gets 503 at once.
      const partial = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n';
      const holders = [];
      for (let i = 0; i < 4; ++i) {
        const s = await connect(quick.port);
        s.write(partial);
        holders.push(s);
      }
      await sleep(200);
      const extra = await rawHttp(quick, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'], { timeoutMs: 5000 });
      assert.deepEqual(statuses(extra.text), [503], extra.text.slice(0, 200));
      assert.ok(extra.ms < 1000, `503 after ${extra.ms} ms`);
      for (const s of holders) s.destroy();
      await sleep(200);
      const after1 = await rawHttp(quick, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { timeoutMs: 5000 });
      assert.deepEqual(statuses(after1.text), [200]);
    } finally {
      await quick.stop();
    }
  });

  it('idle keep-alive connections make room for new ones instead of refusing them', T, async () => {
    const small = await startServer({ model: STORIES, args: ['--idle-timeout', '60', '--max-connections', '4'] });
    try {
      const idle = [];
      for (let i = 0; i < 4; ++i) idle.push(await connect(small.port));
      await sleep(1300);  // past the grace a fresh connection gets
      const r = await rawHttp(small, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { timeoutMs: 5000 });
      assert.deepEqual(statuses(r.text), [200], r.text.slice(0, 200));
      for (const s of idle) s.destroy();
    } finally {
      await small.stop();
    }
  });

  it('a client that never reads its stream is dropped after --write-timeout and its request aborted', T, async () => {
    const m0 = await metrics(srv);
    // Lots of output per token (16 samples with 20 top logprobs each), so the socket buffers
    // fill long before the request could finish.
    const { head, body } = rawPost('/v1/completions', {
      model: 'm', prompt: 'Once upon a time', max_tokens: 1500, n: 16, logprobs: 20, temperature: 1,
      ignore_eos: true, stream: true,
    });
    const s = await connect(srv.port);
    s.pause();  // never read (node stops reading from the socket once its own buffer is full)
    s.on('error', () => {});
    s.write(head + body);
    const t0 = Date.now();
    // A paused socket never reports the server's close, so watch the server give up on it.
    const aborted0 = metric(m0, 'lift:request_aborted_total');
    const r = await pollMetrics(srv, (m) => metric(m, 'lift:request_aborted_total') > aborted0, { ms: 40000, everyMs: 200 });
    s.destroy();
    assert.ok(r.ok, 'the server kept serving a client that never reads');
    console.log(`# a never-reading client was dropped after ${Date.now() - t0} ms`);
    await assertIdle(srv, 5000, 'after dropping a never-reading client');
    assert.equal((await post(srv, '/v1/completions', { model: 'm', prompt: 'Hi', max_tokens: 2 })).status, 200);
  });
});
