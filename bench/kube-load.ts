/**
 * What agentd costs kube-apiserver, from kube-apiserver's own /metrics (test/support/control-plane:
 * etcd and kube-apiserver v1.34.4 built by scripts/control-plane.sh; no kube-controller-manager,
 * no audit log): `apiserver_request_total` by verb and resource, `apiserver_longrunning_requests`
 * (the watches open) and `process_cpu_seconds_total`, the API server process's CPU.
 *
 * Agents are the real assembly a node runs, in this process (test/support/fleet-agents.ts, as
 * test/cluster/fleet.test.ts runs them): each on its own simulated host, with its own bootstrap
 * token and deploy/rbac.yaml's rights, at agentd's default timing (leases, renewals, re-checks,
 * watch timeouts). The kubelet stand-in keeps 20 Nodes Ready throughout, at a kubelet's pace (a
 * Node's status every 5 minutes), and its own requests, which it counts, are taken out of every
 * window. Three windows, read as differences of the metrics at their ends:
 *
 * 1. **baseline**: no agent, `--idle-minutes` (default 10): the control plane's own requests
 *    (kube-apiserver's leases and endpoints) and CPU.
 * 2. **idle**: one agent, joined and settled (its watches open, its Machine reconciled), for as
 *    long: its requests are the window's less the baseline's rate.
 * 3. **rollout**: 20 agents, a repave of each at once (the Machines' repaveCounter, as a cluster
 *    asks it) under `maxConcurrent: 3`, until every Machine has acknowledged it and every agent is
 *    idle again: the window's requests less the baseline's rate and the bench's own (the 20
 *    patches and its one watch of the Machines), per agent.
 *
 * Prints tables of requests per agent per minute (idle), per agent and per minute (rollout) and
 * CPU seconds per agent. Asserts nothing.
 *
 *   scripts/control-plane.sh && npx tsx bench/kube-load.ts [--idle-minutes 10]
 *
 * The figures of docs/fleet.md come from the 10-minute default; a shorter run is for trying.
 */
import { rm } from 'node:fs/promises';
import os from 'node:os';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { startMirror, type Mirror } from '../src/sim/mirror/index.js';
import { controlPlaneBin } from '../test/support/control-plane/binaries.js';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane/index.js';
import {
  createJoinedTemplate,
  DownCounter,
  startFleetAgent,
  type FleetAgent,
  type FleetAgentIdentities,
} from '../test/support/fleet-agents.js';
import { renderTable } from './lib/table.js';

const NODES = 20;
const NS = 'agentd-system';
const MACHINES = '/apis/unbounded-cloud.io/v1alpha3/machines';

const { values: flags } = parseArgs({ options: { 'idle-minutes': { type: 'string', default: '10' } } });
const IDLE_MINUTES = Number(flags['idle-minutes']);
if (!(IDLE_MINUTES > 0))
  throw new Error(`--idle-minutes: expected a number of minutes > 0, got ${flags['idle-minutes']}`);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 300_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** One scrape of kube-apiserver's /metrics, reduced to what the bench reads. */
interface Scrape {
  at: number;
  /**
   * `apiserver_request_total` summed over codes, by `VERB resource[/subresource]`, less the
   * kubelet stand-in's requests so far (it counts them itself).
   */
  requests: Map<string, number>;
  /** `apiserver_longrunning_requests` of verb WATCH, by resource. */
  watches: Map<string, number>;
  cpuSeconds: number;
}

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return labels;
}

async function scrape(cp: ControlPlane): Promise<Scrape> {
  const res = await cp.api.request('GET', '/metrics');
  if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status}`);
  const s: Scrape = { at: Date.now(), requests: new Map(), watches: new Map(), cpuSeconds: Number.NaN };
  for (const line of res.text.split('\n')) {
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const [, name, labelText = '', value] = m;
    const l = labelsOf(labelText);
    if (name === 'apiserver_request_total' && l.resource) {
      const k = `${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ''}`;
      s.requests.set(k, (s.requests.get(k) ?? 0) + Number(value));
    } else if (name === 'apiserver_longrunning_requests' && l.verb === 'WATCH' && l.resource) {
      s.watches.set(l.resource, (s.watches.get(l.resource) ?? 0) + Number(value));
    } else if (name === 'process_cpu_seconds_total') {
      s.cpuSeconds = Number(value);
    }
  }
  for (const [k, v] of cp.kubelet.requests()) s.requests.set(k, (s.requests.get(k) ?? 0) - v);
  return s;
}

/** What one window of time cost, from the scrapes at its ends. */
interface Window {
  minutes: number;
  requests: Map<string, number>;
  cpuSeconds: number;
}

function windowOf(a: Scrape, b: Scrape): Window {
  const requests = new Map<string, number>();
  for (const [k, v] of b.requests) {
    const d = v - (a.requests.get(k) ?? 0);
    if (d !== 0) requests.set(k, d);
  }
  return { minutes: (b.at - a.at) / 60_000, requests, cpuSeconds: b.cpuSeconds - a.cpuSeconds };
}

/** `w`'s requests less the baseline's rate over as long, less `own`; by kind. */
function lessBaseline(w: Window, base: Window, own: Record<string, number> = {}): Map<string, number> {
  const out = new Map<string, number>();
  for (const k of new Set([...w.requests.keys(), ...base.requests.keys()])) {
    const v =
      (w.requests.get(k) ?? 0) - ((base.requests.get(k) ?? 0) * w.minutes) / base.minutes - (own[k] ?? 0);
    out.set(k, v);
  }
  return out;
}

const fmt = (n: number, digits = 2): string => (Math.abs(n) < 0.005 ? '0' : n.toFixed(digits));

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `agentd's load on kube-apiserver, ${new Date().toISOString()}`,
      `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; control plane ${controlPlaneBin()}`,
      `windows of ${IDLE_MINUTES} min (baseline, one idle agent), then a rollout of ${NODES} repaves (maxConcurrent 3)`,
    ].join('\n'),
  );
  // The stand-in at a kubelet's pace for a Node's status (every 5 min unchanged), and a look at the
  // pods every second (there are none): its requests are counted and taken out exactly, its CPU
  // is in every window alike.
  const cp = await startControlPlane({
    controllerManager: false,
    kubelet: { lookMs: 1_000, heartbeatMs: 300_000 },
  });
  let mirror: Mirror | null = null;
  let template: string | null = null;
  const agents: FleetAgent[] = [];
  try {
    mirror = await startMirror({ logger: pino({ level: 'silent' }) });
    template = await createJoinedTemplate(mirror);
    const names = Array.from({ length: NODES }, (_, i) => `node-${String(i).padStart(2, '0')}`);
    const tokens = new Map<string, string>();
    for (const name of names) {
      await cp.kubelet.addNode(name);
      const t = await cp.createBootstrapToken();
      tokens.set(name, t.token);
      // The Machine that names the node's token (deploy/node-restriction.yaml), as a Machine
      // controller makes it.
      await cp.api.create(MACHINES, {
        apiVersion: 'unbounded-cloud.io/v1alpha3',
        kind: 'Machine',
        metadata: { name },
        spec: { kubernetes: { bootstrapTokenRef: { name: `bootstrap-token-${t.id}` } } },
      });
    }
    await cp.api.create(`/api/v1/namespaces/${NS}/configmaps`, {
      metadata: { name: 'agentd-fleet' },
      data: { 'policy.yaml': 'maxConcurrent: 3\n' },
    });
    const identities: FleetAgentIdentities = {
      async identity(name) {
        return { kubeconfig: cp.tokenKubeconfig(tokens.get(name)!), revoke: () => undefined };
      },
    };
    const counter = new DownCounter();
    const start = (name: string): Promise<FleetAgent> =>
      startFleetAgent({ template: template!, name, identities, counter, timing: {} });
    /** Joined, watching, reconciled, the policy held, nothing running. */
    const settled = async (a: FleetAgent): Promise<boolean> => {
      const [status, fleet] = await Promise.all([a.rpc.call('status'), a.rpc.call('fleet.status')]);
      return (
        status.operation === null &&
        status.watcher?.connected === true &&
        status.watcher.lastReconcileAt !== null &&
        fleet.policy !== null
      );
    };

    // 1. The control plane alone (the stand-in keeps the 20 Nodes Ready meanwhile).
    await sleep(30_000);
    const b0 = await scrape(cp);
    await sleep(IDLE_MINUTES * 60_000);
    const b1 = await scrape(cp);
    const base = windowOf(b0, b1);

    // 2. One agent, idle.
    agents.push(await start(names[0]!));
    await until('the first agent to settle', () => settled(agents[0]!));
    // Its first requests (the join's lists and watches, the first status write) have landed.
    await sleep(30_000);
    const i0 = await scrape(cp);
    await sleep(IDLE_MINUTES * 60_000);
    const i1 = await scrape(cp);
    const idle = windowOf(i0, i1);
    const idleAgent = lessBaseline(idle, base);
    const openWatches = new Map<string, number>();
    for (const k of new Set([...i1.watches.keys(), ...b1.watches.keys()]))
      openWatches.set(k, (i1.watches.get(k) ?? 0) - (b1.watches.get(k) ?? 0));

    // 3. Twenty agents, a repave of each.
    agents.push(...(await Promise.all(names.slice(1).map(start))));
    await until('every agent to settle', async () => (await Promise.all(agents.map(settled))).every(Boolean));
    await sleep(30_000);
    const acked = new Map<string, number>();
    const watch = cp.api.watch(`${MACHINES}?watch=true`, (e) => {
      acked.set(
        e.object.metadata.name as string,
        (e.object.status?.operations?.repaveCounter as number) ?? 0,
      );
    });
    const r0 = await scrape(cp);
    for (const name of names) {
      await cp.api.mergePatch(`${MACHINES}/${name}`, { spec: { operations: { repaveCounter: 1 } } });
    }
    await until('every repave to be acknowledged', () => names.every((n) => acked.get(n) === 1), 900_000);
    await until('every agent to be idle again', async () =>
      (await Promise.all(agents.map(settled))).every(Boolean),
    );
    watch.stop();
    await watch.ended.catch(() => undefined);
    const r1 = await scrape(cp);
    const rollout = windowOf(r0, r1);
    // The bench's own: the 20 patches, its one watch (counted when it ends), and the two scrapes'
    // resource requests (none: /metrics is not a resource).
    const rolloutAgents = lessBaseline(rollout, base, { 'PATCH machines': NODES, 'WATCH machines': 1 });

    const kinds = (m: Map<string, number>): string[] =>
      [...m.keys()].filter((k) => Math.abs(m.get(k)!) >= 0.005).sort();
    console.log(
      `\nBaseline (no agent): ${fmt(base.minutes)} min, kube-apiserver CPU ${fmt(base.cpuSeconds)} s\n`,
    );
    console.log(
      renderTable(
        ['request', 'per minute'],
        kinds(base.requests).map((k) => [k, fmt(base.requests.get(k)! / base.minutes)]),
      ),
    );
    const idleCpu = idle.cpuSeconds - (base.cpuSeconds * idle.minutes) / base.minutes;
    console.log(
      `\nOne idle agent: ${fmt(idle.minutes)} min; kube-apiserver CPU ${fmt(idle.cpuSeconds)} s, ` +
        `${fmt(idleCpu)} s over the baseline (${fmt(idleCpu / idle.minutes, 3)} s/min)\n`,
    );
    console.log(
      renderTable(
        ['request', 'per agent per minute', 'in the window'],
        kinds(idleAgent).map((k) => [k, fmt(idleAgent.get(k)! / idle.minutes, 3), fmt(idleAgent.get(k)!, 1)]),
      ),
    );
    console.log('\nWatches the idle agent holds open (apiserver_longrunning_requests, less the baseline)\n');
    console.log(
      renderTable(
        ['resource', 'open'],
        kinds(openWatches).map((k) => [k, fmt(openWatches.get(k)!, 0)]),
      ),
    );
    const rolloutCpu = rollout.cpuSeconds - (base.cpuSeconds * rollout.minutes) / base.minutes;
    const total = [...rolloutAgents.values()].reduce((a, b) => a + b, 0);
    console.log(
      `\nRollout: ${NODES} repaves in ${fmt(rollout.minutes * 60, 0)} s; the agents' requests ${fmt(total, 0)} ` +
        `(${fmt(total / NODES, 1)} per agent); kube-apiserver CPU ${fmt(rollout.cpuSeconds)} s, ` +
        `${fmt(rolloutCpu)} s over the baseline (${fmt(rolloutCpu / NODES, 3)} s per agent)\n`,
    );
    console.log(
      renderTable(
        ['request', 'per agent', 'per agent per minute'],
        kinds(rolloutAgents).map((k) => [
          k,
          fmt(rolloutAgents.get(k)! / NODES, 2),
          fmt(rolloutAgents.get(k)! / NODES / rollout.minutes, 2),
        ]),
      ),
    );
  } finally {
    await Promise.all(agents.map((a) => a.stop()));
    await mirror?.close();
    await cp.stop();
    if (template) await rm(template, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
