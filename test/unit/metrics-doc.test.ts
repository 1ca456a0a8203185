/**
 * Every metric createMetrics registers (prom-client's default process/nodejs metrics aside) is
 * documented in docs/metrics.md, and the page documents no metric that does not exist.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');

/** Metric names in the first cell of the markdown tables (`agentd_...` in backticks). */
function documentedMetrics(markdown: string): string[] {
  const names: string[] = [];
  for (const line of markdown.split('\n')) {
    const m = /^\|\s*`(agentd_[a-z0-9_]+)`\s*\|/.exec(line);
    if (m) names.push(m[1]!);
  }
  return names;
}

async function registeredMetrics(): Promise<{ name: string; type: string }[]> {
  // Without the defaults: what remains is exactly what agentd declares itself.
  const metrics = createMetrics({ version: '0.0.0-test', collectDefaults: false });
  const json = await metrics.registry.getMetricsAsJSON();
  return json.map((m) => ({ name: m.name, type: String(m.type) }));
}

describe('docs/metrics.md', () => {
  it('documents every registered metric, and only those', async () => {
    const doc = documentedMetrics(await readFile(path.join(REPO_ROOT, 'docs/metrics.md'), 'utf8'));
    const registered = (await registeredMetrics()).map((m) => m.name);
    expect(registered.length).toBeGreaterThan(0);
    expect(new Set(doc).size, 'a metric is documented twice').toBe(doc.length);
    expect([...doc].sort()).toEqual([...registered].sort());
  });

  it('gives each metric its registered type', async () => {
    const text = await readFile(path.join(REPO_ROOT, 'docs/metrics.md'), 'utf8');
    for (const m of await registeredMetrics()) {
      const row = text.split('\n').find((l) => l.startsWith(`| \`${m.name}\``));
      const type = row?.split('|')[2]?.trim();
      expect(type, `type of ${m.name}`).toBe(m.type);
    }
  });

  it('the table reader ignores prose and default metrics (so the checks above can fail)', () => {
    expect(
      documentedMetrics(
        [
          '| `agentd_ready` | gauge | — | x |',
          'the `agentd_foo` metric in prose',
          '| `process_cpu_seconds_total` | counter | | |',
        ].join('\n'),
      ),
    ).toEqual(['agentd_ready']);
  });
});
