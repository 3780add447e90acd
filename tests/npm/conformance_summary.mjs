// Reads the results directory written by `conformance server -o DIR` and prints one verdict line
// per scenario, for tests/integration/conformance.sh to count:
//   CHECK PASS <label>/<scenario> <n> checks passed[, <w> warnings]
//   CHECK FAIL <label>/<scenario> <reason>
// followed, for every failing or warning check, by indented detail lines (check id, message).
//
// usage: node conformance_summary.mjs --results DIR --label LABEL
//          [--expect SCENARIO,...]          scenarios that must have run (missing ones fail)
//          [--requirements REV]             expect the scored server scenarios of that revision
//          [--not-scored]                   also report the revision's not-scored scenarios (never fail)
//          [--score-not-scored]             judge the revision's not-scored scenarios (extensions,
//                                           pending) like the scored ones: this server is held to them
//          [--expected-failures FILE]       baseline YAML ("server:" list of scenario[:check-id])
// A scenario fails when it has a FAILURE check that the baseline does not name; a baseline entry
// whose scenario/check now passes is reported as stale and fails too. Warnings are printed, not failed.
import { readFileSync, readdirSync, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const YAML = require('yaml');

function parseArgs(argv) {
  const o = { expect: [], notScored: false, scoreNotScored: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--results') o.results = argv[++i];
    else if (a === '--label') o.label = argv[++i];
    else if (a === '--expect') o.expect.push(...argv[++i].split(',').filter(Boolean));
    else if (a === '--requirements') o.requirements = argv[++i];
    else if (a === '--not-scored') o.notScored = true;
    else if (a === '--score-not-scored') o.scoreNotScored = true;
    else if (a === '--expected-failures') o.baseline = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.results || !o.label) throw new Error('--results and --label are required');
  return o;
}

const opts = parseArgs(process.argv.slice(2));

let notScored = [];
const notScoredReason = new Map();
if (opts.requirements) {
  const pkgDir = path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json'));
  const req = YAML.parse(readFileSync(path.join(pkgDir, 'requirements', `${opts.requirements}.yaml`), 'utf8'));
  opts.expect.push(...(req.server ?? []));
  const entries = (req.not_scored ?? []).filter((e) => e.leg === 'server');
  for (const e of entries) notScoredReason.set(e.scenario, e.reason);
  if (opts.scoreNotScored) {
    // Held to them here: judged like the scored ones, and missing results fail.
    opts.expect.push(...entries.map((e) => e.scenario));
  } else {
    notScored = entries.map((e) => e.scenario);
  }
}

// Baseline: whole scenarios, or scenario:check-id pairs.
const baselineScenarios = new Set();
const baselineChecks = new Map();
if (opts.baseline) {
  const doc = YAML.parse(readFileSync(opts.baseline, 'utf8')) ?? {};
  for (const entry of doc.server ?? []) {
    const s = String(entry);
    const colon = s.indexOf(':');
    if (colon < 0) baselineScenarios.add(s);
    else {
      const scen = s.slice(0, colon);
      if (!baselineChecks.has(scen)) baselineChecks.set(scen, new Set());
      baselineChecks.get(scen).add(s.slice(colon + 1));
    }
  }
}

// Result folders are named server-<scenario>-<ISO timestamp>; keep the newest per scenario.
const results = new Map();
if (existsSync(opts.results)) {
  for (const dir of readdirSync(opts.results).sort()) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(dir);
    const file = path.join(opts.results, dir, 'checks.json');
    if (!m || !existsSync(file) || !statSync(file).isFile()) continue;
    try {
      results.set(m[1], JSON.parse(readFileSync(file, 'utf8')));
    } catch (e) {
      results.set(m[1], [{ id: 'checks.json', status: 'FAILURE', errorMessage: `unreadable: ${e.message}` }]);
    }
  }
}

const oneLine = (s) => String(s ?? '').replace(/\s+/g, ' ').trim().slice(0, 400);
function detail(c) {
  const msg = c.errorMessage || c.details?.message || c.description || '';
  console.log(`    ${c.status} [${c.id}] ${oneLine(msg)}`);
}

function judge(scenario, scored) {
  const reason = notScoredReason.get(scenario);
  const name = `${opts.label}/${scenario}` + (reason ? `[${reason}]` : '');
  const checks = results.get(scenario);
  if (!checks) {
    if (scored) console.log(`CHECK FAIL ${name} no results (scenario crashed or timed out)`);
    return;
  }
  const failures = checks.filter((c) => c.status === 'FAILURE');
  const warnings = checks.filter((c) => c.status === 'WARNING');
  const successes = checks.filter((c) => c.status === 'SUCCESS');
  const wholeExpected = baselineScenarios.has(scenario);
  const expectedIds = baselineChecks.get(scenario) ?? new Set();
  const unexpected = wholeExpected ? [] : failures.filter((c) => !expectedIds.has(c.id));
  const stale = wholeExpected
    ? (failures.length === 0 ? [scenario] : [])
    : [...expectedIds].filter((id) => checks.some((c) => c.id === id && c.status === 'SUCCESS'));
  const w = warnings.length ? `, ${warnings.length} warnings` : '';
  const counts = `${successes.length} checks passed, ${failures.length} failed${w}`;
  if (!scored) {
    console.log(`NOTE ${name} (not scored): ${counts}`);
  } else if (unexpected.length === 0 && stale.length === 0) {
    const xf = failures.length ? ` (${failures.length} expected failures in baseline)` : '';
    console.log(`CHECK PASS ${name} ${counts}${xf}`);
  } else if (unexpected.length) {
    console.log(`CHECK FAIL ${name} ${counts}`);
  } else {
    console.log(`CHECK FAIL ${name} stale baseline entry, now passing: ${stale.join(', ')}`);
  }
  for (const c of [...failures, ...warnings]) detail(c);
}

const expected = [...new Set(opts.expect)];
for (const s of expected) judge(s, true);
if (opts.notScored) for (const s of notScored) judge(s, false);
// Anything else that ran (for example when no --expect list was given) is reported, scored.
for (const s of results.keys()) {
  if (!expected.includes(s) && !(opts.notScored && notScored.includes(s))) judge(s, true);
}
