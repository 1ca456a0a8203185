/**
 * What agentctl costs and how it behaves at the edges: what `status` loads (lazy imports in the
 * bundle: no Kubernetes client, no server, no download code), `… | head` closing the pipe early,
 * and an agentd of another version — one that lacks a method, or the event stream.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENTCTL_BIN, runAgentctl } from '../support/cli.js';
import {
  REPO_ROOT,
  childEnv,
  makeTempDir,
  runtimeRecorder,
  startTestDaemon,
  type TestDaemon,
} from '../support/daemon.js';

describe('agentctl status runs only what it uses', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(async () => {
    await d?.dispose();
  });

  /**
   * Run agentctl with a preload that records the node built-in modules loaded by exit. The bundle
   * is one file, so its lazily imported parts show only by what they load when they run: the
   * Kubernetes client, fastify, undici and pino load tls, https, http2, zlib or worker_threads.
   */
  async function loadedBuiltins(args: string[]): Promise<string[]> {
    const recorder = await runtimeRecorder();
    const code = await new Promise<number | null>((resolve) => {
      const proc = spawn(
        process.execPath,
        ['--require', recorder.preload, AGENTCTL_BIN, '--socket', d.socket, ...args],
        {
          env: childEnv(),
          stdio: 'ignore',
        },
      );
      proc.once('close', resolve);
    });
    expect(code).toBe(0);
    return (await recorder.read()).builtins;
  }

  it('status: the RPC client on node:http, no TLS, Kubernetes client, server, logger or download code', async () => {
    const builtins = await loadedBuiltins(['status', '--json']);
    // The preload saw the command talk to the daemon through node:http (src/rpc/http-transport.ts),
    // so an empty list cannot pass.
    expect(builtins).toContain('http');
    const forbidden = ['tls', 'https', 'http2', 'zlib', 'worker_threads'];
    expect(builtins.filter((m) => forbidden.includes(m))).toEqual([]);
  });

  /**
   * agentctl's bundle without its library bundles (dist/agentctl-libs.cjs, dist/agentctl-kube.cjs,
   * scripts/build.ts): what status, version and help need is all in agentctl's own bundle; a
   * command that needs a library (yaml, to read a --config file) loads the library bundle on
   * first use, and only fleet pause and resume load the Kubernetes client's.
   */
  it('status needs no library bundle; a command that needs a library loads it; only fleet pause|resume the Kubernetes client', async () => {
    const dir = await makeTempDir('agentctl-split-');
    await mkdir(path.join(dir, 'bin'));
    for (const f of [
      'bin/agentctl.js',
      'bin/package.json',
      'load-bundle.cjs',
      'agentctl.cjs',
      ...(await readdir(path.join(REPO_ROOT, 'dist'))).filter((f) => /^agentctl\.cjs\..*cache$/.test(f)),
    ])
      await copyFile(path.join(REPO_ROOT, 'dist', f), path.join(dir, f));
    const config = path.join(dir, 'config.yaml');
    await writeFile(config, 'KubernetesVersion: 1.35.0\n');
    const agentctl = (args: string[]) =>
      spawnSync(process.execPath, [path.join(dir, 'bin/agentctl.js'), '--socket', d.socket, ...args], {
        env: childEnv(),
        encoding: 'utf8',
      });
    const status = agentctl(['--json', 'status']);
    expect(status.status, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toHaveProperty('daemon.state');
    expect(agentctl(['--version']).status).toBe(0);
    expect(agentctl(['help', 'update']).status).toBe(0);
    const update = ['update', '--config', config, '--dry-run'];
    const withoutLibs = agentctl(update);
    expect(withoutLibs.status).toBe(1);
    expect(withoutLibs.stderr).toContain('agentctl-libs.cjs');
    await copyFile(path.join(REPO_ROOT, 'dist/agentctl-libs.cjs'), path.join(dir, 'agentctl-libs.cjs'));
    // The YAML file was read (yaml, from the library bundle) and sent: the daemon judged it.
    const withLibs = agentctl(update);
    expect(withLibs.stderr).not.toContain('agentctl-libs.cjs');
    expect(withLibs.stderr).toContain('invalid params');
    // The Kubernetes client is in a bundle of its own (dist/agentctl-kube.cjs), which only fleet
    // pause and resume load: the commands above ran without it.
    const missing = path.join(dir, 'missing.kubeconfig');
    const pause = ['fleet', 'pause', '--kubeconfig', missing];
    const withoutKube = agentctl(pause);
    expect(withoutKube.status).toBe(1);
    expect(withoutKube.stderr).toContain('agentctl-kube.cjs');
    await copyFile(path.join(REPO_ROOT, 'dist/agentctl-kube.cjs'), path.join(dir, 'agentctl-kube.cjs'));
    const withKube = agentctl(pause);
    expect(withKube.status).toBe(2);
    expect(withKube.stderr).toMatch(
      new RegExp(`^agentctl: --kubeconfig ${missing}: cannot read it: .*ENOENT`),
    );
  });
});

describe('a reader that goes away early (agentctl … | true)', () => {
  it('exits quietly: no EPIPE, no stack trace', async () => {
    const script = `set -o pipefail; '${process.execPath}' '${AGENTCTL_BIN}' completion bash | true; echo "rc=\${PIPESTATUS[0]}" >&2`;
    const { stderr } = await new Promise<{ stderr: string }>((resolve) => {
      const proc = spawn('bash', ['-c', script], { env: childEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
      proc.once('close', () => resolve({ stderr: err }));
    });
    expect(stderr).toBe('rc=0\n');
  });
});

/** A daemon of another version: answers `status` (version 0.0.1) and a few calls; no event stream. */
describe('an agentd of another version', () => {
  let socket: string;
  let server: http.Server;
  const calls: string[] = [];
  const op = (state: string) => ({
    id: 'op-old',
    kind: 'update',
    state,
    reason: null,
    requestedBy: 'agentctl',
    idempotencyKey: null,
    createdAt: '2026-03-01T12:00:00.000Z',
    startedAt: '2026-03-01T12:00:00.000Z',
    finishedAt: state === 'running' ? null : '2026-03-01T12:00:05.000Z',
    from: 'kube1',
    to: 'kube2',
    phases: [],
    result: null,
    error: null,
  });

  beforeAll(async () => {
    socket = path.join(await makeTempDir('agentctl-old-'), 'old.sock');
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/rpc') {
          res.writeHead(404).end('not found');
          return;
        }
        const call = JSON.parse(body) as { id: number; method: string };
        calls.push(call.method);
        const results: Record<string, unknown> = {
          status: {
            daemon: { version: '0.0.1', pid: 1, startedAt: '2026-03-01T12:00:00.000Z', state: 'ready' },
          },
          'operations.get': op('running'),
          'operations.wait': op('succeeded'),
        };
        const answer =
          call.method in results
            ? { jsonrpc: '2.0', id: call.id, result: results[call.method] }
            : // A plain JSON-RPC "method not found", without agentd's data.code.
              { jsonrpc: '2.0', id: call.id, error: { code: -32601, message: 'Method not found' } };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    // Made in beforeAll, outside any test: makeTempDir leaves it to us.
    if (socket) await rm(path.dirname(socket), { recursive: true, force: true });
  });

  it('a method it does not have: exit 2, naming the method and both versions', async () => {
    const r = await runAgentctl(['--socket', socket, 'drain']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^agentctl: agentd 0\.0\.1 does not support the method "drain" that this command needs \(agentctl \d+\.\d+\.\d+\); upgrade agentd/,
    );
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const j = await runAgentctl(['--socket', socket, '--json', 'uncordon']);
    expect(JSON.parse(j.stdout)).toMatchObject({
      error: { code: 'METHOD_NOT_FOUND', exitCode: 2, method: 'uncordon', daemonVersion: '0.0.1' },
    });
  });

  it('version reports both sides', async () => {
    const r = await runAgentctl(['--socket', socket, '--json', 'version']);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as { client: { version: string }; daemon: { version: string } };
    expect(v.daemon.version).toBe('0.0.1');
    expect(v.client.version).not.toBe('0.0.1');
    expect(v).toMatchObject({ sameVersion: false });
    const human = await runAgentctl(['--socket', socket, 'version']);
    expect(human.stdout).toMatch(/^agentd {3}0\.0\.1 \(pid 1\)$/m);
    expect(human.stdout).toContain('note: the versions differ');
  });

  it('no /v1/events: following falls back to operations.wait', async () => {
    calls.length = 0;
    const r = await runAgentctl(['--socket', socket, '--json', 'ops', 'wait', 'op-old']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: 'op-old', state: 'succeeded' });
    expect(calls).toEqual(['operations.get', 'operations.wait']);
  });
});
