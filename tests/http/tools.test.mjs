// Tool calling through `lift serve` with the OpenAI Node SDK, on random-weight models with real
// vocabularies and templates: the Qwen2 vocabulary with the template it carries (Qwen3's, Hermes <tool_call>)
// template, and the Llama 3 vocabulary with the Llama 3.1 tools template (JSON calls). With
// tool_choice "required" or a named function even a random model writes a call that parses:
// call -> tool result -> final answer, streamed and not; finish_reason "tool_calls"; the
// arguments parse as JSON and validate against the tool's schema (ajv, an independent
// validator); streamed deltas in OpenAI's shape (id, type and name first, then argument
// fragments, an index per call).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import { liftBin, modelsDir, repoRoot, startServer } from './lib/server.mjs';
import { client } from './lib/http.mjs';

const T = { timeout: 60000 };

// Bounded strings and an enum: every valid call is short, so a random model completes one
// well within max_tokens.
const WEATHER = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 8 },
    unit: { enum: ['c', 'f'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const TIME = { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'], additionalProperties: false };
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather now.', parameters: WEATHER } },
  { type: 'function', function: { name: 'get_time', description: 'Local time.', parameters: TIME } },
];
const ajv = new Ajv({ strict: true });
const VALIDATE = { get_weather: ajv.compile(WEATHER), get_time: ajv.compile(TIME) };
const QUESTION = [{ role: 'user', content: 'What is the weather in Paris?' }];

function assertCall(call, names) {
  assert.equal(call.type, 'function');
  assert.ok(typeof call.id === 'string' && call.id.length > 0, 'no id');
  assert.ok(names.includes(call.function.name), `unexpected function ${call.function.name}`);
  let args;
  assert.doesNotThrow(() => { args = JSON.parse(call.function.arguments); },
    `arguments are not JSON: ${JSON.stringify(call.function.arguments)}`);
  const validate = VALIDATE[call.function.name];
  assert.ok(validate(args), `${JSON.stringify(args)} breaks the schema: ${JSON.stringify(validate.errors)}`);
}

// Reads a streamed chat completion, checking the shape of its tool_calls deltas, and returns
// the message it adds up to and the finish reason.
async function collect(stream) {
  const calls = [];
  let content = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      const d = choice.delta || {};
      if (d.content) content += d.content;
      for (const tc of d.tool_calls || []) {
        if (tc.index === calls.length) {
          // A call's first delta: id, type and name, before any argument text.
          assert.ok(tc.id && tc.type === 'function' && tc.function?.name, `first delta lacks id/type/name: ${JSON.stringify(tc)}`);
          calls.push({ id: tc.id, type: tc.type, function: { name: tc.function.name, arguments: tc.function.arguments || '' } });
        } else {
          assert.ok(tc.index < calls.length, `delta for call ${tc.index} before its first delta`);
          assert.equal(tc.id, undefined, 'only the first delta of a call carries its id');
          calls[tc.index].function.arguments += tc.function?.arguments || '';
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { message: { role: 'assistant', content: content || null, tool_calls: calls.length ? calls : undefined }, finish };
}

// The calling turn as the next request sends it back: as the SDK returned it, content null
// where the reply had none (lift hands templates "" for it, as vLLM: the Qwen3 template in
// this vocabulary tests `'</think>' in content`, which fails on None).
const back = (m) => ({ ...m, content: m.content ?? null });

function makeModel(dir, vocab) {
  const out = path.join(dir, `${vocab}.gguf`);
  const r = spawnSync(liftBin, ['make-model', '-o', out, '--vocab-from', path.join(modelsDir, 'vocab', `ggml-vocab-${vocab}.gguf`),
    '--dim', '64', '--layers', '2', '--heads', '4', '--ffn', '128', '--type', 'Q8_0', '--context', '2048'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lift-tools-')); });
after(() => { fs.rmSync(dir, { recursive: true, force: true }); });

describe('tools on the Qwen2 vocabulary with its own template (Qwen3, Hermes <tool_call>)', () => {
  let srv;
  let openai;
  before(async () => {
    srv = await startServer({ model: makeModel(dir, 'qwen2') });
    openai = client(srv);
  });
  after(async () => { await srv?.stop(); });

  it('required: a call that validates, its result, then the final answer (not streamed)', T, async () => {
    const first = await openai.chat.completions.create({
      model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false,
      max_tokens: 400, temperature: 1, seed: 3,
    });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assertCall(call, ['get_weather', 'get_time']);

    const messages = [...QUESTION, back(choice.message), { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }];
    const answer = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS, max_tokens: 8, temperature: 0 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
    // The result reached the template: the prompt grew by the call and its result.
    assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens + 10);
  });

  it('a named function, streamed: deltas add up to a valid call of it, then the answer streams', T, async () => {
    const { message, finish } = await collect(await openai.chat.completions.create({
      model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } },
      max_tokens: 400, temperature: 1, seed: 5, stream: true,
    }));
    assert.equal(finish, 'tool_calls');
    assert.ok(message.tool_calls.length >= 1);
    for (const c of message.tool_calls) assertCall(c, ['get_time']);
    const results = message.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '12:00' }));
    const final = await collect(await openai.chat.completions.create({
      model: 'm', messages: [...QUESTION, back(message), ...results], tools: TOOLS, tool_choice: 'none',
      max_tokens: 8, temperature: 0, stream: true,
    }));
    assert.ok(['stop', 'length'].includes(final.finish));
    assert.equal(final.message.tool_calls, undefined);
  });

  it('streamed and not give the same calls for the same seed', T, async () => {
    const body = { model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: 'required', max_tokens: 400, temperature: 1, seed: 9 };
    const whole = (await openai.chat.completions.create(body)).choices[0];
    const streamed = await collect(await openai.chat.completions.create({ ...body, stream: true }));
    assert.equal(streamed.finish, whole.finish_reason);
    const strip = (calls) => calls.map((c) => c.function);
    assert.deepEqual(strip(streamed.message.tool_calls), strip(whole.message.tool_calls));
  });

  it('auto is not constrained: what the model writes comes back as content or calls', T, async () => {
    const r = await openai.chat.completions.create({ model: 'm', messages: QUESTION, tools: TOOLS, max_tokens: 16, temperature: 0 });
    const m = r.choices[0].message;
    assert.ok(typeof m.content === 'string' || m.tool_calls?.length > 0);
  });

  it('bad tools and tool_choice are 400s naming the field', T, async () => {
    await assert.rejects(
      openai.chat.completions.create({ model: 'm', messages: QUESTION, tools: [{ type: 'function', function: { name: 'no spaces' } }] }),
      (e) => e.status === 400 && /letters, digits/.test(e.message));
    await assert.rejects(
      openai.chat.completions.create({ model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
      (e) => e.status === 400 && /not one of the request's tools/.test(e.message));
    await assert.rejects(
      openai.chat.completions.create({ model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: 'required', response_format: { type: 'json_object' } }),
      (e) => e.status === 400 && /cannot be combined/.test(e.message));
  });
});

describe('tools on the Llama 3 vocabulary with the Llama 3.1 template (JSON calls)', () => {
  let srv;
  let openai;
  before(async () => {
    const template = path.join(repoRoot, 'tests', 'template', 'templates', 'llama3.1-tools.jinja');
    srv = await startServer({ model: makeModel(dir, 'llama-bpe'), args: ['--chat-template', template] });
    openai = client(srv);
  });
  after(async () => { await srv?.stop(); });

  it('required, streamed and not: one valid call; the result goes back as an ipython turn', T, async () => {
    const body = { model: 'm', messages: QUESTION, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 400, temperature: 1, seed: 4 };
    const whole = (await openai.chat.completions.create(body)).choices[0];
    assert.equal(whole.finish_reason, 'tool_calls');
    assert.equal(whole.message.tool_calls.length, 1);
    assertCall(whole.message.tool_calls[0], ['get_weather', 'get_time']);
    const streamed = await collect(await openai.chat.completions.create({ ...body, stream: true }));
    assert.equal(streamed.finish, 'tool_calls');
    assert.deepEqual(streamed.message.tool_calls.map((c) => c.function), whole.message.tool_calls.map((c) => c.function));

    const messages = [...QUESTION, back(whole.message), { role: 'tool', tool_call_id: whole.message.tool_calls[0].id, content: '{"temp": 21}' }];
    const answer = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS, max_tokens: 8, temperature: 0 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
  });
});
