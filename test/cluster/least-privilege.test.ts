/**
 * Least privilege per node (docs/watcher.md, "Least privilege") on the real API server: deploy/
 * applied as docs/watcher.md tells, kube-apiserver with the Node authorizer and NodeRestriction.
 * Two nodes, A and B, each with its own identity (system:node:<name>, a kubelet's client
 * certificate) and its own bootstrap token: A's credentials are refused on B's Node, B's Machine,
 * B's pods and on the fleet's policy, each with a 403 whose message names the refusing rule —
 * while everything A does for itself works, by hand and through agentd itself. Pausing and
 * resuming the fleet are an operator's: `agentctl fleet pause|resume` with the kubeconfig of a
 * member of agentd:fleet-operators, refused with a node's credentials and through a node's agentd.
 */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir, waitUntil, type TestDaemon } from '../support/daemon.js';
import { machinePath, startClusterAgent } from '../support/control-plane/agent.js';
import type { ApiAnswer, ApiClient } from '../support/control-plane/api.js';
import { clientIdentity, nodeIdentity, type ClientIdentity } from '../support/control-plane/identity.js';
import { controlPlaneAvailable, type BootstrapToken, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { rpcResult } from '../support/provision-fixtures.js';

const NS = 'agentd-system';
const CM = `/api/v1/namespaces/${NS}/configmaps`;
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
const MERGE = 'application/merge-patch+json';
const A = 'lp-a';
const B = 'lp-b';

/** A 403 from the server, its reason Forbidden, its message naming the rule that refused. */
function expectRefused(answer: ApiAnswer, names: RegExp): void {
  expect({ status: answer.status, reason: answer.body.reason }, answer.text).toEqual({
    status: 403,
    reason: 'Forbidden',
  });
  expect(answer.body.message).toMatch(names);
}

function expectOk(answer: ApiAnswer): void {
  expect([200, 201], answer.text).toContain(answer.status);
}

const microTime = (): string => new Date().toISOString().replace('Z', '000Z');

const slot = (name: string, holder: string): KubeJson => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name, namespace: NS, labels: { 'app.kubernetes.io/component': 'agentd-fleet-slot' } },
  spec: {
    holderIdentity: holder,
    leaseDurationSeconds: 60,
    acquireTime: microTime(),
    renewTime: microTime(),
  },
});

const failure = (node: string, operation: string): KubeJson => ({
  node,
  operation,
  state: 'failed',
  message: 'a test failure',
  at: new Date().toISOString(),
});

async function expectOperatorRight(d: TestDaemon, method: string, configMap: string): Promise<void> {
  const answer = await d.rpc(method);
  expect(answer).toMatchObject({
    error: { code: 1004, data: { code: 'PRECONDITION_FAILED', reason: 'OperatorRight' } },
  });
  expect((answer as { error: { message: string } }).error.message).toMatch(
    new RegExp(
      `pausing and resuming the fleet is an operator right: this node's credentials may not update ConfigMap agentd-system/${configMap} .*kubectl -n agentd-system edit configmap agentd-fleet`,
    ),
  );
}

describe.skipIf(!controlPlaneAvailable())('least privilege per node against kube-apiserver', () => {
  const cp = useControlPlane();
  let nodeA: ClientIdentity;
  let nodeB: ClientIdentity;
  let tokenA: BootstrapToken;
  let tokenB: BootstrapToken;
  let ready: Promise<void> | null = null;

  const pod = (name: string, nodeName: string): Promise<KubeJson> =>
    cp().api.create('/api/v1/namespaces/lp/pods', {
      metadata: {
        name,
        // Managed by a controller, so that a drain evicts it.
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: 'r',
            uid: '00000000-0000-0000-0000-000000000004',
            controller: true,
          },
        ],
      },
      spec: { nodeName, containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });

  /** Nodes A and B (kept Ready by the kubelet stand-in), their Machines and identities, a pod each. */
  function setup(): Promise<void> {
    ready ??= (async () => {
      [nodeA, nodeB, tokenA, tokenB] = await Promise.all([
        nodeIdentity(cp(), A),
        nodeIdentity(cp(), B),
        cp().createBootstrapToken(),
        cp().createBootstrapToken(),
      ]);
      for (const [name, token] of [
        [A, tokenA],
        [B, tokenB],
      ] as const) {
        await cp().kubelet.addNode(name);
        await cp().api.create('/apis/unbounded-cloud.io/v1alpha3/machines', {
          apiVersion: 'unbounded-cloud.io/v1alpha3',
          kind: 'Machine',
          metadata: { name },
          spec: {
            kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: `bootstrap-token-${token.id}` } },
          },
        });
      }
      await cp().api.create('/api/v1/namespaces', { metadata: { name: 'lp' } });
      await cp().api.create(CM, {
        metadata: { name: 'agentd-fleet', namespace: NS },
        data: { 'policy.yaml': 'maxConcurrent: 2\n' },
      });
    })();
    return ready;
  }

  const statusPatch = (api: ApiClient, machine: string): Promise<ApiAnswer> =>
    api.request(
      'PATCH',
      `${machinePath(machine)}/status`,
      { status: { message: `written by a test` } },
      MERGE,
    );
  const cordon = (api: ApiClient, node: string, unschedulable: boolean): Promise<ApiAnswer> =>
    api.request('PATCH', `/api/v1/nodes/${node}`, { spec: { unschedulable } }, MERGE);
  const evict = (api: ApiClient, name: string): Promise<ApiAnswer> =>
    api.request('POST', `/api/v1/namespaces/lp/pods/${name}/eviction`, {
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name, namespace: 'lp' },
    });

  it("refuses A's identity on B's Node, and lets it cordon and uncordon its own", async () => {
    await setup();
    expectRefused(await cordon(nodeA.api, B, true), /node "lp-a" is not allowed to modify node "lp-b"/);
    expect((await cp().api.get(`/api/v1/nodes/${B}`)).spec?.unschedulable).toBeUndefined();
    expectOk(await cordon(nodeA.api, A, true));
    expect((await cp().api.get(`/api/v1/nodes/${A}`)).spec?.unschedulable).toBe(true);
    expectOk(await cordon(nodeA.api, A, false));
    // What agentd reads of its Node: its own, by name, and a watch selecting it.
    expectOk(await nodeA.api.request('GET', `/api/v1/nodes/${A}`));
    expectOk(await nodeA.api.request('GET', `/api/v1/nodes?fieldSelector=metadata.name%3D${A}`));
  });

  it("refuses A's identity on B's Machine, and lets it write its own Machine's status", async () => {
    await setup();
    expectRefused(
      await statusPatch(nodeA.api, B),
      /ValidatingAdmissionPolicy 'agentd-node-machine'.*node lp-a may write only its own Machine .*not Machine lp-b/,
    );
    expectOk(await statusPatch(nodeA.api, A));
    // And the other way round.
    expectRefused(
      await statusPatch(nodeB.api, A),
      /agentd-node-machine.*node lp-b may write only its own Machine .*not Machine lp-a of node lp-a/,
    );
    expectOk(await statusPatch(nodeB.api, B));
    // Nor may it register a Machine for another node (self-registration is for its own name).
    expectRefused(
      await nodeA.api.request('POST', '/apis/unbounded-cloud.io/v1alpha3/machines', {
        apiVersion: 'unbounded-cloud.io/v1alpha3',
        kind: 'Machine',
        metadata: { name: 'lp-c' },
        spec: { kubernetes: { bootstrapTokenRef: { name: 'bootstrap-token-zzzzzz' } } },
      }),
      /agentd-node-machine.*node lp-a may write only its own Machine/,
    );
  });

  it("refuses A's identity the eviction of B's pods, and lets it evict its own", async () => {
    await setup();
    await pod('on-a', A);
    await pod('on-b', B);
    // NodeRestriction finds the pod in kube-apiserver's informer cache: 404 until it is there.
    let refused: ApiAnswer | null = null;
    await waitUntil('NodeRestriction to know the pods', async () => {
      refused = await evict(nodeA.api, 'on-b');
      return refused.status !== 404;
    });
    expectRefused(
      refused as unknown as ApiAnswer,
      /node lp-a can only evict pods with spec.nodeName set to itself/,
    );
    expectOk(await evict(nodeA.api, 'on-a'));
    await waitUntil(
      'the evicted pod gone',
      async () => (await cp().api.request('GET', '/api/v1/namespaces/lp/pods/on-a')).status === 404,
    );
    expect(
      (await cp().api.get('/api/v1/namespaces/lp/pods/on-b')).metadata.deletionTimestamp,
    ).toBeUndefined();
    // What drain lists: the pods bound to its Node, and an evicted one by name on its Node.
    expectOk(await nodeA.api.request('GET', `/api/v1/pods?fieldSelector=spec.nodeName%3D${A}`));
    expectOk(
      await nodeA.api.request(
        'GET',
        `/api/v1/namespaces/lp/pods?fieldSelector=metadata.name%3Don-a%2Cspec.nodeName%3D${A}`,
      ),
    );
    expectRefused(
      await nodeA.api.request('GET', '/api/v1/pods'),
      /User "system:node:lp-a" cannot list resource "pods"/,
    );
  });

  it("refuses A's identity on the fleet policy and on clearing failures, and lets it record one", async () => {
    await setup();
    const policy = await cp().api.get(`${CM}/agentd-fleet`);
    expectRefused(
      await nodeA.api.request('PUT', `${CM}/agentd-fleet`, {
        ...policy,
        data: { 'policy.yaml': 'maxConcurrent: 2\npaused: true\n' },
      }),
      /User "system:node:lp-a" cannot update resource "configmaps" in API group "" in the namespace "agentd-system"/,
    );
    expectRefused(
      await nodeA.api.request(
        'PATCH',
        `${CM}/agentd-fleet`,
        { data: { 'policy.yaml': 'paused: true\n' } },
        MERGE,
      ),
      /User "system:node:lp-a" cannot patch resource "configmaps"/,
    );
    await cp().api.request('DELETE', `${CM}/agentd-fleet`);
    try {
      // Creating the policy where there is none (what `fleet pause` did) is refused by name.
      expectRefused(
        await nodeA.api.request('POST', CM, {
          metadata: { name: 'agentd-fleet', namespace: NS },
          data: { 'policy.yaml': 'paused: true\n' },
        }),
        /ValidatingAdmissionPolicy 'agentd-node-fleet-state'.*node lp-a may write only ConfigMap agentd-fleet-state, not agentd-fleet/,
      );
    } finally {
      await cp().api.create(CM, {
        metadata: { name: 'agentd-fleet', namespace: NS },
        data: { 'policy.yaml': 'maxConcurrent: 2\n' },
      });
    }
    // Recording failures (create, then append) works; clearing them is refused.
    const one = JSON.stringify([failure(A, 'op-1')]);
    expectOk(
      await nodeA.api.request('POST', CM, {
        metadata: { name: 'agentd-fleet-state', namespace: NS },
        data: { 'failures.json': one },
      }),
    );
    const state = await cp().api.get(`${CM}/agentd-fleet-state`);
    const two = JSON.stringify([failure(A, 'op-1'), failure(B, 'op-"{"node":-2')]);
    const appended = await nodeA.api.request('PUT', `${CM}/agentd-fleet-state`, {
      ...state,
      data: { 'failures.json': two },
    });
    expectOk(appended);
    expectRefused(
      await nodeA.api.request('PUT', `${CM}/agentd-fleet-state`, {
        ...appended.body,
        data: { 'failures.json': '[]' },
      }),
      /agentd-node-fleet-state.*node lp-a may record failures but not clear them \(2 -> 0\)/,
    );
    // An operator (the group deploy/rbac.yaml binds agentd-fleet-operator to) may do both.
    const operator = await clientIdentity(cp(), 'alice', ['agentd:fleet-operators']);
    expectOk(
      await operator.api.request(
        'PATCH',
        `${CM}/agentd-fleet-state`,
        { data: { 'failures.json': '[]' } },
        MERGE,
      ),
    );
    expectOk(
      await operator.api.request(
        'PATCH',
        `${CM}/agentd-fleet`,
        { data: { 'policy.yaml': 'maxConcurrent: 2\npaused: false\n' } },
        MERGE,
      ),
    );
  });

  it("lets an operator in agentd:fleet-operators pause and resume with agentctl and their kubeconfig; refuses a node's token and a user without the Role by the right missing, and a kubeconfig that cannot be read by its file", async () => {
    await setup();
    const dir = await makeTempDir('lp-operator-');
    const kubeconfig = async (name: string, text: string): Promise<string> => {
      const file = path.join(dir, name);
      await writeFile(file, text, { mode: 0o600 });
      return file;
    };
    const [alice, bob] = await Promise.all([
      clientIdentity(cp(), 'alice', ['agentd:fleet-operators']),
      clientIdentity(cp(), 'bob', ['developers']),
    ]);
    const ops = await kubeconfig('alice.kubeconfig', alice.kubeconfig);
    // The real agentctl, with no agentd behind its socket: the change is made with the kubeconfig.
    // No KUBECONFIG nor ~/.kube/config of the machine running the tests.
    const agentctl = async (args: string[], env: Record<string, string> = {}) => {
      const r = await runAgentctl(
        ['--socket', path.join(dir, 'no-agentd.sock'), '--json', 'fleet', ...args],
        {
          env: { HOME: dir, KUBECONFIG: '', ...env },
          timeoutMs: 60_000,
        },
      );
      return { ...r, json: JSON.parse(r.stdout) as KubeJson };
    };
    const failures = JSON.stringify([failure(A, 'op-o1'), failure(B, 'op-o2')]);
    const seeded = await cp().api.request(
      'PATCH',
      `${CM}/agentd-fleet-state`,
      { data: { 'failures.json': failures } },
      MERGE,
    );
    if (seeded.status === 404) {
      await cp().api.create(CM, {
        metadata: { name: 'agentd-fleet-state', namespace: NS },
        data: { 'failures.json': failures },
      });
    }
    try {
      // A node's bootstrap token: refused by name, the RBAC's for the policy, the admission
      // policy's for clearing the failures (which a node may record, never clear).
      const token = await kubeconfig('token.kubeconfig', cp().tokenKubeconfig(tokenA.token));
      const pause = await agentctl(['pause', '--kubeconfig', token]);
      expect(pause.code).toBe(1);
      expect(pause.json.error).toMatchObject({
        code: 'PERMISSION_DENIED',
        verb: 'update',
        resource: 'configmaps',
        name: 'agentd-fleet',
        namespace: NS,
        right: `update configmaps agentd-fleet in namespace ${NS}`,
      });
      expect(pause.stderr).toMatch(
        new RegExp(
          `^agentctl: fleet pause: the credentials of context test of ${token} may not update configmaps agentd-fleet in namespace ${NS} \\(the API server: .*User "system:bootstrap:${tokenA.id}" cannot update resource "configmaps".*\\); pause needs the rights of the Role agentd-fleet-operator in ${NS} \\(deploy/rbac.yaml\\), bound to the group agentd:fleet-operators`,
        ),
      );
      // The operator pauses. (A pause of a fleet already paused writes nothing: the node's token
      // was refused above while the fleet was rolling.)
      const paused = await agentctl(['pause', '--kubeconfig', ops]);
      expect(paused.code, paused.stderr).toBe(0);
      expect(paused.json).toMatchObject({
        namespace: NS,
        kubeconfig: { source: '--kubeconfig', files: [ops], context: 'test', server: cp().server },
        paused: true,
        halted: false,
        failures: [{ operation: 'op-o1' }, { operation: 'op-o2' }],
        errors: [],
      });
      expect((await cp().api.get(`${CM}/agentd-fleet`)).data).toEqual({
        'policy.yaml': 'maxConcurrent: 2\npaused: true\n',
      });

      const resume = await agentctl(['resume', '--kubeconfig', token]);
      expect(resume.code).toBe(1);
      expect(resume.json.error).toMatchObject({
        code: 'PERMISSION_DENIED',
        verb: 'update',
        name: 'agentd-fleet-state',
      });
      expect(resume.stderr).toMatch(
        /agentd-node-fleet-state.*may record failures but not clear them \(2 -> 0\)/,
      );

      // A user the Role is not bound to: refused at the first read, the right named.
      const nobody = await agentctl([
        'pause',
        '--kubeconfig',
        await kubeconfig('bob.kubeconfig', bob.kubeconfig),
      ]);
      expect(nobody.code).toBe(1);
      expect(nobody.json.error).toMatchObject({
        code: 'PERMISSION_DENIED',
        verb: 'get',
        name: 'agentd-fleet',
      });
      expect(nobody.stderr).toContain('User "bob" cannot get resource "configmaps"');

      // A kubeconfig path that does not exist: a usage error naming the file, nothing sent.
      const missing = path.join(dir, 'missing.kubeconfig');
      const bad = await agentctl(['pause', '--kubeconfig', missing]);
      expect(bad.code).toBe(2);
      expect(bad.json.error).toMatchObject({ code: 'INVALID_CONFIG', option: 'kubeconfig', file: missing });
      expect(bad.stderr).toMatch(new RegExp(`^agentctl: --kubeconfig ${missing}: cannot read it: .*ENOENT`));

      // Nothing the refused calls touched changed; the operator resumes through KUBECONFIG.
      expect((await cp().api.get(`${CM}/agentd-fleet-state`)).data).toEqual({ 'failures.json': failures });
      const resumed = await agentctl(['resume'], { KUBECONFIG: ops });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.json).toMatchObject({
        clearedFailures: 2,
        status: { paused: false, failures: [], kubeconfig: { source: 'KUBECONFIG', files: [ops] } },
      });
      expect((await cp().api.get(`${CM}/agentd-fleet-state`)).data).toEqual({ 'failures.json': '[]' });
      expect((await cp().api.get(`${CM}/agentd-fleet`)).data).toEqual({
        'policy.yaml': 'maxConcurrent: 2\npaused: false\n',
      });
    } finally {
      await cp().api.mergePatch(`${CM}/agentd-fleet`, { data: { 'policy.yaml': 'maxConcurrent: 2\n' } });
    }
  });

  it("lets A's token take, renew and free its Machine's slot; refuses it other Leases and B's token taking over A by name", async () => {
    await setup();
    const a = cp().tokenClient(tokenA.token);
    const b = cp().tokenClient(tokenB.token);
    const taken = await a.request('POST', LEASES, slot('agentd-slot-0', A));
    expectOk(taken);
    const renewed = await a.request('PUT', `${LEASES}/agentd-slot-0`, {
      ...taken.body,
      spec: { ...taken.body.spec, renewTime: microTime() },
    });
    expectOk(renewed);
    expectRefused(
      await b.request('PUT', `${LEASES}/agentd-slot-0`, {
        ...renewed.body,
        spec: { ...renewed.body.spec, holderIdentity: '' },
      }),
      new RegExp(
        `ValidatingAdmissionPolicy 'agentd-token-slot'.*bootstrap token ${tokenB.id} \\(Machine lp-b\\) may name only its Machine as the holder of agentd-slot-0 and free only a slot its Machine holds \\(holder lp-a -> none\\)`,
      ),
    );
    expectRefused(
      await b.request('POST', LEASES, slot('agentd-slot-1', A)),
      /agentd-token-slot.*\(Machine lp-b\) may name only its Machine as the holder of agentd-slot-1/,
    );
    expectRefused(
      await a.request('POST', LEASES, slot('not-a-slot', A)),
      /agentd-token-slot.*may write only the fleet slot Leases agentd-slot-<i>, not Lease not-a-slot/,
    );
    // A node's own identity holds no slot: NodeRestriction keeps it to kube-node-lease.
    expectRefused(
      await nodeA.api.request('POST', LEASES, slot('agentd-slot-2', A)),
      /can only access leases in the "kube-node-lease" system namespace/,
    );
    expectOk(
      await a.request('PUT', `${LEASES}/agentd-slot-0`, {
        ...renewed.body,
        spec: { ...renewed.body.spec, holderIdentity: '' },
      }),
    );
  });

  it('ties a bootstrap token to the Machine that names it, and gives it no Node and no pod', async () => {
    await setup();
    const a = cp().tokenClient(tokenA.token);
    expectOk(await statusPatch(a, A));
    expectRefused(
      await statusPatch(a, B),
      new RegExp(
        `agentd-node-machine.*bootstrap token ${tokenA.id} may write only a Machine whose spec.kubernetes.bootstrapTokenRef.name is bootstrap-token-${tokenA.id}, not Machine lp-b \\(bootstrap-token-${tokenB.id}\\)`,
      ),
    );
    expectRefused(
      await cordon(a, A, true),
      /User "system:bootstrap:[a-z0-9]+" cannot patch resource "nodes"/,
    );
    await pod('token-victim', A);
    expectRefused(await evict(a, 'token-victim'), /cannot create resource "pods\/eviction"/);
    expectOk(await a.request('GET', `${CM}/agentd-fleet`));
  });

  it("runs agentd with A's identity: registers and drains; fleet pause is refused as an operator right", async () => {
    await setup();
    await cp().api.request('DELETE', machinePath(A));
    // No policy, no gate: a node's own identity can take no slot (NodeRestriction), so its join would
    // wait in the gate. And `fleet pause` then tries to create the policy.
    await cp().api.request('DELETE', `${CM}/agentd-fleet`);
    const agent = await startClusterAgent(cp(), {
      name: A,
      token: tokenA.token,
      kubeconfig: nodeA.kubeconfig,
    });
    try {
      await waitUntil('the Machine registered', async () => (await agent.machine()) !== null, agent.d);
      await pod('drained', A);
      const drain = await rpcResult<KubeJson>(agent.d, 'drain', { wait: true, timeoutSeconds: 60 });
      expect(drain.state, JSON.stringify(drain)).toBe('succeeded');
      expect(drain.result.evicted).toContainEqual({ namespace: 'lp', name: 'drained' });
      expect((await rpcResult<KubeJson>(agent.d, 'uncordon', { wait: true })).state).toBe('succeeded');
      await expectOperatorRight(agent.d, 'fleet.pause', 'agentd-fleet');
      expect((await cp().api.request('GET', `${CM}/agentd-fleet`)).status).toBe(404);
    } finally {
      await agent.d.stop();
      await cp().api.create(CM, {
        metadata: { name: 'agentd-fleet', namespace: NS },
        data: { 'policy.yaml': 'maxConcurrent: 2\n' },
      });
    }
  });

  it("runs agentd with its bootstrap token and its kubelet's client certificate: drains and uncordons its node with the node's identity; the token is still refused on another node", async () => {
    await setup();
    const name = 'lp-k';
    const token = await cp().createBootstrapToken();
    const identity = await nodeIdentity(cp(), name);
    await cp().kubelet.addNode(name);
    const agent = await startClusterAgent(cp(), { name, token: token.token });
    try {
      await waitUntil('the Machine registered', async () => (await agent.machine()) !== null, agent.d);
      await pod('k-drained', name);
      // kubelet has not bootstrapped yet: Node calls use the token, refused as under deploy/.
      const refused = await agent.d.rpc('drain', { wait: true, timeoutSeconds: 5 });
      expect(JSON.stringify(refused)).toMatch(/cannot patch resource \\"nodes\\"/);
      // Where kubelet keeps its identity after TLS bootstrap, in the active machine (kube1):
      // its kubeconfig naming -current.pem, a link by absolute machine path to the dated file.
      const rootfs = path.join(agent.d.root, 'var/lib/machines/kube1');
      const pki = path.join(rootfs, 'var/lib/kubelet/pki');
      await mkdir(pki, { recursive: true });
      await writeFile(
        path.join(pki, 'kubelet-client-2026-12-02-00-00-00.pem'),
        identity.certPem + identity.keyPem,
        { mode: 0o600 },
      );
      await symlink(
        '/var/lib/kubelet/pki/kubelet-client-2026-12-02-00-00-00.pem',
        path.join(pki, 'kubelet-client-current.pem'),
      );
      await writeFile(
        path.join(rootfs, 'var/lib/kubelet/kubeconfig'),
        identity.kubeconfig.replace(
          /client-certificate-data: .*\n\s*client-key-data: .*\n/,
          'client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n      client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n',
        ),
        { mode: 0o600 },
      );
      const drain = await rpcResult<KubeJson>(agent.d, 'drain', { wait: true, timeoutSeconds: 60 });
      expect(drain.state, JSON.stringify(drain)).toBe('succeeded');
      expect(drain.result.evicted).toContainEqual({ namespace: 'lp', name: 'k-drained' });
      expect((await cp().api.get(`/api/v1/nodes/${name}`)).spec?.unschedulable).toBe(true);
      expect((await rpcResult<KubeJson>(agent.d, 'uncordon', { wait: true })).state).toBe('succeeded');
      expect((await cp().api.get(`/api/v1/nodes/${name}`)).spec?.unschedulable).toBeUndefined();
      expect(agent.d.logs()).toContain(`use this node’s own identity`);
      // The same agent's token is refused on another node, and so is its node identity.
      const t = cp().tokenClient(token.token);
      expectRefused(
        await cordon(t, B, true),
        /User "system:bootstrap:[a-z0-9]+" cannot patch resource "nodes"/,
      );
      expectRefused(await cordon(identity.api, B, true), /node "lp-k" is not allowed to modify node "lp-b"/);
      expect((await cp().api.get(`/api/v1/nodes/${B}`)).spec?.unschedulable).toBeUndefined();
    } finally {
      await agent.d.stop();
    }
  });

  it("runs agentd with a node's bootstrap token: registers, repaves through the fleet gate; resume and pause are refused as an operator right; halted, it goes on once an operator resumes with agentctl", async () => {
    await setup();
    const name = 'lp-t';
    const token = await cp().createBootstrapToken();
    await cp().kubelet.addNode(name);
    const agent = await startClusterAgent(cp(), { name, token: token.token });
    try {
      await waitUntil('the Machine registered', async () => (await agent.machine()) !== null, agent.d);
      await cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: 1 } } });
      await waitUntil(
        'the repave acknowledged',
        async () => (await agent.machine())?.status?.operations?.repaveCounter === 1,
        agent.d,
      );
      const drain = await agent.d.rpc('drain', { wait: true, timeoutSeconds: 5 });
      expect(JSON.stringify(drain)).toMatch(/cannot patch resource \\"nodes\\"/);
      await cp()
        .api.create(CM, {
          metadata: { name: 'agentd-fleet-state', namespace: NS },
          data: { 'failures.json': JSON.stringify([failure(name, 'op-x')]) },
        })
        .catch(() =>
          cp().api.mergePatch(`${CM}/agentd-fleet-state`, {
            data: { 'failures.json': JSON.stringify([failure(name, 'op-x')]) },
          }),
        );
      await expectOperatorRight(agent.d, 'fleet.resume', 'agentd-fleet-state');
      await expectOperatorRight(agent.d, 'fleet.pause', 'agentd-fleet');
      expect((await cp().api.get(`${CM}/agentd-fleet-state`)).data['failures.json']).toContain('op-x');

      // Halted (three failures reach maxFailures' default, 3): the next repave waits in the gate
      // until an operator resumes with agentctl and their own kubeconfig; then it goes on.
      const three = JSON.stringify([failure(name, 'op-x'), failure(A, 'op-y'), failure(B, 'op-z')]);
      await cp().api.mergePatch(`${CM}/agentd-fleet-state`, { data: { 'failures.json': three } });
      await cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: 2 } } });
      const nodeUpdated = async (): Promise<KubeJson | undefined> =>
        ((await agent.machine())?.status?.conditions as KubeJson[] | undefined)?.find(
          (c) => c.type === 'NodeUpdated',
        );
      await waitUntil(
        'the repave to wait, Halted',
        async () => (await nodeUpdated())?.reason === 'Halted',
        agent.d,
      );
      const dir = await makeTempDir('lp-resume-');
      const ops = path.join(dir, 'carol.kubeconfig');
      await writeFile(ops, (await clientIdentity(cp(), 'carol', ['agentd:fleet-operators'])).kubeconfig, {
        mode: 0o600,
      });
      const resumed = await runAgentctl(['--json', 'fleet', 'resume', '--kubeconfig', ops], {
        env: { HOME: dir, KUBECONFIG: '' },
        timeoutMs: 60_000,
      });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout)).toMatchObject({ clearedFailures: 3, status: { halted: false } });
      await waitUntil(
        'the repave acknowledged after the resume',
        async () => (await agent.machine())?.status?.operations?.repaveCounter === 2,
        agent.d,
      );
    } finally {
      await agent.d.stop();
    }
  });
});
