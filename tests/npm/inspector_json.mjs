// Small assertions over the JSON that `mcp-inspector --cli --format json` prints, for
// tests/integration/inspector.sh. Exit 0 when the assertion holds, 1 (with a reason on stderr)
// when it does not.
//
//   node inspector_json.mjs tools FILE [NAME...]   result.tools is a non-empty array of tools, each
//                                                  with name, description and an object inputSchema;
//                                                  every NAME is among them. Prints the names.
//   node inspector_json.mjs bad-call FILE          prints "<tool>\t<args JSON>\t<field>": a call that
//                                                  violates the tool's input schema (required property
//                                                  <field> left out, or <field> of the wrong type).
//   node inspector_json.mjs list FILE KEY          result[KEY] is an array. Prints its length.
//   node inspector_json.mjs text FILE SUBSTRING    result.content has a text block containing SUBSTRING.
//   node inspector_json.mjs is-error FILE [WORD]   result.isError is true (and, when WORD is given,
//                                                  some text block mentions WORD).
import { readFileSync } from 'node:fs';

function die(msg) {
  process.stderr.write(`${msg}\n`);
  process.exit(1);
}

function load(file) {
  const text = readFileSync(file, 'utf8').trim();
  if (!text) die('empty output');
  try {
    return JSON.parse(text);
  } catch (e) {
    die(`output is not JSON (${e.message}): ${text.slice(0, 200)}`);
  }
}

const [cmd, file, ...rest] = process.argv.slice(2);
const doc = load(file);
const result = doc?.result;
if (!result || typeof result !== 'object') die(`no result object: ${JSON.stringify(doc).slice(0, 300)}`);

if (cmd === 'tools') {
  const tools = result.tools;
  if (!Array.isArray(tools) || tools.length === 0) die('tools/list returned no tools');
  for (const [i, t] of tools.entries()) {
    if (typeof t.name !== 'string' || !t.name) die(`tool ${i}: missing name`);
    if (typeof t.description !== 'string' || !t.description) die(`tool ${t.name}: missing description`);
    if (!t.inputSchema || t.inputSchema.type !== 'object') die(`tool ${t.name}: inputSchema is not an object schema`);
  }
  const names = tools.map((t) => t.name);
  const missing = rest.filter((n) => !names.includes(n));
  if (missing.length) die(`expected tools missing: ${missing.join(', ')} (have: ${names.join(', ')})`);
  console.log(names.join(' '));
} else if (cmd === 'bad-call') {
  const wrongValue = (schema) => {
    switch (schema?.type) {
      case 'string': return 12345;
      case 'number': case 'integer': return 'not-a-number';
      case 'boolean': return 'not-a-boolean';
      case 'array': return 'not-an-array';
      case 'object': return 'not-an-object';
      default: return undefined;
    }
  };
  for (const t of result.tools ?? []) {
    const schema = t.inputSchema ?? {};
    const required = Array.isArray(schema.required) ? schema.required : [];
    if (required.length) {
      console.log(`${t.name}\t{}\t${required[0]}`);
      process.exit(0);
    }
    for (const [prop, s] of Object.entries(schema.properties ?? {})) {
      const v = wrongValue(s);
      if (v !== undefined) {
        console.log(`${t.name}\t${JSON.stringify({ [prop]: v })}\t${prop}`);
        process.exit(0);
      }
    }
  }
  die('no tool has a required or typed property to violate');
} else if (cmd === 'list') {
  const arr = result[rest[0]];
  if (!Array.isArray(arr)) die(`result.${rest[0]} is not an array: ${JSON.stringify(result).slice(0, 200)}`);
  console.log(arr.length);
} else if (cmd === 'text') {
  const blocks = Array.isArray(result.content) ? result.content : [];
  if (!blocks.some((b) => b.type === 'text' && String(b.text).includes(rest[0]))) {
    die(`no text block containing "${rest[0]}": ${JSON.stringify(result).slice(0, 300)}`);
  }
  console.log('ok');
} else if (cmd === 'is-error') {
  if (result.isError !== true) die(`result is not an isError result: ${JSON.stringify(result).slice(0, 300)}`);
  const text = (Array.isArray(result.content) ? result.content : [])
    .filter((b) => b.type === 'text').map((b) => String(b.text)).join(' ');
  if (rest[0] && !text.includes(rest[0])) die(`error text does not mention "${rest[0]}": ${text.slice(0, 300)}`);
  console.log(text.replace(/\s+/g, ' ').slice(0, 160));
} else {
  die(`unknown command ${cmd}`);
}
