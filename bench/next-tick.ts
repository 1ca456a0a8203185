/**
 * process.nextTick after a memory-reducing collection: ns per call in bursts before and after
 * one, in a process as Node starts it (`plain`) and in one that first keeps a nextTick entry
 * alive as agentd does (`keep`, src/bin/keep-tick-shape.ts). The baseline is the same process's
 * bursts before the collection. Runs on this Node and, with a release runtime cached (`npm run
 * release`), on the Node the release embeds. Target: with the kept entry, calls after the
 * collection cost ≤ 1.1 × what they cost before it. See docs/benchmarks.md, "RPC".
 *
 *   npx tsx bench/next-tick.ts
 */
import { execFileSync } from 'node:child_process';
import { access } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cacheDir, NODE_RUNTIME } from '../scripts/release/node-runtime.js';
import { REPO_ROOT } from './lib/processes.js';
import { renderTable } from './lib/table.js';

const TARGET = 1.1;
const CHILD = path.join(REPO_ROOT, 'test/support/tick-shape-child.ts');

interface ChildResult {
  before: number[];
  after: number[];
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

function run(node: string, mode: 'plain' | 'keep'): ChildResult {
  const out = execFileSync(node, ['--expose-gc', '--allow-natives-syntax', '--import', 'tsx', CHILD, mode], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: { ...process.env, TICK_BURSTS: '5' },
  });
  return JSON.parse(out) as ChildResult;
}

async function runtimes(): Promise<[string, string][]> {
  const list: [string, string][] = [[`node ${process.version}`, process.execPath]];
  const release = path.join(cacheDir(), `${NODE_RUNTIME.package}-${NODE_RUNTIME.version}`, 'bin', 'node');
  if (`v${NODE_RUNTIME.version}` !== process.version) {
    try {
      await access(release);
      list.push([`node v${NODE_RUNTIME.version} (the release's)`, release]);
    } catch {
      console.log(`(no cached Node ${NODE_RUNTIME.version}: npm run release fetches it)`);
    }
  }
  return list;
}

const cpus = os.cpus();
console.log(
  `process.nextTick after a memory-reducing collection, ${new Date().toISOString()}\n` +
    `${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}; 5 bursts of 10^6 calls before and after; medians`,
);
const rows: (string | number)[][] = [];
let met = true;
for (const [name, node] of await runtimes()) {
  for (const mode of ['plain', 'keep'] as const) {
    const r = run(node, mode);
    const ratio = median(r.after) / median(r.before);
    if (mode === 'keep' && ratio > TARGET) met = false;
    rows.push([name, mode, median(r.before), median(r.after), ratio]);
  }
}
console.log(renderTable(['runtime', 'process', 'ns/call before', 'ns/call after', 'after / before'], rows));
console.log(
  `with the kept entry, after / before ≤ ${TARGET}: ${met ? 'met' : 'NOT met'} (plain shows what it prevents)`,
);
