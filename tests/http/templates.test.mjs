// Chat templates over HTTP on stories260K: the builtin chatml a model without a template gets,
// an inline --chat-template that shows what it was given (tools, chat_template_kwargs,
// add_generation_prompt), raise_exception as a 400 through the OpenAI SDK, POST /apply-template,
// /tokenize with messages, and a template that does not parse stopping the server at start-up.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { STORIES, liftBin, startServer } from './lib/server.mjs';
import { client, post } from './lib/http.mjs';

const T = { timeout: 60000 };
const MESSAGES = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];

describe('templates: the builtin chatml (stories260K has no tokenizer.chat_template)', () => {
  let srv;
  before(async () => { srv = await startServer({ model: STORIES }); });
  after(async () => { await srv?.stop(); });

  it('POST /apply-template renders the conversation', T, async () => {
    const res = await post(srv, '/apply-template', { messages: MESSAGES });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, {
      prompt: '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    });
    const off = (await post(srv, '/apply-template', { messages: MESSAGES, add_generation_prompt: false })).json;
    assert.ok(off.prompt.endsWith('Hi<|im_end|>\n'), off.prompt);
  });

  it('/tokenize with messages tokenizes the rendered prompt', T, async () => {
    const { prompt } = (await post(srv, '/apply-template', { messages: MESSAGES })).json;
    const viaMessages = (await post(srv, '/tokenize', { messages: MESSAGES })).json;
    const viaText = (await post(srv, '/tokenize', { prompt, add_special_tokens: false })).json;
    assert.deepEqual(viaMessages.tokens, viaText.tokens);
    const withBos = (await post(srv, '/tokenize', { messages: MESSAGES, add_special_tokens: true })).json;
    assert.deepEqual(withBos.tokens, [1, ...viaText.tokens]);
  });
});

describe('templates: an inline --chat-template', () => {
  const source = [
    "{% if messages | length > 2 %}{{ raise_exception('too many messages: ' ~ messages | length) }}{% endif %}",
    '{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}',
    "{% if tools %}tools={{ tools | map(attribute='function.name') | join(',') }};{% endif %}",
    '{% if mood is defined %}mood={{ mood }};{% endif %}',
    '{% if add_generation_prompt %}>{% endif %}',
  ].join('');
  let srv;
  before(async () => { srv = await startServer({ model: STORIES, args: ['--chat-template', source] }); });
  after(async () => { await srv?.stop(); });

  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];

  it('tools and chat_template_kwargs reach the template', T, async () => {
    const res = await post(srv, '/apply-template', {
      messages: [{ role: 'user', content: 'Hi' }], tools, chat_template_kwargs: { mood: 'calm' },
    });
    assert.deepEqual(res.json, { prompt: 'user=Hi;tools=get_weather;mood=calm;>' });
    const c = await client(srv).chat.completions.create({
      model: 'm', messages: [{ role: 'user', content: 'Hi' }], tools, max_tokens: 3, temperature: 0,
      chat_template_kwargs: { mood: 'calm' },
    });
    assert.equal(c.choices[0].message.role, 'assistant');
    const ids = (await post(srv, '/tokenize', { prompt: 'user=Hi;tools=get_weather;mood=calm;>' })).json;
    assert.equal(c.usage.prompt_tokens, ids.count - 1);  // the template writes no BOS
  });

  it('raise_exception answers 400 with the template\'s message', T, async () => {
    const three = [...MESSAGES, { role: 'assistant', content: 'Hello' }];
    await assert.rejects(
      client(srv).chat.completions.create({ model: 'm', messages: three, max_tokens: 2 }),
      (e) => e.status === 400 && /too many messages: 3/.test(e.message),
    );
    const res = await post(srv, '/apply-template', { messages: three });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.message, 'too many messages: 3');
  });
});

describe('templates: start-up', () => {
  it('a template that does not parse stops the server with the reason', T, () => {
    const r = spawnSync(liftBin, ['serve', '-m', STORIES, '--port', '0', '--chat-template', '{% for m in messages %}'],
      { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /not a chat template lift can run/);
    assert.match(r.stderr, /endfor/);
  });
});
