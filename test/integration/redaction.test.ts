/**
 * One redactor for every credential (src/config/redact.ts): each kind of secret is fed through
 * a real `--sim` daemon, and none may reach any surface: `config.get`, `status`, the operation
 * records (`operations.list`, the `update` answer), error messages, and the log lines.
 *
 * The secrets: URL userinfo in the download overrides, an exec credential's args and env, an
 * `Authorization` header a registry echoes in its error body, and userinfo typed into the image
 * reference.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simDefaultConfig } from '../../src/sim/default-config.js';
import { mirrorDownloads } from '../../src/sim/mirror/artifacts.js';
import { makeTempDir } from '../support/daemon.js';
import { SimNode } from '../support/sim-node.js';

/** Every secret contains this, so one search finds any of them. */
const MARK = 'S3cretXq';
const SECRETS = {
  userinfo: `agentd-user:${MARK}pass`,
  arg: `--token=${MARK}arg`,
  env: `${MARK}env`,
  bearer: `eyJhbGciOiJ${MARK}bearer`,
};

let node: SimNode;
let registry: http.Server;
let registryHost: string;
let mirror: { url: string; hostPort: string };

beforeAll(async () => {
  // A registry that refuses every call and echoes the request's credential in its error body.
  registry = http.createServer((_req, res) => {
    res.writeHead(403, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        errors: [
          { code: 'DENIED', message: `refused Authorization: Bearer ${SECRETS.bearer} for this repository` },
        ],
      }),
    );
  });
  await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
  registryHost = `127.0.0.1:${(registry.address() as AddressInfo).port}`;
  node = new SimNode(await makeTempDir());
  // At debug, every call and its params are logged too.
  await node.start({ args: ['--log-level', 'debug'] });
  const { port } = JSON.parse(await readFile(path.join(node.stateDir, 'sim-mirror.json'), 'utf8')) as {
    port: number;
  };
  mirror = { url: `http://127.0.0.1:${port}`, hostPort: `127.0.0.1:${port}` };
});

afterAll(async () => {
  await node.stop();
  registry.closeAllConnections();
  await new Promise<void>((resolve) => registry.close(() => resolve()));
});

/** The sim config, joined with an exec credential, downloading through a URL with userinfo. */
function secretConfig(): Record<string, unknown> {
  const base = simDefaultConfig(mirror) as unknown as { Kubelet: { Auth: Record<string, unknown> } };
  return {
    ...base,
    Kubelet: {
      ...base.Kubelet,
      Auth: {
        ExecCredential: {
          command: '/usr/local/bin/node-credential',
          args: ['get', SECRETS.arg],
          env: [{ name: 'CREDENTIAL_KEY', value: SECRETS.env }],
        },
      },
    },
    Downloads: mirrorDownloads(`http://${SECRETS.userinfo}@${mirror.hostPort}`),
  };
}

function expectNoSecret(surface: string, value: unknown): void {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  expect(
    text.includes(MARK),
    `${surface} shows a secret:\n${text.slice(Math.max(0, text.indexOf(MARK) - 300), text.indexOf(MARK) + 200)}`,
  ).toBe(false);
}

describe('no credential reaches any surface', () => {
  it('URL userinfo and exec credential args and env: config.get, status, operation records, logs', async () => {
    const op = await node.update({ config: secretConfig(), wait: true });
    expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
    expectNoSecret('the update answer', op);
    const got = await node.call<{ config: { Kubelet: { Auth: { ExecCredential: unknown } } } }>('config.get');
    expectNoSecret('config.get', got);
    // What is kept: the command, the names, the host of the URL.
    expect(got.config.Kubelet.Auth.ExecCredential).toEqual({
      command: '/usr/local/bin/node-credential',
      args: ['[REDACTED]', '[REDACTED]'],
      env: [{ name: 'CREDENTIAL_KEY', value: '[REDACTED]' }],
    });
    expect(JSON.stringify(got)).toContain(`http://***@${mirror.hostPort}`);
    expectNoSecret('status', await node.status());
    expectNoSecret('operations.list', await node.operations());
    expectNoSecret('the log', node.daemon?.logs());
  });

  it('a registry that echoes the Authorization header: the operation error, status and logs', async () => {
    const op = await node.update({
      config: {
        ...secretConfig(),
        OCIImage: `${registryHost}/kube/node:1.34`,
        Cluster: { ...(secretConfig().Cluster as object), Version: '1.34.1' },
      },
      wait: true,
    });
    expect(op.state).toBe('failed');
    expect(JSON.stringify(op.error)).toContain('refused Authorization: Bearer [REDACTED]');
    expectNoSecret('the failed update', op);
    expectNoSecret('status', await node.status());
    expectNoSecret('operations.list', await node.operations());
    expectNoSecret('the log', node.daemon?.logs());
  });

  it('userinfo typed into the image reference: the error names the field, not the credentials', async () => {
    const err = await node.callError('update', {
      config: { ...secretConfig(), OCIImage: `agentd-user:${MARK}img@registry.corp/kube/node:1.34` },
    });
    expect(err.message).toContain('holds credentials before the registry');
    expectNoSecret('the refusal', err);
    expectNoSecret('the log', node.daemon?.logs());
  });
});
