/**
 * The alert rules of deploy/prometheus pass `promtool check rules` (the plain file and the
 * PrometheusRule's groups) and their unit tests, `promtool test rules` (Debian's `prometheus`
 * package). Skipped when promtool is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { spawn } from 'node:child_process';
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { makeTempDir, REPO_ROOT } from '../support/daemon.js';
import { SYSTEM_TESTS_REQUIRED, hasTool } from '../support/system-tools.js';

const available = hasTool('promtool');
const DIR = path.join(REPO_ROOT, 'deploy/prometheus');

function promtool(args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn('promtool', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    proc.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    proc.on('error', reject);
    proc.on('close', (code) => resolve({ code, output }));
  });
}

function needPromtool(): void {
  if (!available)
    throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but promtool (package prometheus) is not installed');
}

describe.skipIf(!available && !SYSTEM_TESTS_REQUIRED)('promtool on deploy/prometheus', () => {
  it('checks the rule file and the PrometheusRule’s groups', async () => {
    needPromtool();
    const plain = await promtool(['check', 'rules', 'agentd.rules.yaml'], DIR);
    expect(plain.output).toContain('SUCCESS: 7 rules found');
    expect(plain.code).toBe(0);
    // promtool reads rule files, not manifests: check the manifest's spec as one.
    const tmp = await makeTempDir('agentd-promrule-');
    const manifest = parse(await readFile(path.join(DIR, 'agentd.prometheusrule.yaml'), 'utf8')) as {
      spec: unknown;
    };
    await writeFile(path.join(tmp, 'from-manifest.yaml'), stringify(manifest.spec));
    const fromManifest = await promtool(['check', 'rules', 'from-manifest.yaml'], tmp);
    expect(fromManifest.output).toContain('SUCCESS: 7 rules found');
    expect(fromManifest.code).toBe(0);
  });

  it('passes the unit tests in deploy/prometheus/tests', async () => {
    needPromtool();
    const r = await promtool(['test', 'rules', 'tests/agentd.rules.test.yaml'], DIR);
    expect(r.output).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });

  it('the unit tests can fail: a rule that fires at once is caught', async () => {
    needPromtool();
    // The same tests against a copy of the rules whose AgentdNodeNotServing lost its `for: 5m`.
    const tmp = await makeTempDir('agentd-promrule-');
    await cp(DIR, tmp, { recursive: true });
    const file = path.join(tmp, 'agentd.rules.yaml');
    const text = await readFile(file, 'utf8');
    const broken = text.replace(/(alert: AgentdNodeNotServing[\s\S]*?)for: 5m/, '$1for: 0m');
    expect(broken).not.toBe(text);
    await writeFile(file, broken);
    const r = await promtool(['test', 'rules', 'tests/agentd.rules.test.yaml'], tmp);
    expect(r.code).not.toBe(0);
    expect(r.output).toMatch(/FAILED[\s\S]*AgentdNodeNotServing/);
  });
});
