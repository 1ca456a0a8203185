/**
 * deploy/rbac.yaml against the real RBAC authorizer: agentd on a node registers and repaves
 * through the fleet gate with its bootstrap token (group system:bootstrappers), and drains with
 * its own identity (system:node:<name>), bound by the manifests and nothing else, without one
 * request refused (what a node may not do: least-privilege.test.ts); and with each
 * rule of the manifests dropped in turn, what needs it fails with the server's message naming
 * the missing right (verb and resource), where an operator looks: `status`, the operation's
 * error, `fleet.status`, the log.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../support/daemon.js';
import { machinePath, startClusterAgent, type ClusterAgent } from '../support/control-plane/agent.js';
import { auditEvents, bootstrapUser } from '../support/control-plane/audit.js';
import { nodeIdentity } from '../support/control-plane/identity.js';
import { controlPlaneAvailable, DEPLOY_DIR, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { rpcResult } from '../support/provision-fixtures.js';

const NS = 'agentd-system';
const CLUSTER_ROLE = '/apis/rbac.authorization.k8s.io/v1/clusterroles/agentd';
const ROLE = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/agentd-fleet`;
const SLOTS_ROLE = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/agentd-fleet-slots`;
const URLS = { clusterRole: CLUSTER_ROLE, role: ROLE, slots: SLOTS_ROLE } as const;
type RoleKey = keyof typeof URLS;
const POLICY = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'agentd-fleet', namespace: NS },
  data: { 'policy.yaml': 'maxConcurrent: 1\n' },
};

interface Rule {
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

async function manifestRules(): Promise<Record<RoleKey, Rule[]>> {
  const docs = parseAllDocuments(await readFile(path.join(DEPLOY_DIR, 'rbac.yaml'), 'utf8')).map(
    (d) => d.toJS() as KubeJson,
  );
  const rules = (kind: string, name: string): Rule[] =>
    docs.find((d) => d.kind === kind && d.metadata?.name === name)?.rules as Rule[];
  return {
    clusterRole: rules('ClusterRole', 'agentd'),
    role: rules('Role', 'agentd-fleet'),
    slots: rules('Role', 'agentd-fleet-slots'),
  };
}

describe.skipIf(!controlPlaneAvailable())('deploy/rbac.yaml against the real RBAC authorizer', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });
  let n = 0;

  const setPolicy = async (present: boolean): Promise<void> => {
    await cp().api.request('DELETE', `/api/v1/namespaces/${NS}/configmaps/agentd-fleet`);
    await cp().api.request('DELETE', `/api/v1/namespaces/${NS}/configmaps/agentd-fleet-state`);
    if (present) await cp().api.create(`/api/v1/namespaces/${NS}/configmaps`, POLICY);
  };
  const text = async (a: ClusterAgent, answer: unknown): Promise<string> => {
    const status = await rpcResult(a.d, 'status');
    return `${JSON.stringify(answer)}\n${JSON.stringify(status)}\n${a.d.logs()}`;
  };

  it('lets agentd register and repave through the fleet gate with its token, and drain with its own identity, without one 403', async () => {
    await setPolicy(true);
    const name = `rbac-${++n}`;
    await cp().kubelet.addNode(name);
    const a = await startClusterAgent(cp(), { name });
    await waitUntil('the Machine registered', async () => (await a.machine()) !== null, a.d);
    await cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: 1 } } });
    await waitUntil(
      'the repave acknowledged',
      async () => (await a.machine())?.status?.operations?.repaveCounter === 1,
      a.d,
    );
    expect(await rpcResult<KubeJson>(a.d, 'fleet.status')).toMatchObject({ synced: true, errors: [] });
    await a.d.stop();

    // A node's own identity takes no slot (NodeRestriction): without a policy there is no gate.
    await setPolicy(false);
    const other = `rbac-${++n}`;
    await cp().kubelet.addNode(other);
    const identity = await nodeIdentity(cp(), other);
    const b = await startClusterAgent(cp(), { name: other, kubeconfig: identity.kubeconfig });
    await waitUntil('the Machine registered', async () => (await b.machine()) !== null, b.d);
    expect((await rpcResult<KubeJson>(b.d, 'drain', { wait: true })).state).toBe('succeeded');
    expect((await rpcResult<KubeJson>(b.d, 'uncordon', { wait: true })).state).toBe('succeeded');
    await b.d.stop();

    const refused = [
      ...(await auditEvents(cp(), bootstrapUser(cp()))),
      ...(await auditEvents(cp(), identity.user)),
    ].filter((e) => e.responseStatus?.code === 403);
    expect(
      refused.map(
        (e) =>
          `${e.user?.username} ${e.verb} ${e.objectRef?.resource}/${e.objectRef?.subresource ?? ''} ${e.objectRef?.name ?? ''}`,
      ),
    ).toEqual([]);
  });

  /** What to make agentd do for each rule, and the right the server's refusal must name. */
  const CASES: Array<{
    role: RoleKey;
    index: number;
    names: RegExp;
    policy: boolean;
    act: (a: ClusterAgent) => Promise<unknown>;
  }> = [
    {
      role: 'clusterRole',
      index: 0,
      names: /cannot (get|create|list|watch) resource \\?"machines\\?"/,
      policy: false,
      act: async () => null,
    },
    {
      role: 'clusterRole',
      index: 1,
      names: /cannot (get|update|patch) resource \\?"machines\/status\\?"/,
      policy: false,
      act: async (a) =>
        cp().api.mergePatch(machinePath(a.name), { spec: { operations: { repaveCounter: 1 } } }),
    },
    {
      role: 'role',
      index: 0,
      names: /cannot (get|list|watch) resource \\?"configmaps\\?".*agentd-system/,
      policy: true,
      act: (a) => rpcResult(a.d, 'fleet.status'),
    },
    {
      role: 'role',
      index: 1,
      names: /cannot (get|update) resource \\?"configmaps\\?"/,
      policy: true,
      act: (a) => rpcResult(a.d, 'fleet.status'),
    },
    {
      role: 'role',
      index: 2,
      names: /cannot create resource \\?"configmaps\\?"/,
      policy: false,
      act: (a) => a.d.rpc('fleet.pause'),
    },
    {
      role: 'slots',
      index: 0,
      names: /cannot (list|watch|create) resource \\?"leases\\?"/,
      policy: true,
      act: (a) => a.d.rpc('update', { set: { kubernetesVersion: '1.35.0' } }),
    },
    {
      role: 'slots',
      index: 1,
      names: /cannot (get|update) resource \\?"leases\\?"/,
      policy: true,
      act: async (a) => {
        await cp().api.create(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
          metadata: { name: 'agentd-slot-0', labels: { 'app.kubernetes.io/component': 'agentd-fleet-slot' } },
          spec: { holderIdentity: '', leaseDurationSeconds: 60 },
        });
        return a.d.rpc('update', { set: { kubernetesVersion: '1.35.0' } });
      },
    },
  ];

  it.each(CASES.map((c) => [`${c.role} rule ${c.index}`, c] as const))(
    'without the %s, names the missing right',
    async (_label, c) => {
      const rules = await manifestRules();
      const kept = rules[c.role].filter((_, i) => i !== c.index);
      expect(kept).toHaveLength(rules[c.role].length - 1);
      const url = URLS[c.role];
      const original = await cp().api.get(url);
      await cp().api.put(url, { ...original, rules: kept });
      try {
        await setPolicy(c.policy);
        await cp().api.request(
          'DELETE',
          `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/agentd-slot-0`,
        );
        const name = `rbac-${++n}`;
        await cp().kubelet.addNode(name);
        const a = await startClusterAgent(cp(), {
          name,
          waitConnected: c.role !== 'clusterRole' || c.index !== 0,
        });
        if (c.index !== 0 || c.role !== 'clusterRole') {
          await waitUntil('the Machine registered', async () => (await a.machine()) !== null, a.d);
        }
        if (c.role !== 'clusterRole') {
          // The fleet runtime loads a moment after the node joined ("the Kubernetes client is not loaded").
          await waitUntil(
            'the fleet runtime loaded',
            async () => !('error' in (await a.d.rpc('fleet.status'))),
            a.d,
          );
        }
        const answer = await c.act(a);
        await waitUntil(
          `a refusal naming ${String(c.names)}`,
          async () => c.names.test(await text(a, answer)),
          a.d,
        );
        await a.d.stop();
      } finally {
        const now = await cp().api.get(url);
        await cp().api.put(url, { ...now, rules: original.rules });
      }
    },
  );
});
