/**
 * The dashboard (deploy/grafana/agentd.json) and the alert rules (deploy/prometheus) against a
 * real Prometheus (Debian's `prometheus` package) that scrapes a `--sim` daemon every second
 * while it joins and then switches over to another Kubernetes version.
 *
 * Every expression — each panel target, each variable query's selector, each rule — must:
 *  - parse and evaluate: Prometheus answers the query with `success`;
 *  - name only metrics this agentd exports: every metric name in it is in the daemon's /metrics;
 *  - select series. A panel's expression must return series over the run (a range query from
 *    the first scrape to the last, each second: the running-phase panel has series only while
 *    an update runs). An alert's expression is meant to be empty on a healthy node, so for
 *    alerts each of its vector selectors — the metric with the label matchers the rule puts on
 *    it, e.g. `agentd_repair_state{state="gave_up"}` — must return series instead: a misspelt
 *    name or label value selects nothing, and the alert could never fire. The rules are also
 *    loaded into Prometheus, which must evaluate every one without an error.
 *
 * Skipped when prometheus is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT, type TestDaemon } from '../support/daemon.js';
import { freePort, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';
import { SYSTEM_TESTS_REQUIRED, hasTool } from '../support/system-tools.js';
import { metricNames } from '../support/promql-names.js';

const available = hasTool('prometheus');
const JOB = 'agentd';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string; refId: string }[];
}
interface Dashboard {
  templating: { list: { name: string; type: string; query: unknown }[] };
  panels: Panel[];
}
interface Rule {
  alert: string;
  expr: string;
}

interface PromAnswer {
  status: string;
  error?: string;
  data?: { resultType: string; result: unknown[] };
}

describe.skipIf(!available && !SYSTEM_TESTS_REQUIRED)('dashboard and rules on a live Prometheus', () => {
  let daemon: TestDaemon | null = null;
  let prom: ChildProcess | null = null;
  let promLog = '';
  let dir = '';
  let base = '';
  let instance = '';
  /** Metric names in the daemon's /metrics (each family's, and a histogram's _bucket/_sum/_count). */
  const exported = new Set<string>();
  let start = 0;
  let end = 0;

  async function query(expr: string): Promise<PromAnswer> {
    const url = `${base}/api/v1/query_range?${new URLSearchParams({
      query: expr,
      start: String(start),
      end: String(end),
      step: '1',
    }).toString()}`;
    const res = await fetch(url);
    return (await res.json()) as PromAnswer;
  }

  beforeAll(async () => {
    if (!available)
      throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but prometheus (package prometheus) is not installed');
    const metricsPort = await freePort();
    instance = `127.0.0.1:${metricsPort}`;
    // Every host command of the simulated host takes 100 ms: an update lasts several seconds,
    // and the one-second scrapes see its phases run.
    daemon = await startSimDaemon({
      args: ['--metrics-address', instance],
      env: { AGENTD_SIM_FAULTS: 'latency=100:*' },
    });
    dir = path.join(os.tmpdir(), `agentd-prometheus-${process.pid}-${Date.now()}`);
    await mkdir(path.join(dir, 'data'), { recursive: true });
    await writeFile(
      path.join(dir, 'prometheus.yml'),
      [
        'global:',
        '  scrape_interval: 1s',
        '  evaluation_interval: 1s',
        'rule_files:',
        `  - ${path.join(REPO_ROOT, 'deploy/prometheus/agentd.rules.yaml')}`,
        'scrape_configs:',
        `  - job_name: ${JOB}`,
        '    static_configs:',
        `      - targets: ['${instance}']`,
        '',
      ].join('\n'),
    );
    const promPort = await freePort();
    base = `http://127.0.0.1:${promPort}`;
    prom = spawn(
      'prometheus',
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prom.stdout?.on('data', (c: Buffer) => (promLog += c.toString('utf8')));
    prom.stderr?.on('data', (c: Buffer) => (promLog += c.toString('utf8')));
    // A real process in real time: poll until it scrapes the daemon (bounded).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const up = await fetch(`${base}/api/v1/query?query=agentd_build_info`)
        .then((r) => r.json() as Promise<PromAnswer>)
        .catch(() => null);
      if ((up?.data?.result.length ?? 0) > 0) break;
      if (Date.now() > deadline || prom.exitCode !== null)
        throw new Error(`prometheus did not scrape agentd in 30 s:\n${promLog.slice(-3000)}`);
      await delay(200);
    }
    start = Math.floor(Date.now() / 1000) - 1;
    // Join (kube1), then a blue/green switch to kube2: operations, phases, a down window.
    expect((await updateAndWait(daemon)).state).toBe('succeeded');
    expect((await updateAndWait(daemon, { set: { kubernetesVersion: '1.35.0' } })).state).toBe('succeeded');
    // Wait until a scrape has seen the second update end, and then a few more scrapes.
    const seen = Date.now() + 30_000;
    for (;;) {
      const r = await fetch(
        `${base}/api/v1/query?query=${encodeURIComponent('agentd_operations_total{kind="update",result="succeeded"}')}`,
      ).then((x) => x.json() as Promise<PromAnswer>);
      const v = (r.data?.result[0] as { value?: [number, string] } | undefined)?.value?.[1];
      if (v === '2') break;
      if (Date.now() > seen) throw new Error(`prometheus never saw the second update end:\n${promLog}`);
      await delay(200);
    }
    await delay(3_000);
    end = Math.ceil(Date.now() / 1000);
    const body = await (await fetch(`http://${instance}/metrics`)).text();
    for (const m of body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      const [name, type] = [m[1]!, m[2]!];
      exported.add(name);
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) exported.add(name + s);
      if (type === 'summary') for (const s of ['_sum', '_count']) exported.add(name + s);
    }
  }, 120_000);

  afterAll(async () => {
    if (prom && prom.exitCode === null && prom.signalCode === null) {
      const exited = new Promise((r) => prom?.once('exit', r));
      prom.kill('SIGTERM');
      await Promise.race([exited, delay(10_000).then(() => prom?.kill('SIGKILL'))]);
    }
    await daemon?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A Grafana expression with its variables set for this node and a rate window. */
  function resolve(expr: string): string {
    return expr
      .replaceAll('$__rate_interval', '1m')
      .replaceAll('$__range', '5m')
      .replaceAll('$job', JOB)
      .replaceAll('$instance', instance);
  }

  /** Names in `expr` that the daemon does not export. */
  function unknownNames(expr: string): string[] {
    return metricNames(expr).filter((n) => !exported.has(n));
  }

  it('runs every panel of the dashboard: each parses, names exported metrics, and returns series', async () => {
    const dash = JSON.parse(
      await readFile(path.join(REPO_ROOT, 'deploy/grafana/agentd.json'), 'utf8'),
    ) as Dashboard;
    const targets = dash.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
    expect(targets.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const t of targets) {
      const expr = resolve(t.expr);
      const what = `panel "${t.panel}" ${t.refId}: ${expr}`;
      const names = metricNames(expr);
      if (names.length === 0) problems.push(`${what}: names no metric`);
      const unknown = unknownNames(expr);
      if (unknown.length > 0) problems.push(`${what}: not exported: ${unknown.join(', ')}`);
      const r = await query(expr);
      if (r.status !== 'success') problems.push(`${what}: ${r.error ?? r.status}`);
      else if ((r.data?.result.length ?? 0) === 0) problems.push(`${what}: no series`);
    }
    expect(problems).toEqual([]);
    // The node variable's query lists this node.
    const nodeVar = dash.templating.list.find((v) => v.name === 'instance');
    const q = (nodeVar?.query as { query: string }).query;
    const selector = /^label_values\((.*), instance\)$/.exec(q)?.[1];
    expect(selector, q).toBeTruthy();
    expect(unknownNames(resolve(selector!))).toEqual([]);
    const values = await fetch(
      `${base}/api/v1/label/instance/values?${new URLSearchParams({ 'match[]': resolve(selector!) }).toString()}`,
    ).then((x) => x.json() as Promise<{ data: string[] }>);
    expect(values.data).toEqual([instance]);
  });

  it('runs every rule: each parses, names exported metrics, and each of its selectors selects series', async () => {
    const file = parse(
      await readFile(path.join(REPO_ROOT, 'deploy/prometheus/agentd.rules.yaml'), 'utf8'),
    ) as { groups: { rules: Rule[] }[] };
    const rules = file.groups.flatMap((g) => g.rules);
    expect(rules.length).toBe(7);
    const problems: string[] = [];
    for (const rule of rules) {
      const r = await query(rule.expr);
      if (r.status !== 'success') problems.push(`${rule.alert}: ${r.error ?? r.status}`);
      const unknown = unknownNames(rule.expr);
      if (unknown.length > 0) problems.push(`${rule.alert}: not exported: ${unknown.join(', ')}`);
      const selectors = vectorSelectors(rule.expr);
      if (selectors.length === 0) problems.push(`${rule.alert}: no selector found in ${rule.expr}`);
      for (const s of selectors) {
        const sr = await query(s);
        if ((sr.data?.result.length ?? 0) === 0) problems.push(`${rule.alert}: ${s} selects no series`);
      }
    }
    expect(problems).toEqual([]);
    // Prometheus loaded the same rules and evaluates each without an error.
    const loaded = await fetch(`${base}/api/v1/rules`).then(
      (x) =>
        x.json() as Promise<{
          data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
        }>,
    );
    const evaluated = loaded.data.groups.flatMap((g) => g.rules);
    expect(evaluated.map((r) => r.name).sort()).toEqual(rules.map((r) => r.alert).sort());
    expect(evaluated.filter((r) => r.health !== 'ok')).toEqual([]);
  });

  it('the checks can fail: an unknown metric, a wrong label value and a bad expression are caught', async () => {
    expect(unknownNames('sum by (node) (kube_node_info) and on (instance) agentd_ready')).toEqual([
      'kube_node_info',
    ]);
    expect(unknownNames('up == 0')).toEqual(['up']);
    const wrongLabel = await query('agentd_repair_state{state="gaveup"}');
    expect(wrongLabel.status).toBe('success');
    expect(wrongLabel.data?.result).toEqual([]);
    expect((await query('sum by (kind (agentd_operations_total)')).status).toBe('error');
  });
});

/** The vector selectors of a rule expression: `name{matchers}` as written (no range, no offset). */
function vectorSelectors(expr: string): string[] {
  const out: string[] = [];
  for (const name of metricNames(expr)) {
    const at = new RegExp(`\\b${name}\\b(\\{[^}]*\\})?`).exec(expr);
    if (at) out.push(at[0]);
  }
  return out;
}
