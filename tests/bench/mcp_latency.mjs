// MCP latency and throughput benchmark: autocomp-mcp against a server written with the official
// TypeScript SDK (ts_sdk_server.mjs), in the same run, with the same client code for both.
// It prints figures; it is not a test and asserts nothing.
//
// usage: node mcp_latency.mjs --bin PATH [options]        (run it with Node >= 22)
//   --iterations N           timed requests per method and transport (default 2000)
//   --warmup N               untimed requests before each series (default 200)
//   --clients N              concurrent keep-alive HTTP clients for the throughput run (default 8)
//   --requests N             total requests of the throughput run, per server (default 20000)
//   --seconds S              time bound of the throughput run, per server (default 10)
//   --throughput-method M    method used by the throughput run: ping or tools/list (default ping)
//   --json FILE              also write every figure as JSON to FILE
//   --no-mirror              give the TS server its own small tool set instead of autocomp-mcp's
// By default the TS server registers the same tools as autocomp-mcp (read from autocomp-mcp's
// tools/list before the run, passed with ts_sdk_server.mjs --mirror-tools), so that both
// tools/list responses describe the same tools; the response sizes are printed next to the figures.
// All traffic stays on 127.0.0.1. Every child process is killed when the program exits.
//
// Method: latency = one request in flight at a time (both servers run side by side and the series
// alternate between them in blocks of 100 requests), measured from just before the client writes
// the request to when the matching response has been parsed. stdio frames are single lines on the
// child's stdin/stdout. HTTP uses node:http with a keep-alive agent holding one socket per client,
// one Mcp-Session-Id per client (initialize + notifications/initialized first), and accepts a
// JSON or an SSE response body.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import path from 'node:path';

const PROTOCOL_VERSION = '2025-11-25';
const REQUEST_TIMEOUT_MS = 10_000;
const here = path.dirname(new URL(import.meta.url).pathname);

function parseArgs(argv) {
  const o = {
    bin: null, ts: path.join(here, 'ts_sdk_server.mjs'), iterations: 2000, warmup: 200,
    clients: 8, requests: 20000, seconds: 10, throughputMethod: 'ping', json: null, mirror: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--bin') o.bin = next();
    else if (a === '--ts-server') o.ts = next();
    else if (a === '--iterations') o.iterations = Number(next());
    else if (a === '--warmup') o.warmup = Number(next());
    else if (a === '--clients') o.clients = Number(next());
    else if (a === '--requests') o.requests = Number(next());
    else if (a === '--seconds') o.seconds = Number(next());
    else if (a === '--throughput-method') o.throughputMethod = next();
    else if (a === '--json') o.json = next();
    else if (a === '--no-mirror') o.mirror = false;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.bin) throw new Error('--bin PATH is required');
  return o;
}

const children = new Set();
function killChildren() {
  for (const c of children) {
    try { c.kill('SIGKILL'); } catch { /* already gone */ }
  }
}
process.on('exit', killChildren);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

function startChild(command, args) {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  child.stderrTail = () => stderr;
  return child;
}

async function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.stdin.end();
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 2000);
  await exited;
  clearTimeout(t);
}

const initializeParams = {
  protocolVersion: PROTOCOL_VERSION,
  capabilities: {},
  clientInfo: { name: 'autocomp-mcp-bench', version: '1.0.0' },
};

// ---- stdio client: newline-delimited JSON-RPC over a child's pipes ----
class StdioClient {
  constructor(child) {
    this.child = child;
    this.nextId = 1;
    this.pending = new Map();
    this.buffer = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => this.onData(chunk));
    child.on('exit', (code, sig) => {
      for (const { reject } of this.pending.values()) reject(new Error(`server exited (${code ?? sig})`));
      this.pending.clear();
    });
  }

  onData(chunk) {
    this.buffer += chunk;
    let nl;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      if (!line.trim()) continue;
      let msg;
      try { msg = JSON.parse(line); } catch { continue; }
      if (msg.id !== undefined && !msg.method && this.pending.has(msg.id)) {
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        clearTimeout(p.timer);
        if (msg.error) p.reject(new Error(`${msg.error.code}: ${msg.error.message}`));
        else p.resolve({ result: msg.result, bytes: line.length });
      }
    }
  }

  request(method, params) {
    const id = this.nextId++;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} timed out`));
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      this.child.stdin.write(`${body}\n`);
    });
  }

  notify(method, params) {
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method, ...(params ? { params } : {}) })}\n`);
  }

  async initialize() {
    await this.request('initialize', initializeParams);
    this.notify('notifications/initialized');
  }
}

// ---- HTTP client: one keep-alive socket, one MCP session ----
function parseSseForId(text, id) {
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
    if (!data) continue;
    try {
      const msg = JSON.parse(data);
      if (msg.id === id && !msg.method) return msg;
    } catch { /* not JSON: ignore */ }
  }
  return null;
}

class HttpClient {
  constructor(port) {
    this.port = port;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    this.sessionId = null;
    this.nextId = 1;
  }

  post(payload) {
    const body = JSON.stringify(payload);
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Content-Length': Buffer.byteLength(body),
    };
    if (this.sessionId) {
      headers['Mcp-Session-Id'] = this.sessionId;
      headers['MCP-Protocol-Version'] = PROTOCOL_VERSION;
    }
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1', port: this.port, path: '/mcp', method: 'POST', headers, agent: this.agent,
        timeout: REQUEST_TIMEOUT_MS,
      }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('HTTP request timed out')));
      req.on('error', reject);
      req.end(body);
    });
  }

  async request(method, params) {
    const id = this.nextId++;
    const res = await this.post({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    if (res.status !== 200) throw new Error(`${method}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
    const sse = String(res.headers['content-type'] ?? '').includes('text/event-stream');
    const msg = sse ? parseSseForId(res.text, id) : JSON.parse(res.text);
    if (!msg) throw new Error(`${method}: no response for id ${id} in the SSE stream`);
    if (msg.error) throw new Error(`${method}: ${msg.error.code} ${msg.error.message}`);
    return { result: msg.result, headers: res.headers, bytes: res.text.length };
  }

  async initialize() {
    const r = await this.request('initialize', initializeParams);
    this.sessionId = r.headers['mcp-session-id'] ?? null;
    const n = await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (n.status !== 202 && n.status !== 200) throw new Error(`notifications/initialized: HTTP ${n.status}`);
  }

  close() { this.agent.destroy(); }
}

// ---- servers ----
async function waitForPortFile(file, child, label) {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8').trim();
      if (/^\d+$/.test(text)) return Number(text);
    }
    if (child.exitCode !== null) throw new Error(`${label} exited: ${child.stderrTail().slice(-500)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${label} did not write its port file`);
}

function serverCommands(opts, mirrorFile) {
  return {
    'autocomp-mcp': { command: opts.bin, args: [] },
    'ts-sdk': { command: process.execPath, args: [opts.ts, ...(mirrorFile ? ['--mirror-tools', mirrorFile] : [])] },
  };
}

// Writes autocomp-mcp's tool definitions to FILE; returns the tool count.
async function fetchToolDefinitions(bin, file) {
  const child = startChild(bin, []);
  try {
    const client = new StdioClient(child);
    await client.initialize();
    const tools = [];
    let cursor;
    do {
      const { result } = await client.request('tools/list', cursor ? { cursor } : undefined);
      tools.push(...result.tools);
      cursor = result.nextCursor;
    } while (cursor && tools.length < 10000);
    writeFileSync(file, JSON.stringify(tools));
    return tools.length;
  } finally {
    await stopChild(child);
  }
}

async function startServer(spec, transport, label, tmp) {
  if (transport === 'stdio') {
    const child = startChild(spec.command, spec.args);
    const client = new StdioClient(child);
    await client.initialize();
    return { child, client };
  }
  const portFile = path.join(tmp, `${label}-${transport}.port`);
  const child = startChild(spec.command, [...spec.args, '--http', '127.0.0.1:0', '--port-file', portFile]);
  const port = await waitForPortFile(portFile, child, label);
  const client = new HttpClient(port);
  await client.initialize();
  return { child, client, port };
}

// ---- statistics ----
function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}
function summarize(samplesNs) {
  const ms = samplesNs.map((n) => Number(n) / 1e6).sort((a, b) => a - b);
  const mean = ms.reduce((a, b) => a + b, 0) / (ms.length || 1);
  return { n: ms.length, p50: percentile(ms, 50), p99: percentile(ms, 99), mean, max: ms[ms.length - 1] };
}

// Measures `method` on every server of `servers` ({label: client}), interleaved in blocks of
// BLOCK requests (A, B, A, B, ...), so that a change of machine load hits all of them alike.
const BLOCK = 100;
async function latencySeries(servers, method, warmup, iterations) {
  const labels = Object.keys(servers);
  const samples = Object.fromEntries(labels.map((l) => [l, []]));
  const bytes = {};
  for (const l of labels) for (let i = 0; i < warmup; i++) await servers[l].request(method);
  for (let done = 0; done < iterations; done += BLOCK) {
    const n = Math.min(BLOCK, iterations - done);
    for (const l of labels) {
      for (let i = 0; i < n; i++) {
        const t0 = process.hrtime.bigint();
        const r = await servers[l].request(method);
        samples[l].push(process.hrtime.bigint() - t0);
        bytes[l] = r.bytes;
      }
    }
  }
  return Object.fromEntries(labels.map((l) => [l, { ...summarize(samples[l]), responseBytes: bytes[l] }]));
}

async function throughputRun(port, opts) {
  const clients = [];
  for (let i = 0; i < opts.clients; i++) {
    const c = new HttpClient(port);
    await c.initialize();
    await c.request(opts.throughputMethod);  // opens the socket before the clock starts
    clients.push(c);
  }
  const samples = [];
  let issued = 0;
  let errors = 0;
  const deadline = performance.now() + opts.seconds * 1000;
  const t0 = performance.now();
  await Promise.all(clients.map(async (c) => {
    while (issued < opts.requests && performance.now() < deadline) {
      issued++;
      const s = process.hrtime.bigint();
      try {
        await c.request(opts.throughputMethod);
        samples.push(process.hrtime.bigint() - s);
      } catch {
        errors++;
      }
    }
  }));
  const elapsed = (performance.now() - t0) / 1000;
  for (const c of clients) c.close();
  return { ...summarize(samples), errors, seconds: elapsed, callsPerSecond: samples.length / elapsed, clients: opts.clients };
}

// ---- main ----
const fmt = (x, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const tmp = mkdtempSync(path.join(tmpdir(), 'mcp-bench-'));
  const results = { latency: {}, throughput: {}, config: { ...opts, node: process.version } };
  let mirrorFile = null;
  let mirrorNote = 'its own 4 tools';
  if (opts.mirror) {
    try {
      const file = path.join(tmp, 'tools.json');
      const n = await fetchToolDefinitions(opts.bin, file);
      mirrorFile = file;
      mirrorNote = `the same ${n} tool definitions as autocomp-mcp`;
    } catch (e) {
      mirrorNote = `its own 4 tools (could not read autocomp-mcp's tools: ${e?.message ?? e})`;
    }
  }
  const specs = serverCommands(opts, mirrorFile);
  results.config.tsTools = mirrorNote;
  const methods = ['ping', 'tools/list'];

  const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
  results.config.loadBefore = loadavg();
  console.log(`machine: ${cpus().length} CPUs, load average ${load()} (figures are noisy when other work runs)`);
  console.log(`MCP latency benchmark: ${opts.iterations} timed requests per series after ${opts.warmup} warm-up, one in flight, 127.0.0.1`);
  console.log(`  autocomp-mcp: ${opts.bin}`);
  console.log(`  ts-sdk:       ${opts.ts} (@modelcontextprotocol/sdk McpServer, Node ${process.version}; HTTP: stateful sessions, JSON responses)`);
  console.log(`                serving ${mirrorNote}`);

  for (const transport of ['stdio', 'http']) {
    // Both servers run side by side; the latency series alternate between them.
    const running = {};
    try {
      for (const [label, spec] of Object.entries(specs)) {
        try {
          running[label] = await startServer(spec, transport, label, tmp);
        } catch (e) {
          results.latency[`${label}/${transport}/error`] = String(e?.message ?? e);
          console.log(`  ${label}/${transport}: ERROR ${e?.message ?? e}`);
        }
      }
      const clients = Object.fromEntries(Object.entries(running).map(([l, s]) => [l, s.client]));
      for (const method of methods) {
        try {
          const series = await latencySeries(clients, method, opts.warmup, opts.iterations);
          for (const [label, r] of Object.entries(series)) results.latency[`${label}/${transport}/${method}`] = r;
        } catch (e) {
          console.log(`  ${transport} ${method}: ERROR ${e?.message ?? e}`);
        }
      }
      if (transport === 'http') {
        for (const [label, server] of Object.entries(running)) {
          server.client.close();
          try {
            results.throughput[label] = await throughputRun(server.port, opts);
          } catch (e) {
            console.log(`  ${label} throughput: ERROR ${e?.message ?? e}`);
          }
        }
      }
    } finally {
      for (const server of Object.values(running)) await stopChild(server.child);
    }
  }

  console.log('\nLatency (ms; lower is better)');
  console.log(`${pad('transport', 10)}${pad('method', 12)}${lpad('autocomp p50', 13)}${lpad('p99', 9)}${lpad('ts-sdk p50', 12)}${lpad('p99', 9)}${lpad('p50 ratio', 11)}${lpad('resp bytes (ours/ts)', 23)}`);
  for (const transport of ['stdio', 'http']) {
    for (const method of methods) {
      const a = results.latency[`autocomp-mcp/${transport}/${method}`];
      const t = results.latency[`ts-sdk/${transport}/${method}`];
      const ratio = a && t ? t.p50 / a.p50 : NaN;
      results.latency[`ratio/${transport}/${method}`] = ratio;
      console.log(`${pad(transport, 10)}${pad(method, 12)}${lpad(fmt(a?.p50), 13)}${lpad(fmt(a?.p99), 9)}${lpad(fmt(t?.p50), 12)}${lpad(fmt(t?.p99), 9)}${lpad(Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : 'n/a', 11)}${lpad(`${a?.responseBytes ?? '-'}/${t?.responseBytes ?? '-'}`, 23)}`);
    }
  }

  console.log(`\nHTTP throughput: ${opts.clients} keep-alive clients, ${opts.throughputMethod}, at most ${opts.requests} requests or ${opts.seconds} s per server`);
  console.log(`${pad('server', 14)}${lpad('calls/s', 10)}${lpad('requests', 10)}${lpad('errors', 8)}${lpad('p50 ms', 9)}${lpad('p99 ms', 9)}${lpad('max ms', 9)}`);
  for (const label of Object.keys(specs)) {
    const r = results.throughput[label];
    console.log(`${pad(label, 14)}${lpad(r ? r.callsPerSecond.toFixed(0) : 'n/a', 10)}${lpad(r?.n ?? '-', 10)}${lpad(r?.errors ?? '-', 8)}${lpad(fmt(r?.p50), 9)}${lpad(fmt(r?.p99), 9)}${lpad(fmt(r?.max), 9)}`);
  }

  const ours = results.throughput['autocomp-mcp'];
  const ratios = methods.flatMap((m) => ['stdio', 'http'].map((t) => results.latency[`ratio/${t}/${m}`]));
  const minRatio = Math.min(...ratios.map((r) => (Number.isFinite(r) ? r : 0)));
  console.log('\nGoals (issue #2):');
  console.log(`  p50 at least 3x lower than the TS SDK server in every series: ${minRatio >= 3 ? 'met' : 'not met'} (smallest ratio ${fmt(minRatio, 2)}x)`);
  const tputOk = ours && ours.callsPerSecond >= 2000 && ours.p99 < 10 && ours.errors === 0;
  console.log(`  HTTP >= 2,000 calls/s with p99 < 10 ms: ${tputOk ? 'met' : 'not met'} (${ours ? `${ours.callsPerSecond.toFixed(0)} calls/s, p99 ${fmt(ours.p99)} ms, ${ours.errors} errors` : 'no figure'})`);

  results.config.loadAfter = loadavg();
  console.log(`load average after the run: ${load()}`);
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify(results, null, 2)}\n`);
  rmSync(tmp, { recursive: true, force: true });
}

main().then(() => process.exit(0), (e) => {
  console.error(e?.stack ?? e);
  process.exit(1);
});
