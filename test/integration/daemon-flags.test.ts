/**
 * agentd's flags, env and config file as the real program sees them: bad values exit 2 naming
 * the option; the TCP metrics listener serves probes and metrics, never /rpc.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { simDaemonFlags } from '../support/daemon-flags.js';
import { AGENTD_BIN, childEnv, makeTempDir, runAgentd, startTestDaemon } from '../support/daemon.js';

/** Flags that would start a daemon in `dir` if nothing else were wrong. */
const baseFlags = (dir: string): string[] => simDaemonFlags(dir);

/** An empty config file in `dir` (not /dev/null, which need not be a device). */
async function emptyConfig(dir: string): Promise<string> {
  const file = path.join(dir, 'agentd-config.yaml');
  await writeFile(file, '');
  return file;
}

async function expectUsageError(args: string[], named: string[], env: Record<string, string> = {}) {
  const dir = await makeTempDir();
  const r = await runAgentd([...baseFlags(dir), '--config', await emptyConfig(dir), ...args], {
    env,
    cwd: dir,
  });
  expect(r.timedOut, r.stdout).toBe(false);
  expect(r.code, r.stderr).toBe(2);
  for (const word of named) expect(r.stderr).toContain(word);
  return r;
}

describe('bad values exit 2 naming the option', () => {
  it('--socket-mode', async () => {
    await expectUsageError(['--socket-mode', '0999'], ['--socket-mode', '"0999"']);
  });

  it('--shutdown-grace', async () => {
    await expectUsageError(['--shutdown-grace', 'soon'], ['--shutdown-grace', '"soon"']);
  });

  it('--metrics-address', async () => {
    await expectUsageError(['--metrics-address', '127.0.0.1'], ['--metrics-address', '"127.0.0.1"']);
  });

  it('--host and --log-level (commander choices)', async () => {
    await expectUsageError(['--host', 'docker'], ['--host', 'docker']);
    await expectUsageError(['--log-level', 'loud'], ['--log-level', 'loud']);
  });

  it('an unknown flag', async () => {
    await expectUsageError(['--bogus-flag'], ['--bogus-flag']);
  });

  it('an unexpected argument', async () => {
    await expectUsageError(['extra'], ['too many arguments']);
  });

  it('an env value, naming the variable', async () => {
    await expectUsageError([], ['--shutdown-grace', 'AGENTD_SHUTDOWN_GRACE'], {
      AGENTD_SHUTDOWN_GRACE: '5 minutes',
    });
  });

  it('a bad value in the YAML config file, naming the file and key', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, 'logLevel: info\nsocketMode: rwx\n');
    const r = await runAgentd([...baseFlags(dir), '--config', file], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--socket-mode');
    expect(r.stderr).toContain(`${file} key socketMode`);
  });

  it('an unknown key in the YAML config file', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, 'sockett: /x.sock\n');
    const r = await runAgentd([...baseFlags(dir), '--config', file], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('sockett');
    expect(r.stderr).toContain(file);
  });

  it('a config file that does not exist (AGENTD_CONFIG)', async () => {
    const dir = await makeTempDir();
    const r = await runAgentd(baseFlags(dir), { cwd: dir, env: { AGENTD_CONFIG: 'missing.yaml' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(path.join(dir, 'missing.yaml'));
  });

  it('--help and --version exit 0', async () => {
    const help = await runAgentd(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--socket-mode');
    const version = await runAgentd(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('--help to a reader that goes away early (agentd --help | true) exits 0 quietly: no EPIPE, no stack trace', async () => {
    const script = `'${process.execPath}' '${AGENTD_BIN}' --help | true; echo "rc=\${PIPESTATUS[0]}" >&2`;
    const stderr = await new Promise<string>((resolve) => {
      const proc = spawn('bash', ['-c', script], { env: childEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
      proc.once('close', () => resolve(err));
    });
    expect(stderr).toBe('rc=0\n');
  });
});

/** A TCP port that was free a moment ago (the daemon's port 0 could not be discovered). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function getTcp(port: number, method: string, urlPath: string) {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, {
    method,
    ...(method === 'POST'
      ? {
          headers: { 'content-type': 'application/json' },
          body: '{"jsonrpc":"2.0","id":1,"method":"status"}',
        }
      : {}),
  });
  return { status: res.status, body: await res.text() };
}

describe('--metrics-address', () => {
  it('serves /metrics, /healthz and /readyz over TCP, and never /rpc', async () => {
    const port = await freePort();
    const d = await startTestDaemon({ args: ['--metrics-address', `127.0.0.1:${port}`] });
    const metrics = await getTcp(port, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('agentd_build_info');
    expect((await getTcp(port, 'GET', '/healthz')).status).toBe(200);
    expect((await getTcp(port, 'GET', '/readyz')).status).toBe(200);
    expect((await getTcp(port, 'POST', '/rpc')).status).toBe(404);
    expect((await getTcp(port, 'GET', '/openapi.json')).status).toBe(404);
    expect((await getTcp(port, 'GET', '/v1/events')).status).toBe(404);
    // The socket still serves everything.
    expect((await d.rpc('status')).result).toBeDefined();
    expect(await d.stop()).toBe(0);
    // And the TCP listener is closed with the daemon.
    await expect(getTcp(port, 'GET', '/healthz')).rejects.toThrow();
  });

  it('a port already in use fails the start with exit 1 and removes the socket and PID file', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = blocker.address() as net.AddressInfo;
      const dir = await makeTempDir();
      const r = await runAgentd(
        [...baseFlags(dir), '--config', await emptyConfig(dir), '--metrics-address', `127.0.0.1:${port}`],
        {
          cwd: dir,
        },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `--metrics-address 127.0.0.1:${port}: cannot listen: the port is already in use`,
      );
      await expect(stat(path.join(dir, 'agentd.sock'))).rejects.toMatchObject({ code: 'ENOENT' });
      await expect(stat(path.join(dir, 'agentd.pid'))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });
});

describe('--sim', () => {
  it('alone puts every path under ./.agentd, and agentctl finds the daemon from that directory', async () => {
    const d = await startTestDaemon({ simDefaults: true });
    expect(d.socket).toBe(path.join(d.dir, '.agentd', 'agentd.sock'));
    expect((await stat(d.socket)).isSocket()).toBe(true);
    expect((await stat(d.pidFile)).isFile()).toBe(true);
    expect(d.logs()).toContain('"host":"sim"');
    expect(d.logs()).toContain(`"root":"${path.join(d.dir, '.agentd', 'root')}"`);
    // Skip the lookup on a machine that really runs agentd: there the system socket wins.
    if (!existsSync('/run/agentd/agentd.sock')) {
      const r = await runAgentctl(['--json', 'status'], { cwd: d.dir });
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { daemon: { pid: number } }).daemon.pid).toBe(d.pid);
      const stop = await runAgentctl(['--json', 'stop'], { cwd: d.dir });
      expect(JSON.parse(stop.stdout)).toMatchObject({ pid: d.pid, signalled: true });
      expect(await d.waitExit()).toBe(0);
    }
  });
});

describe('--log-format pretty', () => {
  it('prints readable lines (pino-pretty in the bundle, no transport), never JSON', async () => {
    const d = await startTestDaemon({ args: ['--log-format', 'pretty', '--log-level', 'info'] });
    try {
      const deadline = Date.now() + 10_000;
      while (!d.logs().includes('agentd serving') && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const lines = d.logs().split('\n').filter(Boolean);
      expect(lines.some((l) => /INFO \(\d+\): agentd serving/.test(l))).toBe(true);
      expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    } finally {
      await d.dispose();
    }
  });
});
