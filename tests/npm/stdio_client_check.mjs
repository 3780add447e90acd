// Scripted MCP client check of autocomp-mcp over stdio, written with the official TypeScript SDK
// v1 (Client + StdioClientTransport). Run by tests/integration/sdk_stdio.sh.
//
// usage: node stdio_client_check.mjs /path/to/autocomp-mcp
// Starts `autocomp-mcp --conformance-fixtures` (stdio) and prints one line per check:
//   CHECK PASS <name> [(detail)]   |   CHECK FAIL <name> :: <reason>
// Exit status is 0 when every check passed. Every wait is bounded; the server is closed at the end.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  LoggingMessageNotificationSchema,
  ListToolsResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';

const bin = process.argv[2];
if (!bin) {
  console.error('usage: node stdio_client_check.mjs /path/to/autocomp-mcp');
  process.exit(2);
}

const CALL_TIMEOUT_MS = 15_000;
const CANCEL_RACE_MS = 30;  // responses this soon after notifications/cancelled count as a race
const SMALL_PAGE = 4;  // page size of the pagination check's second server (--page-size)
let passed = 0;
let failed = 0;
const oneLine = (s) => String(s ?? '').replace(/\s+/g, ' ').trim().slice(0, 300);
function pass(name, detail = '') {
  passed++;
  console.log(`CHECK PASS ${name}${detail ? ` (${oneLine(detail)})` : ''}`);
}
function fail(name, reason) {
  failed++;
  console.log(`CHECK FAIL ${name} :: ${oneLine(reason)}`);
}
// Runs one named check; a thrown error fails it. The body returns an optional detail string.
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
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const transport = new StdioClientTransport({
  command: bin,
  args: ['--conformance-fixtures'],
  env: { ...process.env },
  stderr: 'pipe',
});
let serverStderr = '';
transport.stderr?.on('data', (d) => {
  serverStderr = (serverStderr + d.toString()).slice(-8000);
});

const client = new Client({ name: 'autocomp-sdk-stdio-check', version: '1.0.0' }, { capabilities: {} });
const transportErrors = [];
client.onerror = (e) => transportErrors.push(oneLine(e?.message ?? e));
const logMessages = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logMessages.push(n.params));

// Every message in either direction is recorded, so that checks can look at the raw wire.
const sent = [];
const sentAt = new Map();  // message -> time it was handed to the transport
const received = [];
let connected = false;

await check('initialize (connect)', async () => {
  await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  connected = true;
  const origSend = transport.send.bind(transport);
  transport.send = (msg, opts) => { sent.push(msg); sentAt.set(msg, Date.now()); return origSend(msg, opts); };
  const origOnMessage = transport.onmessage;
  transport.onmessage = (msg, extra) => { received.push({ at: Date.now(), msg }); origOnMessage?.(msg, extra); };
  const info = client.getServerVersion();
  const caps = client.getServerCapabilities() ?? {};
  assert(info?.name, 'serverInfo.name missing');
  assert(caps.tools, 'server does not declare the tools capability');
  return `${info.name} ${info.version}, capabilities: ${Object.keys(caps).join(', ')}`;
});

if (!connected) {
  console.log(`server stderr (tail):\n${serverStderr.slice(-2000)}`);
  process.exit(1);
}

await check('ping', async () => {
  const t0 = performance.now();
  await client.ping({ timeout: CALL_TIMEOUT_MS });
  return `${(performance.now() - t0).toFixed(2)} ms`;
});

// Walks tools/list page by page; returns [names, pages].
async function walkToolPages(c) {
  const names = [];
  let cursor;
  let pages = 0;
  do {
    const page = await c.request(
      { method: 'tools/list', params: cursor ? { cursor } : {} }, ListToolsResultSchema,
      { timeout: CALL_TIMEOUT_MS });
    pages++;
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    assert(pages <= 100, 'more than 100 pages: the cursor does not advance');
  } while (cursor);
  assert(new Set(names).size === names.length, `duplicate tool names across pages: ${names.join(', ')}`);
  return [names, pages];
}

let allTools = [];
await check('tools/list walks every page by cursor', async () => {
  const [names, pages] = await walkToolPages(client);
  allTools = (await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS })).tools;
  assert(names.length === allTools.length, `paged walk found ${names.length} tools, listTools ${allTools.length}`);
  for (const t of allTools) assert(t.description, `tool ${t.name} has no description`);
  assert(names.includes('test_tool_with_progress'), 'fixture tool test_tool_with_progress missing');
  return `${names.length} tools in ${pages} page(s)`;
});

// A second server with small pages, so that the cursor is really followed.
await check(`tools/list in pages of ${SMALL_PAGE} (--page-size ${SMALL_PAGE}) gives the same tools in order`, async () => {
  const small = new Client({ name: 'autocomp-sdk-stdio-check-pages', version: '1.0.0' }, { capabilities: {} });
  const t = new StdioClientTransport({
    command: bin, args: ['--conformance-fixtures', '--page-size', String(SMALL_PAGE)],
    env: { ...process.env }, stderr: 'ignore',
  });
  try {
    await small.connect(t, { timeout: CALL_TIMEOUT_MS });
    const [names, pages] = await walkToolPages(small);
    const expected = allTools.map((x) => x.name);
    assert(JSON.stringify(names) === JSON.stringify(expected),
      `paged names ${names.join(',')} differ from the single listing ${expected.join(',')}`);
    assert(pages === Math.ceil(expected.length / SMALL_PAGE), `${pages} pages for ${expected.length} tools`);
    return `${names.length} tools in ${pages} pages`;
  } finally {
    await small.close();
  }
});

await check('tools/list with an invalid cursor is a -32602 error', async () => {
  try {
    await client.request({ method: 'tools/list', params: { cursor: 'not-a-cursor-@@@' } },
      ListToolsResultSchema, { timeout: CALL_TIMEOUT_MS });
  } catch (e) {
    assert(e instanceof McpError, `unexpected error ${e}`);
    assert(e.code === -32602, `error code ${e.code}, expected -32602`);
    return e.message;
  }
  throw new Error('the server accepted an invalid cursor');
});

await check('tools/call with progressToken: increasing progress, all before the response', async () => {
  const before = sent.length;
  const result = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
    timeout: CALL_TIMEOUT_MS,
    onprogress: () => {},
  });
  assert(!result.isError, `isError result: ${JSON.stringify(result.content)}`);
  // Judged on the wire: the SDK client runs notification handlers a microtask later than response
  // handlers, so a progress notification right before the response never reaches onprogress.
  const request = sent.slice(before).find((m) => m.method === 'tools/call');
  const token = request?.params?._meta?.progressToken;
  assert(token !== undefined, 'the SDK did not attach a progressToken');
  const wire = received.map((r) => r.msg);
  const responseAt = wire.findIndex((m) => m.id === request.id && !('method' in m));
  const progress = wire
    .map((m, i) => ({ m, i }))
    .filter(({ m }) => m.method === 'notifications/progress' && m.params?.progressToken === token);
  assert(progress.length >= 1, 'no progress notification received');
  const late = progress.filter(({ i }) => i > responseAt);
  assert(late.length === 0, `${late.length} progress notification(s) sent after the response`);
  const values = progress.map(({ m }) => m.params.progress);
  for (let i = 1; i < values.length; i++) {
    assert(values[i] > values[i - 1], `progress not increasing: ${values.join(', ')}`);
  }
  return progress.map(({ m }) => `${m.params.progress}/${m.params.total ?? '?'}`).join(', ');
});

await check('ping is answered while a tool call is running', async () => {
  let callDone = false;
  const call = client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
    { timeout: CALL_TIMEOUT_MS, onprogress: () => {} }).then((r) => { callDone = true; return r; });
  await sleep(5);
  const t0 = performance.now();
  await client.ping({ timeout: CALL_TIMEOUT_MS });
  const pingMs = performance.now() - t0;
  const pingBeforeCall = !callDone;
  await call;
  assert(pingBeforeCall, 'ping was answered only after the running call finished');
  return `ping took ${pingMs.toFixed(2)} ms during the call`;
});

await check('cancel via AbortSignal: notifications/cancelled sent, no response, server keeps serving', async () => {
  const ac = new AbortController();
  let progressSeen = 0;
  const before = sent.length;
  const call = client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
    timeout: CALL_TIMEOUT_MS,
    signal: ac.signal,
    onprogress: () => {
      progressSeen++;
      if (progressSeen === 1) ac.abort('cancelled by the test');
    },
  });
  let rejected = false;
  try {
    await call;
  } catch {
    rejected = true;
  }
  assert(progressSeen >= 1, 'no progress arrived, so the call could not be cancelled mid-way');
  assert(rejected, 'the aborted call resolved instead of rejecting');
  const request = sent.slice(before).find((m) => m.method === 'tools/call');
  assert(request, 'tools/call request not seen on the wire');
  const cancelled = sent.slice(before).find(
    (m) => m.method === 'notifications/cancelled' && m.params?.requestId === request.id);
  assert(cancelled, 'the client did not send notifications/cancelled');
  await sleep(400);  // the uncancelled call takes ~100 ms; give a late response time to show up
  // A response already on its way when the cancellation was sent is a legitimate race; the fixture
  // still has ~100 ms of work left at that point, so a response well after it means it was ignored.
  const cancelAt = sentAt.get(cancelled);
  const late = received.find((r) => 'id' in r.msg && r.msg.id === request.id && !('method' in r.msg)
    && r.at > cancelAt + CANCEL_RACE_MS);
  assert(!late, `the server answered the cancelled request id ${request.id} ${late ? late.at - cancelAt : 0} ms after the cancellation: ${JSON.stringify(late?.msg ?? null).slice(0, 200)}`);
  await client.ping({ timeout: CALL_TIMEOUT_MS });
  const after = await client.callTool({ name: 'test_simple_text', arguments: {} }, undefined,
    { timeout: CALL_TIMEOUT_MS });
  assert(!after.isError, 'a call after the cancellation failed');
  return `request id ${request.id} cancelled after ${progressSeen} progress notification(s)`;
});

await check('tools/call with arguments that break the schema gives an isError result', async () => {
  const tool = allTools.find((t) => (t.inputSchema?.required ?? []).length > 0);
  assert(tool, 'no tool with required arguments');
  const result = await client.callTool({ name: tool.name, arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
  assert(result.isError === true, `expected isError, got ${JSON.stringify(result).slice(0, 200)}`);
  const text = (result.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(' ');
  const field = tool.inputSchema.required[0];
  assert(text.includes(field), `error text does not name the missing field '${field}': ${text}`);
  return `${tool.name}: ${text}`;
});

await check('tools/call of an unknown tool is rejected', async () => {
  try {
    const r = await client.callTool({ name: 'no_such_tool_xyz', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
    assert(r.isError === true, 'unknown tool call succeeded');
    return 'isError result';
  } catch (e) {
    assert(e instanceof McpError, `unexpected error ${e}`);
    return `JSON-RPC error ${e.code}`;
  }
});

await check('logging/setLevel then log notifications from a tool', async () => {
  await client.setLoggingLevel('debug', { timeout: CALL_TIMEOUT_MS });
  const before = logMessages.length;
  const r = await client.callTool({ name: 'test_tool_with_logging', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
  assert(!r.isError, 'test_tool_with_logging returned isError');
  await sleep(50);
  const got = logMessages.length - before;
  assert(got >= 1, 'no notifications/message received');
  return `${got} log notification(s)`;
});

await check('resources/list, templates/list and resources/read', async () => {
  const { resources } = await client.listResources(undefined, { timeout: CALL_TIMEOUT_MS });
  const uris = resources.map((r) => r.uri);
  assert(uris.includes('test://static-text'), `test://static-text not listed: ${uris.join(', ')}`);
  const { resourceTemplates } = await client.listResourceTemplates(undefined, { timeout: CALL_TIMEOUT_MS });
  assert(resourceTemplates.some((t) => t.uriTemplate === 'test://template/{id}/data'),
    'template test://template/{id}/data not listed');
  const read = await client.readResource({ uri: 'test://static-text' }, { timeout: CALL_TIMEOUT_MS });
  assert(read.contents?.[0]?.text, 'resources/read returned no text');
  return `${resources.length} resources, ${resourceTemplates.length} templates`;
});

await check('prompts/list and prompts/get', async () => {
  const { prompts } = await client.listPrompts(undefined, { timeout: CALL_TIMEOUT_MS });
  const names = prompts.map((p) => p.name);
  assert(names.includes('test_simple_prompt'), `test_simple_prompt not listed: ${names.join(', ')}`);
  const got = await client.getPrompt({ name: 'test_simple_prompt' }, { timeout: CALL_TIMEOUT_MS });
  assert(got.messages?.length >= 1, 'prompts/get returned no messages');
  return `${prompts.length} prompts`;
});

await check('no transport or parse errors on the client side', async () => {
  // "Progress for an unknown token" is how the SDK reports a progress notification that it handled
  // after the response (see the progress check, which judges ordering on the wire) or one racing
  // with a cancellation; every other error counts.
  const unexpected = transportErrors.filter((e) => !/progress notification for an unknown token/.test(e));
  assert(unexpected.length === 0, unexpected.join(' | '));
  return '';
});

await check('server exits cleanly when stdin closes', async () => {
  const proc = transport._process;
  const t0 = performance.now();
  await client.close();
  const ms = performance.now() - t0;
  assert(proc, 'no child process handle');
  assert(proc.exitCode === 0, `exit code ${proc.exitCode}, signal ${proc.signalCode} after ${ms.toFixed(0)} ms`);
  assert(ms < 1900, `took ${ms.toFixed(0)} ms (the client had to send SIGTERM)`);
  return `exit 0 after ${ms.toFixed(0)} ms`;
});

if (failed) console.log(`server stderr (tail):\n${serverStderr.slice(-2000)}`);
process.exit(failed ? 1 : 0);
