/** A failing HTTP check of the health gate names the proxy it went through. */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { proxyFromEnv } from '../../../src/config/proxy.js';
import type { AgentError } from '../../../src/errors.js';
import { HealthChecksSchema } from '../../../src/fleet/health-checks-schema.js';
import { createHealthGate } from '../../../src/fleet/health-gate.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createFakeClock } from '../host/fake-clock.js';

describe('an http check behind a proxy', () => {
  it('says, when it fails, which proxy it went through (HTTPS_PROXY & co.)', async () => {
    const g = createHealthGate({
      checks: () => null,
      node: () => ({ read: () => Promise.reject(new Error('the Node is not read: nodeReady is false')) }),
      exec: () => Promise.reject(new Error('exec not expected')),
      clock: createFakeClock(),
      logger: pino({ level: 'silent' }),
      metrics: createMetrics({ version: 't', collectDefaults: false }),
      httpGet: () => Promise.resolve(503),
      proxy: proxyFromEnv({ HTTP_PROXY: 'http://proxy.corp:3128', NO_PROXY: '.local.corp' }),
    });
    const checks = HealthChecksSchema.parse({
      nodeReady: false,
      checks: [
        { name: 'app', timeoutSeconds: 1, http: { url: 'http://app.corp:8080/healthz' } },
        { name: 'local', timeoutSeconds: 1, http: { url: 'http://svc.local.corp/healthz' } },
      ],
    });
    const err = await g
      .run(checks, { machine: 'kube2', kubernetesVersion: '1.35.0' }, new AbortController().signal)
      .then(
        () => null,
        (e: unknown) => e as AgentError,
      );
    expect(err?.code).toBe('HEALTH_GATE_FAILED');
    expect((err?.data.failed as Array<{ name: string; observed: string }>).map((c) => c.observed)).toEqual([
      'GET http://app.corp:8080/healthz: HTTP 503 (expected 200) (through the proxy http://proxy.corp:3128)',
      'GET http://svc.local.corp/healthz: HTTP 503 (expected 200)',
    ]);
  });
});
