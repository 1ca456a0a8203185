/**
 * deploy/prometheus and deploy/grafana as files: the PrometheusRule carries exactly the rules of
 * agentd.rules.yaml, every alert has its runbook entry in docs/operations.md ("Alerts") and a
 * promtool test that expects it to fire, and the dashboard has the fleet and the node views.
 * What the expressions select is checked against a real Prometheus (test/system/).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const read = (p: string): Promise<string> => readFile(path.join(REPO_ROOT, p), 'utf8');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  groups: { name: string; rules: Rule[] }[];
}

async function rules(): Promise<Rule[]> {
  const file = parse(await read('deploy/prometheus/agentd.rules.yaml')) as RuleFile;
  return file.groups.flatMap((g) => g.rules);
}

/** The alert names of the "Alerts" section of docs/operations.md (its `#### Name` headings). */
async function runbookEntries(): Promise<Map<string, string>> {
  const text = await read('docs/operations.md');
  const section = /\n### Alerts\n([\s\S]*?)(?=\n### |\n## )/.exec(text)?.[1] ?? '';
  const entries = new Map<string, string>();
  for (const m of section.matchAll(/\n#### `(\w+)`\n([\s\S]*?)(?=\n#### |$)/g)) entries.set(m[1]!, m[2]!);
  return entries;
}

describe('deploy/prometheus', () => {
  it('the PrometheusRule holds the rule file’s groups, unchanged', async () => {
    const plain = parse(await read('deploy/prometheus/agentd.rules.yaml')) as RuleFile;
    const manifest = parse(await read('deploy/prometheus/agentd.prometheusrule.yaml')) as {
      apiVersion: string;
      kind: string;
      metadata: { name: string };
      spec: RuleFile;
    };
    expect(manifest.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(manifest.kind).toBe('PrometheusRule');
    expect(manifest.metadata.name).toBe('agentd');
    expect(manifest.spec).toEqual(plain);
  });

  it('covers what docs/operations.md promises an alert for', async () => {
    const names = (await rules()).map((r) => r.alert);
    expect(names).toEqual([
      'AgentdNodeNotServing',
      'AgentdUpdateFailed',
      'AgentdUpdateRolledBack',
      'AgentdOperationPhaseTooLong',
      'AgentdWatcherDisconnected',
      'AgentdFleetHalted',
      'AgentdRepairGaveUp',
    ]);
  });

  it('gives every alert a severity, a summary and the runbook entry it names, and docs/operations.md has one per alert', async () => {
    const entries = await runbookEntries();
    const all = await rules();
    expect([...entries.keys()].sort()).toEqual(all.map((r) => r.alert).sort());
    for (const r of all) {
      expect(['warning', 'critical'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.runbook, r.alert).toBe(`docs/operations.md, 'Alerts', ${r.alert}`);
      const entry = entries.get(r.alert) ?? '';
      // The entry says what the alert means and what to do, and quotes its expression.
      expect(entry, r.alert).toMatch(/\*\*What to do\.\*\*/);
      expect(entry, r.alert).toContain(r.expr);
    }
  });

  it('has a promtool test that expects each alert to fire', async () => {
    const dir = 'deploy/prometheus/tests';
    const files = (await readdir(path.join(REPO_ROOT, dir))).filter((f) => f.endsWith('.yaml'));
    expect(files.length).toBeGreaterThan(0);
    const firing = new Set<string>();
    for (const f of files) {
      const doc = parse(await read(`${dir}/${f}`)) as {
        tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
      };
      for (const t of doc.tests)
        for (const a of t.alert_rule_test ?? []) if (a.exp_alerts.length > 0) firing.add(a.alertname);
    }
    expect([...firing].sort()).toEqual((await rules()).map((r) => r.alert).sort());
  });
});

describe('deploy/grafana/agentd.json', () => {
  it('has a job and a node variable, a fleet row and a node row, and a query in every panel', async () => {
    const dash = JSON.parse(await read('deploy/grafana/agentd.json')) as {
      uid: string;
      templating: { list: { name: string; type: string }[] };
      panels: { type: string; title: string; targets?: { expr: string }[] }[];
    };
    expect(dash.uid).toBe('agentd');
    expect(dash.templating.list.map((v) => v.name)).toEqual(['datasource', 'job', 'instance']);
    const rows = dash.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual(['Fleet', 'Node $instance']);
    const panels = dash.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(10);
    for (const p of panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) expect(t.expr, p.title).toMatch(/agentd_|process_/);
    }
    // The node row's panels select the chosen node.
    const nodeRow = dash.panels.findIndex((p) => p.title === 'Node $instance');
    for (const p of dash.panels.slice(nodeRow + 1))
      for (const t of p.targets ?? []) expect(t.expr, p.title).toContain('instance=~"$instance"');
  });
});
