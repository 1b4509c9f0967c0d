// Structured output through `lift serve` on stories260K, with the OpenAI Node SDK and ajv as
// the independent JSON Schema validator: response_format json_schema (chat and completions,
// streamed and not, n = 2), json_object, vLLM's guided_choice / guided_regex /
// structured_outputs, llama.cpp's grammar, and the 400s for constraints that cannot be used.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import { STORIES, startServer } from './lib/server.mjs';
import { assertError, client, post, sse } from './lib/http.mjs';

const T = { timeout: 60000 };

// Every valid text is bounded: short strings, a bounded integer, an enum, and at most 20
// whitespace bytes in each of the 15 places JSON allows them (the server's bounded run), so a
// sample completes it within max_tokens 360 and ends with finish_reason "stop" even when the
// model loves newlines, as stories260K does.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 6 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pet: { enum: ['cat', 'dog', null] },
  },
  required: ['name', 'age', 'pet'],
  additionalProperties: false,
};
const MAX = 360;
const validate = new Ajv({ strict: true }).compile(PERSON);

function assertPerson(text, what) {
  let v;
  assert.doesNotThrow(() => { v = JSON.parse(text); }, `${what}: not JSON: ${JSON.stringify(text)}`);
  assert.ok(validate(v), `${what}: ${JSON.stringify(text)} breaks the schema: ${JSON.stringify(validate.errors)}`);
}

const MESSAGES = [{ role: 'user', content: 'Tell me about a girl and her dog.' }];
const PERSON_FORMAT = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };

describe('structured output on stories260K', () => {
  let srv;
  let openai;
  before(async () => {
    srv = await startServer({ model: STORIES });
    openai = client(srv);
  });
  after(async () => { if (srv) await srv.stop(); });

  it('chat response_format json_schema: every sample validates (SDK, non-streamed, n = 2, sampled)', T, async () => {
    for (const seed of [1, 2, 3]) {
      const c = await openai.chat.completions.create({
        model: 'm', messages: MESSAGES, response_format: PERSON_FORMAT, max_tokens: MAX, temperature: 1, seed, n: 2,
      });
      assert.equal(c.choices.length, 2);
      for (const ch of c.choices) {
        assert.equal(ch.finish_reason, 'stop', JSON.stringify(ch));
        assertPerson(ch.message.content, `seed ${seed} choice ${ch.index}`);
      }
    }
  });

  it('chat response_format json_schema streamed: the deltas join into valid JSON (SDK)', T, async () => {
    const stream = await openai.chat.completions.create({
      model: 'm', messages: MESSAGES, response_format: PERSON_FORMAT, max_tokens: MAX, temperature: 0.8, seed: 9, stream: true,
    });
    let text = '';
    let finish;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        text += ch.delta?.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.equal(finish, 'stop');
    assertPerson(text, 'streamed');
  });

  it('completions take response_format, guided_json and json_schema (greedy: all three agree)', T, async () => {
    const texts = [];
    for (const extra of [{ response_format: PERSON_FORMAT }, { guided_json: PERSON }, { json_schema: PERSON }]) {
      const c = await openai.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: MAX, temperature: 0, ...extra });
      assert.equal(c.choices[0].finish_reason, 'stop', JSON.stringify(c.choices[0]));
      assertPerson(c.choices[0].text, Object.keys(extra)[0]);
      texts.push(c.choices[0].text);
    }
    assert.equal(new Set(texts).size, 1, JSON.stringify(texts));
  });

  it('response_format json_object gives a JSON object (or its prefix at max_tokens)', T, async () => {
    for (const seed of [1, 2, 3, 4]) {
      const c = await openai.chat.completions.create({
        model: 'm', messages: MESSAGES, response_format: { type: 'json_object' }, max_tokens: 60, temperature: 1, seed,
      });
      const { content } = c.choices[0].message;
      assert.ok(content.trimStart().startsWith('{'), JSON.stringify(content));
      if (c.choices[0].finish_reason === 'stop') {
        const v = JSON.parse(content);
        assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), content);
      } else {
        assert.equal(c.choices[0].finish_reason, 'length');
      }
    }
  });

  it('guided_choice, guided_regex and structured_outputs match (raw HTTP, streamed too)', T, async () => {
    const choices = ['red', 'green', 'dark blue'];
    for (const seed of [1, 2, 3, 4]) {
      const r = await post(srv, '/v1/completions', { prompt: 'The sky is', max_tokens: 20, temperature: 1.2, seed, guided_choice: choices });
      assert.equal(r.status, 200, r.text);
      assert.ok(choices.includes(r.json.choices[0].text), r.text);
      assert.equal(r.json.choices[0].finish_reason, 'stop');
    }
    const re = /^[A-Z][a-z]{2,6} (is|was) [0-9]{1,2}$/;
    for (const seed of [5, 6]) {
      const r = await post(srv, '/v1/completions', {
        prompt: 'Lily', max_tokens: 40, temperature: 1, seed, guided_regex: '[A-Z][a-z]{2,6} (is|was) [0-9]{1,2}',
      });
      assert.equal(r.status, 200, r.text);
      assert.match(r.json.choices[0].text, re);
    }
    const s = await sse(srv, '/v1/chat/completions', {
      messages: MESSAGES, max_tokens: 40, temperature: 1, seed: 3, stream: true,
      structured_outputs: { regex: '(yes|no), [a-z]{3,8}' },
    });
    assert.equal(s.status, 200);
    const text = s.events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('');
    assert.match(text, /^(yes|no), [a-z]{3,8}$/);
  });

  it('llama.cpp grammar (GBNF) and guided_grammar are followed', T, async () => {
    const gbnf = 'root ::= "(" num ("," num){0,3} ")"\nnum ::= [1-9] [0-9]?';
    for (const field of ['grammar', 'guided_grammar']) {
      const r = await post(srv, '/v1/completions', { prompt: 'Numbers:', max_tokens: 40, temperature: 1, seed: 4, [field]: gbnf });
      assert.equal(r.status, 200, r.text);
      assert.match(r.json.choices[0].text, /^\([1-9][0-9]?(,[1-9][0-9]?){0,3}\)$/, `${field}: ${r.text}`);
    }
  });

  it('a constraint that cannot be used is a 400 naming the field', T, async () => {
    const cases = [
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/nope' } } } }, 'response_format'],
      [{ guided_regex: 'a(b' }, 'guided_regex'],
      [{ grammar: 'root ::= missing' }, 'grammar'],
      [{ guided_choice: [] }, 'guided_choice'],
      [{ guided_regex: 'a', guided_choice: ['a'] }, 'guided_choice'],
      [{ response_format: { type: 'yaml' } }, 'response_format.type'],
    ];
    for (const [extra, param] of cases) {
      const r = await post(srv, '/v1/chat/completions', { messages: MESSAGES, max_tokens: 5, ...extra });
      assertError(r, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param, r.text);
      assert.equal(r.json.error.type, 'invalid_request_error', r.text);
    }
    // The SDK surfaces it as a BadRequestError with the server's message.
    await assert.rejects(
      openai.chat.completions.create({ model: 'm', messages: MESSAGES, max_tokens: 5, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/nope' } } } }),
      (e) => e.status === 400 && /response_format/.test(e.message),
    );
    // The server goes on serving.
    const ok = await openai.completions.create({ model: 'm', prompt: 'Once', max_tokens: 3, temperature: 0 });
    assert.equal(ok.choices.length, 1);
  });
});
