/**
 * Which host `agentctl uninstall` acts on (resolveUninstallHost): never the simulated host at /,
 * where its files would be this host's own. Only the resolution runs here, never the steps: a
 * test must not reach the real host's files even if the refusal were missing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveUninstallHost } from '../../../../src/cli/commands/uninstall.js';
import { createCliContext } from '../../../../src/cli/context.js';
import { CliError, EXIT } from '../../../../src/cli/exit-codes.js';
import { createOutput } from '../../../../src/cli/output.js';

let dir: string;
let server: http.Server | null = null;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-uninstall-host-'));
});
afterEach(async () => {
  const s = server;
  server = null;
  if (s) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
  await rm(dir, { recursive: true, force: true });
});

function ctxOn(socket: string) {
  const stream = new PassThrough() as unknown as NodeJS.WriteStream;
  const out = createOutput({ json: true, colorFlag: false, env: {}, stdout: stream, stderr: stream });
  return createCliContext({ socket, json: true, timeoutMs: undefined, color: false }, out, {}, dir);
}

/** A daemon whose `status` says it manages `daemon` (host and root). */
async function daemonSaying(daemon: { host: string; root: string }): Promise<string> {
  const socket = path.join(dir, 'agentd.sock');
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { daemon } }));
  });
  await new Promise<void>((resolve) => server?.listen(socket, resolve));
  return socket;
}

describe('resolveUninstallHost', () => {
  it('--host sim with the root / (no daemon answering): ROOT_REQUIRED, exit 2', async () => {
    const err = await resolveUninstallHost(ctxOn(path.join(dir, 'none.sock')), { host: 'sim' }, '/').catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({
      exitCode: EXIT.USAGE,
      details: { code: 'ROOT_REQUIRED', host: 'sim', root: '/' },
    });
    expect((err as Error).message).toContain('pass the --root of the --sim daemon');
  });

  it('a --sim daemon that says its root is /: refused the same way', async () => {
    const socket = await daemonSaying({ host: 'sim', root: '/' });
    const err = await resolveUninstallHost(ctxOn(socket), {}, '/').catch((e: unknown) => e);
    expect(err).toMatchObject({ exitCode: EXIT.USAGE, details: { code: 'ROOT_REQUIRED' } });
  });

  it('the simulated host under a --root, and the real host at /, are taken', async () => {
    const none = path.join(dir, 'none.sock');
    expect(await resolveUninstallHost(ctxOn(none), { host: 'sim' }, path.join(dir, 'root'))).toBe('sim');
    expect(await resolveUninstallHost(ctxOn(none), { host: 'systemd' }, '/')).toBe('systemd');
    const socket = await daemonSaying({ host: 'sim', root: path.join(dir, 'root') });
    expect(await resolveUninstallHost(ctxOn(socket), {}, path.join(dir, 'root'))).toBe('sim');
  });
});
