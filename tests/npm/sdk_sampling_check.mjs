// The MCP client's own model (sampling/createMessage) as autocomp-mcp's model, checked with the
// official TypeScript SDK v1 Client over stdio and over Streamable HTTP. Run by
// tests/integration/sdk_sampling.sh.
//
// usage: node sdk_sampling_check.mjs /path/to/autocomp-mcp WORK_DIR HTTP_PORT
// The HTTP server on 127.0.0.1:HTTP_PORT is started by the caller without --llm; stdio servers are
// started here, without --llm, each with its own store in WORK_DIR. The client answers sampling
// requests with a plainly named fake model: a short plan for planning prompts, the prompt's
// kernel with one knob changed for implementation and repair prompts. Prints one line per check:
//   CHECK PASS <name> [(detail)]   |   CHECK FAIL <name> :: <reason>
// Exit status is 0 when every check passed. Every wait is bounded.
import { copyFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const [bin, workDir, httpPort] = process.argv.slice(2);
if (!bin || !workDir || !httpPort) {
  console.error('usage: node sdk_sampling_check.mjs /path/to/autocomp-mcp WORK_DIR HTTP_PORT');
  process.exit(2);
}
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const seedKernel = join(repoRoot, 'seeds', 'rmsnorm', 'tunable.py');
const problem = join(repoRoot, 'seeds', 'rmsnorm', 'problem.py');

const CALL_TIMEOUT_MS = 30_000;
const SEARCH_DEADLINE_MS = 40_000;
const FAKE_MODEL = 'fake-client-model';
const FAKE_PLAN_MARK = 'FAKE-CLIENT-PLAN';
const FAKE_KERNEL_MARK = '# rewritten by the fake client model';

let passed = 0;
let failed = 0;
const oneLine = (s) => String(s ?? '').replace(/\s+/g, ' ').trim().slice(0, 400);
function pass(name, detail = '') {
  passed++;
  console.log(`CHECK PASS ${name}${detail ? ` (${oneLine(detail)})` : ''}`);
}
function fail(name, reason) {
  failed++;
  console.log(`CHECK FAIL ${name} :: ${oneLine(reason)}`);
}
async function check(name, body) {
  try {
    pass(name, await body());
  } catch (e) {
    fail(name, e instanceof McpError ? `JSON-RPC error ${e.code}: ${e.message}` : (e?.message ?? e));
  }
}
function assert(cond, message) {
  if (!cond) throw new Error(message);
}

// --- the fake model ----------------------------------------------------------------------------

function promptText(params) {
  const parts = [params.systemPrompt ?? ''];
  for (const message of params.messages ?? []) {
    const blocks = Array.isArray(message.content) ? message.content : [message.content];
    for (const block of blocks) {
      if (block?.type === 'text') parts.push(block.text);
    }
  }
  return parts.join('\n');
}

// Which engine request a prompt is (see prompts/templates/ and search/engine/basic_prompts.cpp).
function requestKind(text) {
  if (/# A kernel that fails|Fix the error/.test(text)) return 'repair';
  if (/# The plan to implement|Rewrite the kernel according to the plan/.test(text)) return 'implement';
  if (/Propose exactly one optimization|Propose one optimization plan/.test(text)) return 'plan';
  return 'other';
}

// The kernel a prompt shows: the fenced Python block holding the @nki.jit function.
function promptKernel(text) {
  const blocks = [...text.matchAll(/```python\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.find((b) => b.includes('@nki.jit')) ?? null;
}

// Answers like a model would, but by rule. `log` receives every request it saw.
function fakeModel(log) {
  return async (request) => {
    const text = promptText(request.params);
    const kind = requestKind(text);
    log.push({ at: Date.now(), kind });
    let reply;
    if (kind === 'plan') {
      reply = `${FAKE_PLAN_MARK}: compute the square on ScalarE (set SQUARE_ENGINE = "scalar") so ` +
        'that it runs beside the VectorE reduction, and keep everything else unchanged.';
    } else if (kind === 'implement' || kind === 'repair') {
      const kernel = promptKernel(text);
      if (!kernel) throw new Error('the fake client model found no kernel in the prompt');
      const changed = kernel.replace(/^SQUARE_ENGINE = "vector"$/m, 'SQUARE_ENGINE = "scalar"');
      reply = 'Here is the kernel.\n\n```python\n' + FAKE_KERNEL_MARK + '\n' + changed + '```\n';
    } else {
      reply = 'Nothing to add.';
    }
    return { role: 'assistant', model: FAKE_MODEL, stopReason: 'endTurn', content: { type: 'text', text: reply } };
  };
}

// --- clients -----------------------------------------------------------------------------------

let storeCount = 0;
function stdioTransport() {
  storeCount++;
  const t = new StdioClientTransport({
    command: bin,
    args: ['--db', join(workDir, `stdio-${storeCount}.db`)],
    env: { ...process.env },
    stderr: 'pipe',
  });
  t.stderr?.on('data', (d) => {
    t.stderrTail = ((t.stderrTail ?? '') + d.toString()).slice(-4000);
  });
  return t;
}

function httpTransport({ blockGetStream = false } = {}) {
  const url = new URL(`http://127.0.0.1:${httpPort}/mcp`);
  // With blockGetStream the client never opens the session's GET stream (as if the server had
  // answered 405), so requests that belong to no tool call have no way to it.
  const fetchFn = blockGetStream
    ? (input, init) => (init?.method === 'GET' ? Promise.resolve(new Response(null, { status: 405 })) : fetch(input, init))
    : undefined;
  return new StreamableHTTPClientTransport(url, fetchFn ? { fetch: fetchFn } : {});
}

// A connected client; with `sampling` it declares the capability and answers with the fake model,
// or with `refuse` it declares it but turns every request down, as a user declining would.
async function connect(name, transport, { sampling, refuse = false }) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: sampling ? { sampling: {} } : {} });
  const samplingLog = [];
  if (sampling && refuse) {
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      samplingLog.push({ at: Date.now(), kind: 'refused' });
      throw new McpError(-1, 'the user declined the sampling request');
    });
  } else if (sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, fakeModel(samplingLog));
  }
  client.onerror = () => {};
  await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  return { client, samplingLog };
}

async function callTool(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
  const text = (result.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(' ');
  assert(!result.isError, `${name} returned an error: ${text}`);
  assert(result.structuredContent, `${name} returned no structuredContent`);
  return result.structuredContent;
}

let kernelCount = 0;
function kernelCopy() {
  kernelCount++;
  const path = join(workDir, `rmsnorm_${kernelCount}.py`);
  copyFileSync(seedKernel, path);
  return path;
}

// Follows a run with get_search_status until it is no longer running; returns the last status.
async function waitForRun(client, runId) {
  const deadline = Date.now() + SEARCH_DEADLINE_MS;
  let status;
  while (Date.now() < deadline) {
    status = await callTool(client, 'get_search_status', { run_id: runId, wait_s: 10 });
    if (status.status !== 'running' && !status.running_here) return status;
  }
  throw new Error(`run ${runId} still ${status?.status} after ${SEARCH_DEADLINE_MS / 1000} s`);
}

const searchArgs = (kernel) => ({ kernel, problem, iterations: 1, beam: 1, plans: 1, impls: 1 });

// --- checks ------------------------------------------------------------------------------------

async function samplingClientChecks(label, transport) {
  let session;
  await check(`${label}: connect with the sampling capability`, async () => {
    session = await connect(`autocomp-sampling-${label}`, transport, { sampling: true });
    return `${session.client.getServerVersion()?.name}`;
  });
  if (!session) return;
  const { client, samplingLog } = session;
  try {
    await check(`${label}: propose_plan without --llm plans with the client's model`, async () => {
      const before = samplingLog.length;
      const out = await callTool(client, 'propose_plan', { kernel: kernelCopy(), problem, count: 1 });
      assert(out.mode === 'llm', `mode ${out.mode}, expected llm`);
      assert(samplingLog.length > before, 'the client received no sampling request');
      assert(samplingLog.slice(before).some((r) => r.kind === 'plan'), 'no sampling request was a planning prompt');
      const plan = out.plans?.[0];
      assert(plan?.plan?.includes(FAKE_PLAN_MARK), `the plan is not the fake model's: ${JSON.stringify(plan)}`);
      return `${out.plans.length} plan(s) from provider ${plan.provider}`;
    });

    await check(`${label}: run_beam_search without --llm runs in the background on the client's model`, async () => {
      const before = samplingLog.length;
      const kernel = kernelCopy();
      const started = await callTool(client, 'run_beam_search', searchArgs(kernel));
      const returnedAt = Date.now();
      assert(started.run_id, 'no run_id');
      assert(started.model_source === 'client', `model_source ${started.model_source}, expected client`);
      const status = await waitForRun(client, started.run_id);
      const seen = samplingLog.slice(before);
      const kinds = seen.map((r) => r.kind);
      assert(seen.some((r) => r.at >= returnedAt), 'no sampling request arrived after run_beam_search returned');
      assert(kinds.includes('plan') && kinds.includes('implement'),
        `the client saw sampling requests [${kinds.join(', ')}], expected a plan and an implementation`);
      assert(status.status === 'completed', `status ${status.status}: ${status.message ?? status.result?.error ?? ''}`);
      assert(status.model_source === 'client', `status model_source ${status.model_source}`);
      const usage = status.client_model ?? {};
      assert(usage.answered >= 2, `client_model ${JSON.stringify(usage)}: fewer than 2 answered requests`);
      assert(usage.failed === 0, `client_model reports failures: ${JSON.stringify(usage)}`);
      assert(status.llm_calls >= 2, `llm_calls ${status.llm_calls}`);
      // The fake's kernel became a candidate of the run.
      const run = JSON.parse((await client.readResource({ uri: `autocomp://runs/${started.run_id}` },
        { timeout: CALL_TIMEOUT_MS })).contents[0].text);
      const fromModel = run.candidates.filter((c) => c.provider === 'llm');
      assert(fromModel.length >= 1, `no candidate came from the llm proposer: ${JSON.stringify(run.candidates.map((c) => c.provider))}`);
      const child = fromModel.find((c) => String(c.plan).includes(FAKE_PLAN_MARK));
      assert(child, `no llm candidate carries the fake model's plan: ${JSON.stringify(fromModel.map((c) => c.plan))}`);
      const source = (await client.readResource({ uri: `autocomp://candidates/${child.candidate}` },
        { timeout: CALL_TIMEOUT_MS })).contents[0].text;
      assert(source.includes(FAKE_KERNEL_MARK), 'the candidate source is not the fake model\'s kernel');
      assert(child.correct === true, `the fake model's kernel was judged incorrect (status ${child.status})`);
      return `${seen.length} sampling request(s) [${kinds.join(', ')}], ${status.evaluated} evaluated, ` +
        `speedup ${Number(status.speedup).toFixed(2)}, client-model child ${child.median_us?.toFixed?.(2)} us`;
    });

    await check(`${label}: run_beam_search with use_client_model false stays on autotuning`, async () => {
      const before = samplingLog.length;
      const started = await callTool(client, 'run_beam_search', { ...searchArgs(kernelCopy()), use_client_model: false });
      assert(started.model_source === 'none', `model_source ${started.model_source}, expected none`);
      const status = await waitForRun(client, started.run_id);
      assert(status.status === 'completed', `status ${status.status}`);
      assert(samplingLog.length === before, `${samplingLog.length - before} sampling request(s) were sent`);
      assert(status.llm_calls === 0, `llm_calls ${status.llm_calls}`);
      return `${status.evaluated} evaluated`;
    });
  } finally {
    await client.close().catch(() => {});
  }
}

async function plainClientChecks(label, transport) {
  let session;
  await check(`${label}: connect without the sampling capability`, async () => {
    session = await connect(`autocomp-plain-${label}`, transport, { sampling: false });
    return '';
  });
  if (!session) return;
  const { client } = session;
  try {
    await check(`${label}: propose_plan without sampling returns the planning prompt, no plans`, async () => {
      const out = await callTool(client, 'propose_plan', { kernel: kernelCopy(), problem, count: 1 });
      assert(out.mode === 'prompt', `mode ${out.mode}, expected prompt`);
      assert(!out.plans, 'plans came back although no model is available');
      assert(String(out.prompt).startsWith('autocomp://plan-prompts/'), `prompt ${out.prompt}`);
      return out.prompt;
    });
    await check(`${label}: run_beam_search without sampling runs on knob autotuning only`, async () => {
      const started = await callTool(client, 'run_beam_search', searchArgs(kernelCopy()));
      assert(started.model_source === 'none', `model_source ${started.model_source}, expected none`);
      assert(/autotuning/.test(started.note ?? ''), `note does not mention autotuning: ${started.note}`);
      const status = await waitForRun(client, started.run_id);
      assert(status.status === 'completed', `status ${status.status}`);
      assert(status.llm_calls === 0, `llm_calls ${status.llm_calls}`);
      assert(!status.client_model, 'client_model reported for a run without the client model');
      return `${status.evaluated} evaluated, speedup ${Number(status.speedup).toFixed(2)}`;
    });
  } finally {
    await client.close().catch(() => {});
  }
}

// A client that offers sampling but refuses every request: the search must still finish, on
// autotuning, and report the refusals.
async function refusingClientChecks() {
  const label = 'stdio refusing client';
  let session;
  await check(`${label}: connect with sampling that declines every request`, async () => {
    session = await connect('autocomp-sampling-refuses', stdioTransport(), { sampling: true, refuse: true });
    return '';
  });
  if (!session) return;
  const { client, samplingLog } = session;
  try {
    await check(`${label}: run_beam_search keeps going on autotuning and reports the refusals`, async () => {
      const started = await callTool(client, 'run_beam_search', searchArgs(kernelCopy()));
      assert(started.model_source === 'client', `model_source ${started.model_source}`);
      const status = await waitForRun(client, started.run_id);
      assert(status.status === 'completed', `status ${status.status}: ${status.message ?? ''}`);
      const usage = status.client_model ?? {};
      assert(samplingLog.length >= 1, 'the client saw no sampling request');
      assert(usage.failed >= 1 && usage.answered === 0, `client_model ${JSON.stringify(usage)}`);
      assert(/declined/.test(usage.last_failure ?? ''), `last_failure ${usage.last_failure}`);
      assert(status.evaluated >= 1, 'nothing was evaluated');
      return `${usage.failed} refused request(s), ${status.evaluated} evaluated, speedup ${Number(status.speedup).toFixed(2)}`;
    });
  } finally {
    await client.close().catch(() => {});
  }
}

// A client that offers sampling but has no GET stream open: the search must still finish, on
// autotuning, and report the failed requests.
async function noStreamChecks() {
  const label = 'http without GET stream';
  let session;
  await check(`${label}: connect with sampling but never open the GET stream`, async () => {
    session = await connect('autocomp-sampling-no-get', httpTransport({ blockGetStream: true }), { sampling: true });
    return '';
  });
  if (!session) return;
  const { client, samplingLog } = session;
  try {
    await check(`${label}: run_beam_search keeps going on autotuning and reports the failed requests`, async () => {
      const started = await callTool(client, 'run_beam_search', searchArgs(kernelCopy()));
      assert(started.model_source === 'client', `model_source ${started.model_source}`);
      const status = await waitForRun(client, started.run_id);
      assert(status.status === 'completed', `status ${status.status}: ${status.message ?? ''}`);
      const usage = status.client_model ?? {};
      assert(usage.failed >= 1, `client_model ${JSON.stringify(usage)}: no failure recorded`);
      assert(usage.answered === 0, `client_model ${JSON.stringify(usage)}: answers without a stream`);
      assert(/GET/.test(usage.last_failure ?? ''), `last_failure does not say to open the GET stream: ${usage.last_failure}`);
      assert(samplingLog.length === 0, `the client saw ${samplingLog.length} sampling request(s)`);
      assert(status.evaluated >= 1, 'nothing was evaluated');
      return `${usage.failed} failed request(s): ${usage.last_failure}`;
    });
  } finally {
    await client.close().catch(() => {});
  }
}

const stdio = stdioTransport();
await samplingClientChecks('stdio', stdio);
if (failed) console.log(`stdio server stderr (tail):\n${stdio.stderrTail ?? ''}`);
await samplingClientChecks('http', httpTransport());
await plainClientChecks('stdio', stdioTransport());
await plainClientChecks('http', httpTransport());
await refusingClientChecks();
await noStreamChecks();

process.exit(failed ? 1 : 0);
