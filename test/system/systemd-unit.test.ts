/**
 * systemd/agentd.service passes `systemd-analyze verify` with no output at all (any warning
 * fails), and keeps the settings the design relies on. The unit is verified from a temp copy
 * whose ExecStart points to a stand-in executable, since /usr/local/bin/agentd is not installed
 * here. Skips when systemd-analyze is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const UNIT = path.resolve(import.meta.dirname, '../../systemd/agentd.service');
const EXEC_START = 'ExecStart=/usr/local/bin/agentd';

const analyze = (
  await run('sh', ['-c', 'command -v systemd-analyze']).catch(() => ({ stdout: '' }))
).stdout.trim();
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

/** Sections of a unit file: section → key → values (keys may repeat). */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const eq = line.indexOf('=');
    if (!current || eq < 0) throw new Error(`unexpected line in ${UNIT}: ${raw}`);
    const key = line.slice(0, eq).trim();
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return sections;
}

/** Seconds of a systemd time span such as 60s, 1min 30s, 90. */
function seconds(span: string): number {
  let total = 0;
  for (const [, n, unit] of span.matchAll(/(\d+)\s*(ms|s|sec|m|min|h)?/g)) {
    const f = { ms: 0.001, s: 1, sec: 1, m: 60, min: 60, h: 3600 }[unit ?? 's'] ?? 1;
    total += Number(n) * f;
  }
  return total;
}

describe('systemd/agentd.service', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });

  it('keeps the settings the design relies on', async () => {
    const unit = parseUnit(await readFile(UNIT, 'utf8'));
    const get = (section: string, key: string) => unit.get(section)?.get(key);
    expect(get('Unit', 'StartLimitIntervalSec')).toEqual(['0']);
    expect(get('Service', 'StartLimitIntervalSec')).toBeUndefined();
    expect(get('Unit', 'After')?.join(' ')).toMatch(/network-online\.target.*machines\.target/);
    expect(get('Unit', 'Wants')?.join(' ')).toMatch(/network-online\.target.*machines\.target/);
    // Ready once startup recovery is done (systemd-notify on agentd's behalf), with a watchdog.
    expect(get('Service', 'Type')).toEqual(['notify']);
    expect(get('Service', 'NotifyAccess')).toEqual(['main']);
    expect(seconds(get('Service', 'WatchdogSec')?.[0] ?? '0')).toBeGreaterThan(60);
    expect(seconds(get('Service', 'TimeoutStartSec')?.[0] ?? '0')).toBeGreaterThan(300);
    expect(get('Service', 'ExecStart')).toEqual(['/usr/local/bin/agentd']);
    expect(get('Service', 'Restart')).toEqual(['always']);
    expect(get('Service', 'RuntimeDirectory')).toEqual(['agentd']);
    expect(get('Service', 'StateDirectory')).toEqual(['agentd']);
    expect(get('Service', 'StateDirectoryMode')).toEqual(['0700']);
    expect(get('Service', 'PIDFile')).toEqual(['/run/agentd/agentd.pid']);
    // SIGTERM to agentd only: the host commands it runs finish within its own grace period.
    expect(get('Service', 'KillMode')).toEqual(['mixed']);
    // Longer than the daemon's default --shutdown-grace of 30 s.
    expect(seconds(get('Service', 'TimeoutStopSec')?.[0] ?? '0')).toBeGreaterThan(30);
    expect(get('Install', 'WantedBy')).toEqual(['multi-user.target']);
  });

  it('the time-span reader understands systemd spans', () => {
    expect(seconds('60s')).toBe(60);
    expect(seconds('1min 30s')).toBe(90);
    expect(seconds('45')).toBe(45);
  });

  describe.skipIf(!analyze && !required)('systemd-analyze verify', () => {
    it('has systemd-analyze', () => {
      expect(analyze, 'systemd-analyze on PATH (apt-get install systemd)').not.toBe('');
    });

    it('accepts the unit without a single warning', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-unit-'));
      dirs.push(dir);
      const text = await readFile(UNIT, 'utf8');
      expect(text.split('\n').filter((l) => l === EXEC_START)).toHaveLength(1);
      const standIn = path.join(dir, 'agentd');
      await writeFile(standIn, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
      const copy = path.join(dir, 'agentd.service');
      await writeFile(copy, text.replace(EXEC_START, `ExecStart=${standIn}`));
      const result = await run(analyze, ['verify', '--man=no', copy], { timeout: 20_000 }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({
          code: err.code ?? -1,
          stdout: err.stdout ?? '',
          stderr: err.stderr ?? String(err),
        }),
      );
      expect(result.stderr).toBe('');
      expect(result.stdout).toBe('');
      expect(result.code).toBe(0);
    });

    it('reports a broken unit (so the check above can fail)', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-unit-'));
      dirs.push(dir);
      const copy = path.join(dir, 'agentd.service');
      await writeFile(copy, '[Service]\nExecStart=/nonexistent/agentd\nKillMode=sometimes\n');
      const stderr = await run(analyze, ['verify', '--man=no', copy], { timeout: 20_000 }).then(
        (r) => r.stderr,
        (err: { stderr?: string }) => err.stderr ?? String(err),
      );
      expect(stderr).not.toBe('');
    });
  });
});
