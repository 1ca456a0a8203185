/**
 * A live daemon's `/metrics` passes `promtool check metrics` (Debian's `prometheus` package):
 * the exposition format and its naming rules (no gauge named like a counter, help on every
 * metric). Skipped when promtool is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { hasTool, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';

const available = hasTool('promtool');
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

/** Feed `text` to `promtool check metrics` on stdin; its exit code and output. */
function promtoolCheck(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    proc.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    proc.on('error', reject);
    proc.on('close', (code) => resolve({ code, output }));
    proc.stdin.end(text);
  });
}

describe.skipIf(!available && !required)('promtool check metrics on a live /metrics', () => {
  it('passes after a join and an RPC call or two (every family has samples)', async () => {
    if (!available)
      throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but promtool (package prometheus) is not installed');
    const d = await startSimDaemon();
    expect((await updateAndWait(d)).state).toBe('succeeded');
    await d.rpc('status');
    const metrics = await d.http('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('agentd_node_serving 1');
    const { code, output } = await promtoolCheck(metrics.body);
    expect(output).toBe('');
    expect(code).toBe(0);
  });

  it('the check can fail: a gauge named like a counter is reported', async () => {
    if (!available)
      throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but promtool (package prometheus) is not installed');
    const bad = '# HELP x_total a gauge\n# TYPE x_total gauge\nx_total 1\n';
    const { code, output } = await promtoolCheck(bad);
    expect(code).not.toBe(0);
    expect(output).toMatch(/x_total/);
  });
});
