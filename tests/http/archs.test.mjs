// Every architecture of ../shared/models/archs through the OpenAI API: /v1/completions with the
// reference prompt ids, 32 greedy tokens, 10 logprobs. lift (f32 K/V, exact activations) must
// pick llama.cpp's tokens and give its top-10 logprobs within the file's tolerance (README of
// archs: the exact variant, 1e-3; gemma2 0.1).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { modelsDir, readJson, startServer } from './lib/server.mjs';
import { post } from './lib/http.mjs';

const T = { timeout: 120000 };
const dir = path.join(modelsDir, 'archs');
const refs = readJson(path.join(dir, 'reference_outputs.json'));
const entries = Object.values(refs.families).flat();

describe('architectures over HTTP against llama.cpp', () => {
  assert.equal(entries.length, 6);
  for (const e of entries) {
    describe(e.file, () => {
      let srv;
      before(async () => {
        srv = await startServer({ model: path.join(dir, e.file), args: ['--kv-type', 'f32', '--exact-activations'] });
      });
      after(async () => { if (srv) await srv.stop(); });

      it('greedy tokens and top-10 logprobs match', T, async () => {
        const v = e.dequant_f32 ?? e.kv_f32;
        const tol = e.logprob_tolerance ?? 1e-3;
        const n = v.generated_ids.length;
        const r = await post(srv, '/v1/completions', {
          model: 'm', prompt: e.prompt_ids, max_tokens: n, temperature: 0, logprobs: 10, ignore_eos: true,
        });
        assert.equal(r.status, 200, r.text.slice(0, 300));
        const choice = r.json.choices[0];
        // The ids, through lift's own detokenizer: prompt + llama.cpp's ids read as the prompt
        // then lift's text (after the prompt, so a leading space is not dropped).
        const whole = await post(srv, '/detokenize', { tokens: [...e.prompt_ids, ...v.generated_ids] });
        const head = await post(srv, '/detokenize', { tokens: e.prompt_ids });
        assert.equal(whole.status, 200, whole.text.slice(0, 300));
        assert.equal(head.json.content + choice.text, whole.json.content);
        const lp = choice.logprobs;
        assert.equal(lp.tokens.length, n);
        let compared = 0;
        let worst = 0;
        for (let s = 0; s < n; ++s) {
          const [chosen, top10] = v.steps[s];
          assert.equal(lp.tokens[s], e.pieces[String(chosen)] ?? lp.tokens[s], `step ${s}: token`);
          // Alternatives are keyed by their text: compare those whose text no other entry of
          // the ten shares (and that survive UTF-8 sanitizing unchanged).
          const texts = top10.map(([id]) => e.pieces[String(id)]);
          for (const [id, want] of top10) {
            const text = e.pieces[String(id)];
            if (text === undefined || text.includes('\uFFFD') || texts.filter((t) => t === text).length > 1) continue;
            const got = lp.top_logprobs[s][text];
            assert.notEqual(got, undefined, `step ${s}: '${text}' (id ${id}) is not among lift's top 10`);
            worst = Math.max(worst, Math.abs(got - want));
            ++compared;
          }
        }
        assert.ok(compared >= 8 * n, `only ${compared} logprobs comparable`);
        assert.ok(worst <= tol, `worst |logprob - llama.cpp| = ${worst} > ${tol}`);
      });
    });
  }
});
