/**
 * The rules of deploy/rbac.yaml as the fake API server's `FakeRole`, for one subject group: the
 * rules of every ClusterRole bound to it (everywhere) and of every Role bound to it (in its
 * namespace). For `system:nodes` the Node authorizer's part is added: a node's own Node, the pods
 * bound to it and their eviction (the fake does not restrict those to the node, as NodeRestriction
 * does; test/cluster/least-privilege.test.ts proves that part on the real API server). The
 * admission policies of deploy/node-restriction.yaml are not modelled either.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import type { FakeRole, FakeRule } from './fake-kube.js';

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs?: string[];
}

interface RbacDoc {
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  rules?: PolicyRule[];
  roleRef?: { kind: string; name: string };
  subjects?: Array<{ kind: string; name: string }>;
}

export type DeployGroup = 'system:nodes' | 'system:bootstrappers' | 'agentd:fleet-operators';

/** What the Node authorizer gives a node (the part agentd uses). */
const NODE_AUTHORIZER: FakeRule[] = [
  { verbs: ['get', 'list', 'watch', 'patch'], resources: ['nodes'], apiGroups: [''] },
  { verbs: ['list'], resources: ['pods'], apiGroups: [''] },
  { verbs: ['create'], resources: ['pods/eviction'], apiGroups: [''] },
];

export async function rolesOfDeployRbac(o: { group?: DeployGroup; user?: string } = {}): Promise<FakeRole> {
  const group = o.group ?? 'system:bootstrappers';
  const user = o.user ?? (group === 'system:nodes' ? 'system:node:worker-01' : 'system:bootstrap:abcdef');
  const text = await readFile(new URL('../../deploy/rbac.yaml', import.meta.url), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJS() as RbacDoc | null);
  const bound = new Set(
    docs
      .filter((d) => d?.kind === 'ClusterRoleBinding' || d?.kind === 'RoleBinding')
      .filter((d) => d?.subjects?.some((s) => s.kind === 'Group' && s.name === group))
      .map((d) => `${d?.roleRef?.kind}/${d?.metadata?.namespace ?? ''}/${d?.roleRef?.name}`),
  );
  const rules: FakeRule[] = group === 'system:nodes' ? [...NODE_AUTHORIZER] : [];
  for (const d of docs) {
    if (d?.kind !== 'ClusterRole' && d?.kind !== 'Role') continue;
    const ns = d.kind === 'Role' ? (d.metadata?.namespace ?? 'default') : '';
    if (!bound.has(`${d.kind}/${ns}/${d.metadata?.name}`)) continue;
    for (const r of d.rules ?? []) {
      rules.push({
        verbs: r.verbs ?? [],
        resources: r.resources ?? [],
        apiGroups: r.apiGroups ?? [],
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
        ...(d.kind === 'Role' ? { namespace: ns } : {}),
      });
    }
  }
  if (rules.length === 0) throw new Error(`deploy/rbac.yaml binds nothing to ${group}`);
  return { user, rules };
}
