// Reference MCP server built with the official TypeScript SDK (@modelcontextprotocol/sdk v1,
// McpServer), used by mcp_latency.mjs as the baseline that autocomp-mcp is compared with.
//
// Command line mirrors autocomp-mcp's, so the same client code drives both servers:
//   node ts_sdk_server.mjs                                   stdio transport
//   node ts_sdk_server.mjs --http [HOST:]PORT [--port-file F] Streamable HTTP at /mcp
//   --mirror-tools FILE   instead of the built-in tools, register the tools listed in FILE (a JSON
//                         array of tool definitions, e.g. another server's tools/list result), with
//                         the same names, descriptions, annotations and JSON Schemas (converted to
//                         zod, as McpServer requires); calling one returns a short text. The
//                         benchmark uses this so that both servers' tools/list carry the same tools.
// HTTP mode is stateful (one Mcp-Session-Id per initialize, one McpServer per session, as in the
// SDK's own examples) and answers plain JSON (enableJsonResponse), which is the SDK's cheapest path.
// Only loopback addresses are accepted as HOST.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

// The SDK lives in tests/npm/node_modules; resolve it from there wherever this file is run from.
const npmDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'npm');
const requireFromNpm = createRequire(path.join(npmDir, 'package.json'));
const load = (spec) => import(pathToFileURL(requireFromNpm.resolve(spec)).href);

const { McpServer } = await load('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = await load('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { isInitializeRequest } = await load('@modelcontextprotocol/sdk/types.js');
const { z } = await load('zod');

let mirroredTools = null;  // tool definitions from --mirror-tools, or null for the built-in set

function registerMirroredTools(server) {
  for (const t of mirroredTools) {
    const config = {
      title: t.title,
      description: t.description ?? t.name,
      inputSchema: z.fromJSONSchema(t.inputSchema ?? { type: 'object' }),
      annotations: t.annotations,
    };
    if (t.outputSchema) config.outputSchema = z.fromJSONSchema(t.outputSchema);
    server.registerTool(t.name, config, async () => ({ content: [{ type: 'text', text: `${t.name} called` }] }));
  }
}

function buildServer() {
  const server = new McpServer(
    { name: 'ts-sdk-reference-server', version: '1.0.0' },
    { capabilities: { logging: {} }, instructions: 'Reference server for latency comparisons.' });
  if (mirroredTools) {
    registerMirroredTools(server);
    return server;
  }

  server.registerTool('echo', {
    title: 'Echo',
    description: 'Returns the given message.',
    inputSchema: { message: z.string().describe('Text to return') },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async ({ message }) => ({ content: [{ type: 'text', text: message }] }));

  server.registerTool('add', {
    title: 'Add',
    description: 'Adds two numbers and returns the sum as structured content.',
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { sum: z.number() },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async ({ a, b }) => ({
    content: [{ type: 'text', text: JSON.stringify({ sum: a + b }) }],
    structuredContent: { sum: a + b },
  }));

  server.registerTool('count_down', {
    title: 'Count down',
    description: 'Sends one progress notification per step, then returns.',
    inputSchema: { steps: z.number().int().min(1).max(100) },
  }, async ({ steps }, extra) => {
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= steps; i++) {
      if (token !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: steps },
        });
      }
    }
    return { content: [{ type: 'text', text: `counted ${steps}` }] };
  });

  server.registerTool('describe_kernel', {
    title: 'Describe kernel',
    description: 'Returns a short description of a kernel file name (a stand-in for a real tool).',
    inputSchema: {
      kernel: z.string().describe('Path of the kernel file'),
      target: z.enum(['trn1', 'trn2']).optional(),
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async ({ kernel, target }) => ({
    content: [{ type: 'text', text: `${kernel} on ${target ?? 'trn2'}` }],
  }));
  return server;
}

function parseArgs(argv) {
  const opts = { http: null, portFile: null, mirrorTools: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--http') opts.http = argv[++i];
    else if (argv[i] === '--port-file') opts.portFile = argv[++i];
    else if (argv[i] === '--mirror-tools') opts.mirrorTools = argv[++i];
    else throw new Error(`unknown argument: ${argv[i]}`);
  }
  return opts;
}

async function serveStdio() {
  const server = buildServer();
  await server.connect(new StdioServerTransport());
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (!text) return resolve(undefined);
      try { resolve(JSON.parse(text)); } catch (e) { reject(e); }
    });
    req.on('error', reject);
  });
}

function sendJsonError(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function serveHttp(spec, portFile) {
  const colon = spec.lastIndexOf(':');
  const host = colon >= 0 ? spec.slice(0, colon) : '127.0.0.1';
  const port = Number(colon >= 0 ? spec.slice(colon + 1) : spec);
  if (!['127.0.0.1', 'localhost', '::1'].includes(host)) throw new Error('loopback only');

  const sessions = new Map();  // Mcp-Session-Id -> transport
  const httpServer = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://127.0.0.1');
      if (url.pathname !== '/mcp') return sendJsonError(res, 404, -32000, 'Not found');
      const sid = req.headers['mcp-session-id'];
      if (req.method === 'POST') {
        const body = await readBody(req);
        let transport = sid ? sessions.get(sid) : undefined;
        if (!transport) {
          if (sid) return sendJsonError(res, 404, -32001, 'Session not found');
          if (!isInitializeRequest(body)) return sendJsonError(res, 400, -32000, 'No valid session ID');
          transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableJsonResponse: true,
            onsessioninitialized: (id) => sessions.set(id, transport),
          });
          transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
          await buildServer().connect(transport);
        }
        await transport.handleRequest(req, res, body);
        return;
      }
      const transport = sid ? sessions.get(sid) : undefined;
      if (!transport) return sendJsonError(res, sid ? 404 : 400, -32000, 'No valid session ID');
      await transport.handleRequest(req, res);
    } catch (e) {
      if (!res.headersSent) sendJsonError(res, 500, -32603, String(e?.message ?? e));
    }
  });
  httpServer.keepAliveTimeout = 60_000;
  await new Promise((resolve) => httpServer.listen(port, host, resolve));
  const bound = httpServer.address().port;
  if (portFile) writeFileSync(portFile, `${bound}\n`);
  process.stderr.write(`ts-sdk-reference-server listening on http://${host}:${bound}/mcp\n`);
  const stop = () => { httpServer.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

const opts = parseArgs(process.argv.slice(2));
if (opts.mirrorTools) mirroredTools = JSON.parse(readFileSync(opts.mirrorTools, 'utf8'));
if (opts.http) await serveHttp(opts.http, opts.portFile);
else await serveStdio();
