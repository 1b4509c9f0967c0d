// Speculative decoding through `lift serve` on stories260K: a greedy completion (plain, streamed,
// chat, with logprobs) is the same with speculation as with spec_tokens 0 and as the reference
// continuation; /metrics shows the spec_decode counters labelled by proposer, consistent with
// each other, and no such series on a server without --spec; bad spec_tokens get 400.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { STORIES, modelsDir, readJson, startServer } from './lib/server.mjs';
import { assertError, client, get, metric, pollMetrics, post, sse } from './lib/http.mjs';

const ref = readJson(path.join(modelsDir, 'stories260K', 'reference_outputs.json'))
  .runs.find((r) => r.name === 'prompt_once_upon_a_time_greedy_60');
const PROMPT = ref.prompt;                        // "Once upon a time"
const REF_TEXT = ref.text.slice(PROMPT.length);   // ", there was a little girl named Lily. ..."
const REF_N = ref.generated_ids.length;           // 56
const DRAFT = path.join(modelsDir, 'stories260K', 'stories260K-draft-L4.gguf');
const T = { timeout: 60000 };
// Repetition is what n-gram lookup finds: most of its drafts should be accepted here.
const REPEAT = 'Tom and Sue went to the park. Tom and Sue went to the park. Tom and Sue went to the';

const DRAFTS = (p) => `lift:spec_decode_num_drafts_total{proposer="${p}"}`;
const DRAFT_TOKENS = (p) => `lift:spec_decode_num_draft_tokens_total{proposer="${p}"}`;
const ACCEPTED = (p) => `lift:spec_decode_num_accepted_tokens_total{proposer="${p}"}`;

async function greedy(srv, body) {
  const r = await post(srv, '/v1/completions', { model: 'm', temperature: 0, ...body });
  assert.equal(r.status, 200, r.text.slice(0, 300));
  return r.json;
}

for (const [proposer, args] of [
  ['ngram', ['--spec', 'ngram', '--spec-tokens', '4', '--spec-fixed']],
  ['draft', ['--draft-model', DRAFT, '--spec-tokens', '3', '--spec-fixed']],
]) {
  describe(`lift serve --spec ${proposer}`, () => {
    let srv;
    before(async () => { srv = await startServer({ model: STORIES, args }); });
    after(async () => { if (srv) await srv.stop(); });

    it('greedy completions equal spec_tokens 0 and the reference, logprobs bitwise', T, async () => {
      const on = await greedy(srv, { prompt: PROMPT, max_tokens: REF_N, logprobs: 2 });
      const off = await greedy(srv, { prompt: PROMPT, max_tokens: REF_N, logprobs: 2, spec_tokens: 0 });
      assert.equal(on.choices[0].text, REF_TEXT);
      assert.equal(off.choices[0].text, REF_TEXT);
      assert.deepEqual(on.choices[0].logprobs, off.choices[0].logprobs);
      assert.equal(on.usage.completion_tokens, REF_N);
      for (const k of [1, 2, 8]) {
        const r = await greedy(srv, { prompt: REPEAT, max_tokens: 48, ignore_eos: true, spec_tokens: k });
        const base = await greedy(srv, { prompt: REPEAT, max_tokens: 48, ignore_eos: true, spec_tokens: 0 });
        assert.equal(r.choices[0].text, base.choices[0].text, `spec_tokens ${k}`);
      }
    });

    it('streamed and chat greedy output is the same with and without speculation', T, async () => {
      const body = { model: 'm', prompt: REPEAT, max_tokens: 40, temperature: 0, stream: true, ignore_eos: true };
      const texts = [];
      for (const spec_tokens of [undefined, 0]) {
        const { events } = await sse(srv, '/v1/completions', { ...body, spec_tokens });
        texts.push(events.map((e) => e.choices?.[0]?.text ?? '').join(''));
      }
      assert.ok(texts[0].length > 0);
      assert.equal(texts[0], texts[1]);
      const openai = client(srv);
      const chat = async (extra) => (await openai.chat.completions.create({
        model: 'm', messages: [{ role: 'user', content: REPEAT }], max_tokens: 32, temperature: 0, ...extra,
      })).choices[0].message.content;
      assert.equal(await chat({}), await chat({ spec_tokens: 0 }));
    });

    it('/metrics: spec_decode counters by proposer, consistent', T, async () => {
      await greedy(srv, { prompt: REPEAT, max_tokens: 32, ignore_eos: true });
      const { ok, m } = await pollMetrics(srv, (x) => x.get(DRAFTS(proposer)) > 0, { ms: 2000 });
      assert.ok(ok, 'no drafts counted');
      const drafts = metric(m, DRAFTS(proposer));
      const proposed = metric(m, DRAFT_TOKENS(proposer));
      const accepted = metric(m, ACCEPTED(proposer));
      assert.ok(proposed >= drafts && accepted <= proposed, `drafts ${drafts} proposed ${proposed} accepted ${accepted}`);
      assert.ok(accepted > 0, 'nothing accepted on a repetitive greedy prompt');
      assert.equal(metric(m, `lift:spec_decode_accepted_length_count{proposer="${proposer}"}`), drafts);
      assert.equal(metric(m, `lift:spec_decode_accepted_length_sum{proposer="${proposer}"}`), accepted);
      // Position i is accepted only after position i - 1: the per-position counts never grow.
      let prev = drafts;
      let sum = 0;
      for (let i = 0; m.has(`lift:spec_decode_num_accepted_tokens_per_pos{proposer="${proposer}",position="${i}"}`); ++i) {
        const n = m.get(`lift:spec_decode_num_accepted_tokens_per_pos{proposer="${proposer}",position="${i}"}`);
        assert.ok(n <= prev, `position ${i}: ${n} after ${prev}`);
        prev = n;
        sum += n;
      }
      assert.equal(sum, accepted, 'per-position counts add up to the accepted tokens');
      const text = (await get(srv, '/metrics')).text;
      assert.match(text, /^# TYPE lift:spec_decode_accepted_length histogram$/m);
    });

    it('spec_tokens out of range or not an integer: 400 naming it', T, async () => {
      for (const bad of [17, -2, 'x', 1.5]) {
        assertError(await post(srv, '/v1/completions', { model: 'm', prompt: 'hi', spec_tokens: bad }), 400, `spec_tokens ${bad}`);
        const r = await post(srv, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], spec_tokens: bad });
        assertError(r, 400, `chat spec_tokens ${bad}`);
        assert.equal(r.json.error.param, 'spec_tokens');
      }
    });
  });
}

describe('lift serve without --spec', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES }); });
  after(async () => { if (srv) await srv.stop(); });

  it('has no spec_decode series and takes spec_tokens as a no-op', T, async () => {
    const c = await greedy(srv, { prompt: PROMPT, max_tokens: REF_N, spec_tokens: 4 });
    assert.equal(c.choices[0].text, REF_TEXT);
    const text = (await get(srv, '/metrics')).text;
    assert.doesNotMatch(text, /spec_decode/);
  });
});
