/**
 * The rules of deploy/rbac.yaml as the fake API server's `FakeRole`: the ClusterRole's rules
 * everywhere, each Role's rules in its namespace. A test token bound to them has exactly the rights
 * a node gets from the manifests.
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

export async function rolesOfDeployRbac(user = 'system:bootstrap:abcdef'): Promise<FakeRole> {
  const text = await readFile(new URL('../../deploy/rbac.yaml', import.meta.url), 'utf8');
  const rules: FakeRule[] = [];
  for (const doc of parseAllDocuments(text)) {
    const o = doc.toJS() as { kind?: string; metadata?: { namespace?: string }; rules?: PolicyRule[] } | null;
    if (o?.kind !== 'ClusterRole' && o?.kind !== 'Role') continue;
    for (const r of o.rules ?? []) {
      rules.push({
        verbs: r.verbs ?? [],
        resources: r.resources ?? [],
        apiGroups: r.apiGroups ?? [],
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
        ...(o.kind === 'Role' ? { namespace: o.metadata?.namespace ?? 'default' } : {}),
      });
    }
  }
  return { user, rules };
}
