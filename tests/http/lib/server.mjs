// Starts and stops `lift serve` instances for the HTTP tests, each on its own free loopback port.
//
// Environment:
//   LIFT_BIN         the lift binary (default: build/ci-gcc/lift under the repository root)
//   LIFT_MODELS_DIR  the shared models folder (default: ../shared/models beside the repository)
//   LIFT_SERVE_THREADS  -t for every server (default 2)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..', '..');
export const liftBin = path.resolve(repoRoot, process.env.LIFT_BIN || 'build/ci-gcc/lift');
export const modelsDir = path.resolve(repoRoot, process.env.LIFT_MODELS_DIR || '../shared/models');
export const STORIES = path.join(modelsDir, 'stories260K', 'stories260K.gguf');
export const LLAMA_RANDOM = path.join(modelsDir, 'llama-2-tiny-random', 'llama-2-tiny-random.gguf');
// 46 layers (a 32k vocabulary): about a tenth of stories260K's speed, for tests that need a
// request to outlast a deadline on any machine.
export const GEMMA2_46L = path.join(modelsDir, 'archs', 'archs-gemma2-46l.gguf');
const threads = process.env.LIFT_SERVE_THREADS || '2';

export function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const live = new Set();
// Last resort: never leave a server behind when this test process goes away.
process.on('exit', () => {
  for (const p of live) {
    try { p.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

class Server {
  constructor(proc, port, apiKey) {
    this.proc = proc;
    this.port = port;
    this.apiKey = apiKey;
    this.url = `http://127.0.0.1:${port}`;
    this.log = '';
    this.exitCode = undefined;
    this.exitSignal = undefined;
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        live.delete(proc);
        resolve({ code, signal });
      });
    });
    const keep = (d) => {
      this.log += d.toString();
      if (this.log.length > 64 * 1024) this.log = this.log.slice(-32 * 1024);
    };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
  }

  get running() {
    return this.exitCode === undefined && this.exitSignal === undefined;
  }

  logTail(n = 4000) {
    return this.log.slice(-n);
  }

  // Sends `signal` and waits up to `ms` for the process to exit; returns {code, signal, timedOut}.
  async signalAndWait(signal, ms) {
    this.stopping = true;
    if (!this.running) return { code: this.exitCode, signal: this.exitSignal, timedOut: false };
    this.proc.kill(signal);
    let timer;
    const timeout = new Promise((r) => { timer = setTimeout(() => r(null), ms); });
    const res = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    if (res === null) return { code: null, signal: null, timedOut: true };
    return { ...res, timedOut: false };
  }

  async stop() {
    if (!this.running && !this.stopping) {
      // Died on its own: show why (the tests that hit ECONNREFUSED cannot).
      console.log(`# lift serve on port ${this.port} had exited by itself (code ${this.exitCode}, signal ${this.exitSignal}); its log:\n${this.logTail().replace(/^/gm, '#   ')}`);
    }
    this.stopping = true;
    const r = await this.signalAndWait('SIGTERM', 5000);
    if (r.timedOut) await this.signalAndWait('SIGKILL', 5000);
  }
}

// Starts `lift serve -m model --host 127.0.0.1 --port P -t T ...args` (with `env` added to the
// environment) and waits for GET /health
// to answer 200 (at most `readyMs`). Retries on another port if the process dies while
// starting. The caller stops it (an after() hook); a process 'exit' hook kills leftovers.
export async function startServer({ model = STORIES, args = [], apiKey, env, readyMs = 30000 } = {}) {
  if (!fs.existsSync(liftBin)) throw new Error(`no lift binary at ${liftBin} (set LIFT_BIN)`);
  let lastErr;
  for (let attempt = 0; attempt < 3; ++attempt) {
    const port = await freePort();
    const argv = ['serve', '-m', model, '--host', '127.0.0.1', '--port', String(port), '-t', threads,
      ...(args.includes('--kv-cache-memory') ? [] : ['--kv-cache-memory', '64MiB']), ...args];
    if (apiKey) argv.push('--api-key', apiKey);
    // The tests name their model 'm': serve it under that alias too (after the file's own
    // name, which responses carry), unless a test chooses the names itself.
    if (!args.includes('--served-model-name')) {
      argv.push('--served-model-name', `${path.basename(model, '.gguf')},m`);
    }
    const proc = spawn(liftBin, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...(env || {}) } });
    live.add(proc);
    const srv = new Server(proc, port, apiKey);
    try {
      await waitReady(srv, readyMs);
      return srv;
    } catch (e) {
      lastErr = e;
      await srv.stop();
    }
  }
  throw lastErr;
}

async function waitReady(srv, ms) {
  const deadline = Date.now() + ms;
  const headers = srv.apiKey ? { Authorization: `Bearer ${srv.apiKey}` } : {};
  while (Date.now() < deadline) {
    if (!srv.running) {
      throw new Error(`lift serve exited while starting (code ${srv.exitCode}, signal ${srv.exitSignal}):\n${srv.logTail()}`);
    }
    try {
      const r = await fetch(`${srv.url}/health`, { headers, signal: AbortSignal.timeout(2000) });
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch { /* not listening yet */ }
    await sleep(100);
  }
  throw new Error(`lift serve did not answer GET /health with 200 within ${ms} ms:\n${srv.logTail()}`);
}
