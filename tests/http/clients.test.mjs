// The other clients people drive OpenAI-compatible servers with, unmodified: Vercel's AI SDK
// (`ai` with `@ai-sdk/openai-compatible`) and LangChain (`@langchain/openai`), against a
// random-weight model with the Qwen2 vocabulary and the template it carries (Hermes tool calls).
// What is checked is the protocol as each library reads it: text and usage, streamed deltas
// that add up to the unstreamed text, tool calls parsed into the library's own objects, and
// structured output through each library's schema path (zod), which must parse and validate.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, jsonSchema, streamText, tool } from 'ai';
import { z } from 'zod';
import { liftBin, modelsDir, startServer } from './lib/server.mjs';

const T = { timeout: 60000 };

// Short valid values only (bounded string, enum, boolean): a random model completes a call or
// an object well within the token limits below.
const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 8 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const Flag = z.object({ ok: z.boolean() }).strict();

function makeModel(dir) {
  const out = path.join(dir, 'qwen2.gguf');
  const r = spawnSync(liftBin, ['make-model', '-o', out, '--vocab-from', path.join(modelsDir, 'vocab', 'ggml-vocab-qwen2.gguf'),
    '--dim', '64', '--layers', '2', '--heads', '4', '--ffn', '128', '--type', 'Q8_0', '--context', '2048'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

let dir;
let srv;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lift-clients-'));
  srv = await startServer({ model: makeModel(dir) });
});
after(async () => {
  await srv?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("Vercel's AI SDK (@ai-sdk/openai-compatible)", () => {
  // includeUsage: the SDK asks for stream_options.include_usage only when told to.
  const model = () => createOpenAICompatible({
    name: 'lift', baseURL: `${srv.url}/v1`, supportsStructuredOutputs: true, includeUsage: true,
  })('m');

  it('generateText and streamText: the same greedy text, usage counted', T, async () => {
    const args = { model: model(), prompt: 'Once upon a time', maxOutputTokens: 12, temperature: 0, maxRetries: 0 };
    const whole = await generateText(args);
    assert.ok(whole.text.length > 0);
    assert.equal(whole.finishReason, 'length');
    assert.equal(whole.usage.outputTokens, 12);
    const streamed = streamText(args);
    let text = '';
    let deltas = 0;
    for await (const d of streamed.textStream) {
      text += d;
      ++deltas;
    }
    assert.equal(text, whole.text);
    assert.ok(deltas > 1, 'not streamed');
    assert.equal((await streamed.usage).outputTokens, 12);
  });

  it('tools: a required call arrives as the SDK\'s tool call, its input valid, streamed too', T, async () => {
    const weather = tool({ description: 'Weather now.', inputSchema: jsonSchema(WEATHER) });
    const r = await generateText({
      model: model(), prompt: 'Weather in Paris?', tools: { weather }, toolChoice: 'required',
      maxOutputTokens: 300, temperature: 1, seed: 3, maxRetries: 0,
    });
    assert.equal(r.finishReason, 'tool-calls');
    assert.ok(r.toolCalls.length >= 1);
    for (const c of r.toolCalls) {
      assert.equal(c.toolName, 'weather');
      assert.ok(!c.invalid, `invalid input: ${JSON.stringify(c)}`);
      assert.ok(['c', 'f'].includes(c.input.unit), JSON.stringify(c.input));
    }
    const s = streamText({
      model: model(), prompt: 'Weather in Paris?', tools: { weather }, toolChoice: 'required',
      maxOutputTokens: 300, temperature: 1, seed: 3, maxRetries: 0,
    });
    const calls = [];
    for await (const part of s.fullStream) if (part.type === 'tool-call') calls.push(part);
    assert.deepEqual(calls.map((c) => c.input), r.toolCalls.map((c) => c.input));
  });

  it('generateObject: response_format json_schema from zod, parsed and validated by the SDK', T, async () => {
    const r = await generateObject({ model: model(), schema: Flag, prompt: 'Is it ok?', maxOutputTokens: 300, maxRetries: 0 });
    assert.equal(typeof r.object.ok, 'boolean');
  });
});

describe('LangChain (@langchain/openai ChatOpenAI)', () => {
  const chat = (extra = {}) => new ChatOpenAI({
    model: 'm', apiKey: 'sk-no-key', maxRetries: 0, configuration: { baseURL: `${srv.url}/v1` }, ...extra,
  });

  it('invoke, stream and batch: the same greedy text, token usage reported', T, async () => {
    const lc = chat({ maxTokens: 12, temperature: 0 });
    const whole = await lc.invoke('Once upon a time');
    assert.ok(typeof whole.content === 'string' && whole.content.length > 0);
    assert.equal(whole.response_metadata.finish_reason, 'length');
    assert.equal(whole.usage_metadata.output_tokens, 12);
    let text = '';
    for await (const chunk of await lc.stream('Once upon a time')) text += chunk.content;
    assert.equal(text, whole.content);
    const both = await lc.batch(['Once upon a time', 'Once upon a time']);
    assert.deepEqual(both.map((m) => m.content), [whole.content, whole.content]);
  });

  it('bindTools with tool_choice required: tool_calls parsed into args', T, async () => {
    const lc = chat({ maxTokens: 300, temperature: 1 }).bindTools(
      [{ type: 'function', function: { name: 'weather', description: 'Weather now.', parameters: WEATHER } }],
      { tool_choice: 'required', seed: 3 });
    const r = await lc.invoke('Weather in Paris?');
    assert.deepEqual(r.invalid_tool_calls, []);
    assert.ok(r.tool_calls.length >= 1);
    for (const c of r.tool_calls) {
      assert.equal(c.name, 'weather');
      assert.ok(['c', 'f'].includes(c.args.unit), JSON.stringify(c.args));
    }
  });

  it('withStructuredOutput (zod), by json_schema and by function calling', T, async () => {
    for (const method of ['jsonSchema', 'functionCalling']) {
      const r = await chat({ maxTokens: 300 }).withStructuredOutput(Flag, { method }).invoke('Is it ok?');
      assert.equal(typeof r.ok, 'boolean', `${method}: ${JSON.stringify(r)}`);
    }
  });
});
