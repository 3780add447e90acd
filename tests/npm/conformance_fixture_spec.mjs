// Prints what each server scenario of the pinned conformance suite expects from the server under
// test (its description, which names the fixture tools, resources and prompts and their exact
// behaviour), read from the installed @modelcontextprotocol/conformance package.
//
// usage: node conformance_fixture_spec.mjs [--requirements 2025-11-25] [SCENARIO...]
//   With --requirements: the scored and not-scored server scenarios of that revision.
//   With scenario names: just those. With neither: every scenario the package defines.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const YAML = require('yaml');
const pkgDir = path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json'));

const args = process.argv.slice(2);
const wanted = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--requirements') {
    const req = YAML.parse(readFileSync(path.join(pkgDir, 'requirements', `${args[++i]}.yaml`), 'utf8'));
    wanted.push(...(req.server ?? []));
    wanted.push(...(req.not_scored ?? []).filter((e) => e.leg === 'server').map((e) => e.scenario));
  } else {
    wanted.push(args[i]);
  }
}

// Scenario classes in the bundle set `this.name=\`...\`` and, shortly after, `this.description=\`...\``.
const bundle = readFileSync(path.join(pkgDir, 'dist', 'index.js'), 'utf8');
// The description is a template literal or a double-quoted string.
const pattern = /this\.name=`([a-z0-9/_-]+)`[^]{0,300}?this\.description=(?:`((?:[^`\\]|\\.)*)`|("(?:[^"\\]|\\.)*"))/g;
const found = new Map();
for (const m of bundle.matchAll(pattern)) {
  if (found.has(m[1])) continue;
  found.set(m[1], m[2] !== undefined ? m[2].replace(/\\`/g, '`').replace(/\\n/g, '\n') : JSON.parse(m[3]));
}

const names = wanted.length ? [...new Set(wanted)] : [...found.keys()];
let missing = 0;
for (const name of names) {
  const text = found.get(name);
  if (text === undefined) {
    missing++;
    console.log(`### ${name}\n(no description found in the package)\n`);
  } else {
    console.log(`### ${name}\n${text.trim()}\n`);
  }
}
process.exit(missing ? 1 : 0);
