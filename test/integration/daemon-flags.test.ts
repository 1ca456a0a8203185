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
    const host = await expectUsageError(['--host', 'docker'], ['--host', 'docker']);
    expect(host.stderr).toMatch(/^agentd: option '--host <kind>' argument 'docker' is invalid/);
    await expectUsageError(['--log-level', 'loud'], ['--log-level', 'loud']);
  });

  it('an unknown flag, as every error of agentd: agentd: <what is wrong>', async () => {
    const r = await expectUsageError(['--bogus-flag'], ['--bogus-flag']);
    expect(r.stderr).toBe("agentd: unknown option '--bogus-flag'\n(run agentd --help for the options)\n");
  });

  it('an unexpected argument', async () => {
    const r = await expectUsageError(['extra'], ['too many arguments']);
    expect(r.stderr).toMatch(/^agentd: too many arguments/);
  });

  it('a duration longer than a timer can wait, naming the maximum', async () => {
    const r = await expectUsageError(['--shutdown-grace', '597h'], []);
    expect(r.stderr).toBe(
      'agentd: invalid --shutdown-grace: expected a duration of at most 596h, got "597h"\n',
    );
    await expectUsageError([], ['--verify-timeout', 'AGENTD_VERIFY_TIMEOUT', 'at most 596h'], {
      AGENTD_VERIFY_TIMEOUT: '1000h',
    });
  });

  it('a --socket-mode that lets others use the socket', async () => {
    await expectUsageError(['--socket-mode', '0666'], ['--socket-mode', 'gives others no access', '"0666"']);
  });

  it('--sim with --host systemd (or AGENTD_SIM with it): the try-out mode never runs real host commands', async () => {
    // The socket's missing directory stops a daemon that let the contradiction pass before it
    // could reach the host; the message shows which of the two stopped it.
    const missing = (dir: string): string[] => ['--socket', path.join(dir, 'missing', 'deeper', 'a.sock')];
    const dir = await makeTempDir();
    const why = 'contradict each other: --sim is the try-out mode on the simulated host';
    const flag = await runAgentd(
      [...baseFlags(dir), '--config', await emptyConfig(dir), ...missing(dir), '--sim', '--host', 'systemd'],
      { cwd: dir },
    );
    expect(flag.code, flag.stderr).toBe(2);
    expect(flag.stderr).toBe(
      `agentd: --sim and --host systemd ${why} (--host sim); leave out --sim to run on systemd\n`,
    );
    const env = await runAgentd(
      [...baseFlags(dir), '--config', await emptyConfig(dir), ...missing(dir), '--host', 'systemd'],
      { cwd: dir, env: { AGENTD_SIM: '1' } },
    );
    expect(env.code, env.stderr).toBe(2);
    expect(env.stderr).toContain(`agentd: AGENTD_SIM=1 and --host systemd ${why}`);
  });

  it('a proxy variable it cannot follow is named without its credentials', async () => {
    const r = await expectUsageError([], ['HTTPS_PROXY="http://***@proxy.corp:bad"', 'not a proxy URL'], {
      HTTPS_PROXY: 'http://alice:s3cret-pass@proxy.corp:bad',
    });
    expect(r.stderr).not.toContain('s3cret');
    expect(r.stderr).not.toContain('alice');
  });

  it('an env value, naming the variable', async () => {
    await expectUsageError([], ['--shutdown-grace', 'AGENTD_SHUTDOWN_GRACE'], {
      AGENTD_SHUTDOWN_GRACE: '5 minutes',
    });
  });

  it('a bad value in the YAML config file, naming the file and key', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, 'logLevel: info\nsocketMode: rwx\nshutdownGrace: [1, 2]\n');
    const r = await runAgentd([...baseFlags(dir), '--config', file], { cwd: dir });
    expect(r.code).toBe(2);
    // agentd: <file>: <key>: what is wrong, what was expected; a line each.
    expect(r.stderr).toBe(
      [
        `agentd: ${file}: socketMode: expected an octal mode such as 0660, got "rwx"`,
        `agentd: ${file}: shutdownGrace: expected a duration such as 30s, 5m or 1500ms, got a list [1,2]`,
        '',
      ].join('\n'),
    );
  });

  it('YAML that does not parse: where, then what, on one line', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, 'logLevel: info\nsocket: a: b\n');
    const r = await runAgentd([...baseFlags(dir), '--config', file], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `agentd: ${file}: line 2, column 9: not valid YAML: Nested mappings are not allowed in compact mappings\n`,
    );
  });

  it('an unknown key in the YAML config file', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, 'sockett: /x.sock\n');
    const r = await runAgentd([...baseFlags(dir), '--config', file], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^agentd: ${file}: sockett: unknown key; did you mean socket\\?`));
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
