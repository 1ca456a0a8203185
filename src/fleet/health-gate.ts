/**
 * The health gate (docs/fleet.md, "The health gate"): after `verify`, an update commits only when the
 * Node is `Ready` and reports the target kubelet version, and every check of the fleet policy's
 * `healthChecks` passes — each retried with the one backoff policy, on the injected clock, until
 * its own timeout. The checks run side by side; the gate passes only when all of them do.
 */
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { loadUndici } from '../lazy-undici.js';
import type { OutboundProxy } from '../config/proxy.js';
import { outboundDispatcher, viaProxy } from '../outbound-http.js';
import { CancelledError, HealthGateFailedError, describeError } from '../errors.js';
import type { HealthGate as EngineHealthGate, HealthGateTarget } from '../engine/update.js';
import type { Clock, CommandResult, MachineName } from '../host/types.js';
import type { NodeHealth } from '../kube/node-health.js';
import type { Metrics } from '../metrics/metrics.js';
import { Backoff, sleepOrCancel } from '../retry/backoff.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { ExecCheck, HealthChecks, HttpCheck } from './health-checks-schema.js';

/** The check name the Node part of the gate reports under (metrics, results). */
export const NODE_READY_CHECK = 'node-ready';

/** Between two attempts of one check: 1 s doubling to 10 s, jittered (capped by the deadline). */
export const HEALTH_CHECK_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 1_000, maxMs: 10_000 });

/** One attempt may take at most this long, and what is left of the check's timeout... */
const ATTEMPT_MAX_MS = 10_000;
/** ...but at least this long: the last attempt, made at the deadline, still gets a fair chance. */
const ATTEMPT_MIN_MS = 2_000;
/** What an exec check's output may contribute to `observed`. */
const OUTPUT_CLIP = 300;

/** Reads this node's Node object; absent when agentd has no Kubernetes credentials. */
export type NodeHealthSource =
  { read: (signal: AbortSignal) => Promise<NodeHealth> } | { unavailable: string };

/** Run `argv` inside machine `m` (systemd-run --machine=<m> --pipe --wait …); never rejects on exit codes. */
export type MachineExec = (
  m: MachineName,
  argv: readonly string[],
  options: { timeoutMs: number; signal: AbortSignal },
) => Promise<CommandResult>;

/** GET `url` from the host and return the status code. */
export type HttpGet = (url: string, options: { timeoutMs: number; signal: AbortSignal }) => Promise<number>;

export interface HealthGateOptions {
  /** The fleet policy's `healthChecks` of the moment; null: no fleet policy, no gate. */
  checks: () => HealthChecks | null;
  /** This node's Node object, looked up at each gate (credentials appear when the node joins). */
  node: () => NodeHealthSource;
  exec: MachineExec;
  clock: Clock;
  logger: Logger;
  metrics: Pick<Metrics, 'healthGateChecks'>;
  /** Default: an undici GET that reads and discards the body. */
  httpGet?: HttpGet;
  /**
   * The proxy a failing check names (a test seam, with its own `httpGet`); default: the process's,
   * which `undiciGet` goes through (src/outbound-http.ts).
   */
  proxy?: OutboundProxy;
  backoff?: BackoffPolicy;
}

/** How one check ended. */
export interface HealthCheckResult {
  name: string;
  kind: 'node-ready' | 'http' | 'exec';
  ok: boolean;
  attempts: number;
  timeoutSeconds: number;
  /** What the last attempt saw (`HTTP 500`, `exit code 1: …`, `Ready=False: KubeletNotReady`). */
  observed: string;
}

/** The gate's report: every check, plus warnings for parts it could not run. */
export interface HealthGateReport {
  checks: HealthCheckResult[];
  warnings: string[];
}

export type { HealthGateTarget };

/** The engine's seam, plus `run` with an explicit policy (tests, and `prepare` itself). */
export interface HealthGate extends EngineHealthGate {
  /** Run `policy` against the target; resolves with the report when all pass, else HEALTH_GATE_FAILED. */
  run(policy: HealthChecks, target: HealthGateTarget, signal: AbortSignal): Promise<HealthGateReport>;
}

/** An attempt's verdict. */
interface Probe {
  ok: boolean;
  observed: string;
}

const stripV = (v: string): string => v.replace(/^v/, '');

let checkDispatcher: Promise<Dispatcher> | undefined;

/**
 * The default HTTP GET: undici under the process's proxy (src/outbound-http.ts), the body read
 * and discarded, bounded by `timeoutMs`.
 */
export const undiciGet: HttpGet = async (url, { timeoutMs, signal }) => {
  const { request } = await loadUndici();
  checkDispatcher ??= outboundDispatcher({});
  const res = await request(url, {
    dispatcher: await checkDispatcher,
    method: 'GET',
    signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  await res.body.text();
  return res.statusCode;
};

/** Judge a Node against the target version: Ready=True and the kubelet reporting that version. */
export function judgeNode(node: NodeHealth, kubernetesVersion: string): Probe {
  if (!node.ready)
    return { ok: false, observed: `Node ${node.name} is not Ready (Ready=${node.readyCondition})` };
  if (node.kubeletVersion === null)
    return { ok: false, observed: `Node ${node.name} reports no kubelet version yet` };
  if (stripV(node.kubeletVersion) !== stripV(kubernetesVersion))
    return {
      ok: false,
      observed: `Node ${node.name} is Ready but reports kubelet ${node.kubeletVersion}, not v${stripV(kubernetesVersion)}`,
    };
  return { ok: true, observed: `Node ${node.name} is Ready with kubelet ${node.kubeletVersion}` };
}

function clipOutput(text: string): string {
  const t = text.trim().replace(/\s+/g, ' ');
  return t.length <= OUTPUT_CLIP ? t : `${t.slice(0, OUTPUT_CLIP - 1)}…`;
}

export function createHealthGate(o: HealthGateOptions): HealthGate {
  const { clock } = o;
  const httpGet = o.httpGet ?? undiciGet;
  const policyBackoff = o.backoff ?? HEALTH_CHECK_BACKOFF;
  const log = o.logger.child({ subsystem: 'health-gate' });

  /**
   * Probe until it passes or `timeoutSeconds` have gone by on the clock. A probe that throws is a
   * failed attempt (its message is what was seen), except a cancellation, which ends the gate.
   */
  async function until(
    name: string,
    kind: HealthCheckResult['kind'],
    timeoutSeconds: number,
    signal: AbortSignal,
    probe: (attemptMs: number) => Promise<Probe>,
  ): Promise<HealthCheckResult> {
    const deadline = clock.now() + timeoutSeconds * 1000;
    const backoff = new Backoff(policyBackoff);
    let attempts = 0;
    let last: Probe = { ok: false, observed: 'not checked yet' };
    for (;;) {
      if (signal.aborted) throw new CancelledError(`health check ${name}`, { cause: signal.reason });
      attempts += 1;
      const attemptMs = Math.min(ATTEMPT_MAX_MS, Math.max(ATTEMPT_MIN_MS, deadline - clock.now()));
      try {
        last = await probe(attemptMs);
      } catch (err) {
        if (signal.aborted || err instanceof CancelledError) throw err;
        last = { ok: false, observed: describeError(err) };
      }
      if (last.ok) break;
      const left = deadline - clock.now();
      if (left <= 0) break;
      await sleepOrCancel(clock, Math.min(backoff.next(), left), signal, `health check ${name}`);
    }
    o.metrics.healthGateChecks.inc({ check: name, result: last.ok ? 'pass' : 'fail' });
    const result: HealthCheckResult = {
      name,
      kind,
      ok: last.ok,
      attempts,
      timeoutSeconds,
      observed: last.observed,
    };
    log[last.ok ? 'info' : 'warn'](
      { check: name, ok: last.ok, attempts, observed: last.observed },
      'health check',
    );
    return result;
  }

  function httpProbe(check: HttpCheck, signal: AbortSignal) {
    return async (attemptMs: number): Promise<Probe> => {
      // A check that goes through the proxy (HTTPS_PROXY & co.) says so when it fails.
      const via = viaProxy(check.http.url, o.proxy);
      let status: number;
      try {
        status = await httpGet(check.http.url, { timeoutMs: attemptMs, signal });
      } catch (err) {
        if (signal.aborted || err instanceof CancelledError) throw err;
        return { ok: false, observed: `GET ${check.http.url}${via}: ${describeError(err)}` };
      }
      const ok = status === check.http.expectStatus;
      return {
        ok,
        observed: `GET ${check.http.url}: HTTP ${status}${ok ? '' : ` (expected ${check.http.expectStatus})${via}`}`,
      };
    };
  }

  function execProbe(check: ExecCheck, machine: MachineName, signal: AbortSignal) {
    return async (attemptMs: number): Promise<Probe> => {
      const r = await o.exec(machine, check.exec.command, { timeoutMs: attemptMs, signal });
      if (r.exitCode === 0) return { ok: true, observed: `exit code 0 in ${machine}` };
      const out = clipOutput(r.stderr || r.stdout);
      return { ok: false, observed: `exit code ${r.exitCode} in ${machine}${out ? `: ${out}` : ''}` };
    };
  }

  const gate: HealthGate = {
    prepare() {
      // The policy is read once per update: a policy change during the gate applies to the next one.
      const policy = o.checks();
      if (policy === null) return null;
      return async (target, signal) => ({ ...(await gate.run(policy, target, signal)) });
    },
    async run(policy, target, signal) {
      const warnings: string[] = [];
      const runs: Array<Promise<HealthCheckResult>> = [];
      if (policy.nodeReady) {
        const source = o.node();
        if ('unavailable' in source) {
          // No credentials means no cluster to read a policy from either: say so, and gate on the rest.
          const why = `nodeReady was not checked: the Kubernetes API is not available (${source.unavailable})`;
          warnings.push(why);
          log.warn({ reason: source.unavailable }, 'health gate: nodeReady not checked');
        } else {
          runs.push(
            until(NODE_READY_CHECK, 'node-ready', policy.nodeReadyTimeoutSeconds, signal, async () =>
              judgeNode(await source.read(signal), target.kubernetesVersion),
            ),
          );
        }
      }
      for (const check of policy.checks) {
        const probe = 'http' in check ? httpProbe(check, signal) : execProbe(check, target.machine, signal);
        runs.push(until(check.name, 'http' in check ? 'http' : 'exec', check.timeoutSeconds, signal, probe));
      }
      const settled = await Promise.allSettled(runs);
      const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (rejected)
        throw rejected.reason instanceof Error ? rejected.reason : new Error(String(rejected.reason));
      const checks = settled.map((s) => (s as PromiseFulfilledResult<HealthCheckResult>).value);
      const failed = checks.filter((c) => !c.ok);
      if (failed.length > 0) {
        throw new HealthGateFailedError(
          `health gate for machine ${target.machine} failed: ${failed.map((c) => `${c.name}: ${c.observed}`).join('; ')}`,
          { data: { machine: target.machine, failed, checks, ...(warnings.length > 0 ? { warnings } : {}) } },
        );
      }
      return { checks, warnings };
    },
  };
  return gate;
}
