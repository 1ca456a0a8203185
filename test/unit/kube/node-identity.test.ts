// Why the fake API server (test/support/fake-kube): no fault: which identity each request carries, told apart by the server; test/cluster/least-privilege.test.ts does it with kube-apiserver.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { createKubeClients } from '../../../src/kube/index.js';
import type { KubeClients } from '../../../src/kube/index.js';
import {
  createNodeCredentialChooser,
  createNodeIdentityReader,
  resolveInRootfs,
} from '../../../src/kube/node-identity.js';
import { createKubeSession } from '../../../src/kube/session.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';

const run = promisify(execFile);
const at = (rootfs: string) => ({ rootfs, kubeconfig: '/var/lib/kubelet/kubeconfig' });

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-node-identity-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A self-signed certificate and key (one PEM file, as kubelet keeps them) for `cn`. */
async function certPem(dir: string, cn: string): Promise<string> {
  const base = path.join(dir, `cert-${Math.random().toString(36).slice(2)}`);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.pem`,
    '-subj',
    `/O=system:nodes/CN=${cn}`,
    '-days',
    '1',
  ]);
  return (await readFile(`${base}.pem`, 'utf8')) + (await readFile(`${base}.key`, 'utf8'));
}

const KUBECONFIG = [
  'apiVersion: v1',
  'kind: Config',
  'clusters: [{ name: default, cluster: { server: "https://192.0.2.1:6443" } }]',
  'contexts: [{ name: default, context: { cluster: default, user: default-auth } }]',
  'current-context: default',
  'users:',
  '  - name: default-auth',
  '    user:',
  '      client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem',
  '      client-key: /var/lib/kubelet/pki/kubelet-client-current.pem',
  '',
].join('\n');

/**
 * A machine rootfs with kubelet's files as kubelet leaves them after its TLS bootstrap: its
 * kubeconfig, a dated client certificate, and `-current.pem` linking to it by its absolute machine path.
 */
async function bootstrapped(rootfs: string, cn: string, stamp = '2026-12-02-03-00-00'): Promise<string> {
  const pki = path.join(rootfs, 'var/lib/kubelet/pki');
  await mkdir(pki, { recursive: true });
  const pem = await certPem(path.dirname(rootfs), cn);
  await writeFile(path.join(pki, `kubelet-client-${stamp}.pem`), pem, { mode: 0o600 });
  await unlink(path.join(pki, 'kubelet-client-current.pem')).catch(() => undefined);
  await symlink(
    `/var/lib/kubelet/pki/kubelet-client-${stamp}.pem`,
    path.join(pki, 'kubelet-client-current.pem'),
  );
  await writeFile(path.join(rootfs, 'var/lib/kubelet/kubeconfig'), KUBECONFIG, { mode: 0o600 });
  return pem;
}

describe('resolveInRootfs', () => {
  it('follows an absolute symlink inside the rootfs, never on the host', async () => {
    const dir = await tempDir();
    await mkdir(path.join(dir, 'var/lib'), { recursive: true });
    await writeFile(path.join(dir, 'var/lib/real'), 'x');
    await symlink('/var/lib/real', path.join(dir, 'var/lib/current'));
    await symlink('../../..', path.join(dir, 'var/lib/up'));
    expect(resolveInRootfs(dir, '/var/lib/current')).toBe(path.join(dir, 'var/lib/real'));
    // `..` stops at the rootfs's root.
    expect(resolveInRootfs(dir, '/var/lib/up/etc/passwd')).toBe(path.join(dir, 'etc/passwd'));
    expect(resolveInRootfs(dir, '/no/such/file')).toBe(path.join(dir, 'no/such/file'));
  });
});

describe('createNodeIdentityReader', () => {
  it('finds no identity before kubelet bootstraps, then the certificate, then the rotated one', async () => {
    const dir = await tempDir();
    const rootfs = path.join(dir, 'kube1');
    const reader = createNodeIdentityReader();
    expect(reader.lookup(at(rootfs))).toEqual({
      identity: null,
      reason: `no kubelet kubeconfig at ${rootfs}/var/lib/kubelet/kubeconfig (kubelet has not bootstrapped yet)`,
    });
    const first = await bootstrapped(rootfs, 'system:node:n1');
    const one = reader.lookup(at(rootfs)).identity;
    expect(one).toMatchObject({
      user: 'system:node:n1',
      certFile: path.join(rootfs, 'var/lib/kubelet/pki/kubelet-client-2026-12-02-03-00-00.pem'),
    });
    expect(first).toContain(one?.certPem);
    expect(first).toContain(one?.keyPem);
    expect(reader.lookup(at(rootfs)).identity).toBe(one);
    // kubelet rotates: a new dated file, the link swapped to it.
    const rotated = await bootstrapped(rootfs, 'system:node:n1', '2026-12-03-03-00-00');
    const two = reader.lookup(at(rootfs)).identity;
    expect(two?.certFile).toMatch(/kubelet-client-2026-12-03-03-00-00\.pem$/);
    expect(rotated).toContain(two?.certPem);
    expect(two?.stamp).not.toBe(one?.stamp);
  });

  it('says why a kubeconfig gives no node identity', async () => {
    const dir = await tempDir();
    const rootfs = path.join(dir, 'kube1');
    await bootstrapped(rootfs, 'alice');
    const reader = createNodeIdentityReader();
    expect(reader.lookup(at(rootfs))).toEqual({
      identity: null,
      reason: expect.stringMatching(
        /the client certificate in .*kubelet-client-.*\.pem is not a node's \(CN "alice"\)/,
      ),
    });
    await writeFile(
      path.join(rootfs, 'var/lib/kubelet/kubeconfig'),
      KUBECONFIG.replace(/client-certificate:.*\n.*client-key:.*\n/, 'exec: { command: /bin/true }\n'),
    );
    expect(reader.lookup(at(rootfs))).toMatchObject({
      identity: null,
      reason: expect.stringMatching(/no client certificate/),
    });
  });
});

describe('createNodeCredentialChooser', () => {
  it('uses the active machine’s identity, the new one after a switch-over, the session’s without one', async () => {
    const dir = await tempDir();
    const kube1 = path.join(dir, 'kube1');
    const kube2 = path.join(dir, 'kube2');
    await bootstrapped(kube1, 'system:node:n1');
    let active: string | null = kube1;
    let kubeconfigGiven = false;
    const applied = agentConfigSchema.parse(makeAgentConfig());
    const logger = pino({ level: 'silent' });
    const info = vi.spyOn(logger, 'info');
    const chooser = createNodeCredentialChooser({
      get kubeconfigGiven() {
        return kubeconfigGiven;
      },
      appliedConfig: () => applied,
      activeKubelet: () => (active === null ? null : at(active)),
      logger,
    });
    const base = { source: 'bootstrap-token' } as KubeClients;
    const made: string[] = [];
    const make = (_b: KubeClients, id: { certPem: string }): KubeClients => {
      made.push(id.certPem);
      return { source: 'node-identity' } as KubeClients;
    };
    const first = chooser.clients(base, make);
    expect(first.source).toBe('node-identity');
    expect(chooser.clients(base, make)).toBe(first);
    expect(made).toHaveLength(1);
    expect(chooser.current()).toMatchObject({ source: 'node-identity', user: 'system:node:n1' });
    // The other machine becomes active: its kubelet has not bootstrapped yet.
    active = kube2;
    expect(chooser.clients(base, make)).toBe(base);
    expect(chooser.current()).toMatchObject({ source: 'session', reason: expect.stringMatching(/kube2/) });
    await bootstrapped(kube2, 'system:node:n1');
    const second = chooser.clients(base, make);
    expect(second).not.toBe(first);
    expect(made).toHaveLength(2);
    expect(made[1]).not.toBe(made[0]);
    active = null;
    expect(chooser.current()).toEqual({ source: 'session', reason: 'no active machine' });
    active = kube1;
    kubeconfigGiven = true;
    expect(chooser.clients(base, make)).toBe(base);
    // Said in the log once per change: identity, none (kube2), identity (kube2), --kubeconfig.
    expect(info.mock.calls.map((c) => c[1])).toEqual([
      expect.stringMatching(/use this node’s own identity/),
      expect.stringMatching(/use the session’s credentials/),
      expect.stringMatching(/use this node’s own identity/),
      expect.stringMatching(/use the session’s credentials/),
    ]);
  });
});

describe('the session’s Node calls', () => {
  it('cordon with the node identity’s clients, the Machine read with the session’s token', async () => {
    const dir = await tempDir();
    const rootfs = path.join(dir, 'kube1');
    await bootstrapped(rootfs, 'system:node:w1');
    const kube = await startFakeKube({
      tokens: {
        'abcdef.0123456789abcdef': { rules: [{ verbs: ['get'], resources: ['machines'] }] },
        'nodeid.0123456789abcdef': {
          user: 'system:node:w1',
          rules: [{ verbs: ['get', 'patch'], resources: ['nodes'] }],
        },
      },
    });
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const applied = agentConfigSchema.parse(makeAgentConfig({ MachineName: 'w1' }));
    // The fake API server speaks HTTP and knows tokens only: each set of clients carries a token.
    const tokenClients = async (token: string): Promise<KubeClients> => {
      const file = path.join(dir, `kubeconfig-${token}`);
      await writeFile(file, kube.kubeconfigYaml(token));
      return createKubeClients({ kubeconfigPath: file, crdGroup: 'unbounded-cloud.io' }) as KubeClients;
    };
    const sessionClients = await tokenClients('abcdef.0123456789abcdef');
    const nodeClients = await tokenClients('nodeid.0123456789abcdef');
    let active: string | null = null;
    const identities: string[] = [];
    const session = createKubeSession({
      config: {
        kubeconfig: null,
        machineName: null,
        watch: true,
        crdGroup: 'unbounded-cloud.io',
        host: 'systemd',
      },
      appliedConfig: () => applied,
      activeKubelet: () => (active === null ? null : at(active)),
      logger: pino({ level: 'silent' }),
      clock: createTestClock(),
      env: {},
      createClients: () => sessionClients,
      createNodeClients: (base, id) => {
        expect(base).toBe(sessionClients);
        identities.push(id.certPem);
        return nodeClients;
      },
    });
    await session.load();
    // Without a node identity the token is refused, as under deploy/.
    const refused = await session.nodeOps.cordon().catch((e: unknown) => e);
    expect(String((refused as Error).message)).toMatch(/read Node w1: forbidden/);
    active = rootfs;
    await session.nodeOps.cordon();
    expect(kube.getNode('w1')?.spec?.unschedulable).toBe(true);
    expect(identities).toHaveLength(1);
    expect(session.nodeCredentials()).toMatchObject({ source: 'node-identity', user: 'system:node:w1' });
  });
});
