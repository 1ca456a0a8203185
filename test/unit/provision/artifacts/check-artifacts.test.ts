import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkArtifacts } from '../../../../src/provision/artifacts/check-artifacts.js';
import { fakeClock, mirrorConfig, startMirror, testDispatcher, type TestMirror } from './helpers.js';
import { expectBackoff } from '../../../support/backoff.js';

let mirror: TestMirror;
let dispatcher: ReturnType<typeof testDispatcher>;

beforeEach(async () => {
  mirror = await startMirror();
  dispatcher = testDispatcher();
});

afterEach(async () => {
  await dispatcher.close();
  await mirror.close();
});

describe('checkArtifacts', () => {
  it('HEADs every artifact and checksum URL and downloads nothing', async () => {
    const checks = await checkArtifacts(mirrorConfig(mirror.baseUrl), 'amd64', {
      dispatcher,
      clock: fakeClock().clock,
    });
    expect(checks.map((c) => c.name)).toEqual([
      'artifact:kubelet',
      'artifact:kubectl',
      'artifact:kube-proxy',
      'artifact:crictl',
      'artifact:containerd',
      'artifact:runc',
      'artifact:cni-plugins',
    ]);
    expect(checks.every((c) => c.ok)).toBe(true);
    expect(checks[0]!.message).toContain('/dl.k8s.io/v1.34.0/bin/linux/amd64/kubelet');
    expect(mirror.requests).toHaveLength(14);
    expect(new Set(mirror.requests.map((r) => r.method))).toEqual(new Set(['HEAD']));
  });

  it('reports a version missing from the mirror as a failed check with the status', async () => {
    const config = mirrorConfig(mirror.baseUrl, { CNI: { PluginVersion: '99.1.0' } });
    const checks = await checkArtifacts(config, 'amd64', { dispatcher, clock: fakeClock().clock });
    const cni = checks.find((c) => c.name === 'artifact:cni-plugins')!;
    expect(cni.ok).toBe(false);
    expect(cni.message).toContain('404');
    expect(cni.message).toContain('cni-plugins-linux-amd64-v99.1.0.tgz');
    expect(checks.filter((c) => !c.ok)).toHaveLength(1);
  });

  it('reports a checksum URL that fails, retrying a 5xx once', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: /runc\.sha256sum$/, kind: 'status', status: 502 });
    const checks = await checkArtifacts(mirrorConfig(mirror.baseUrl), 'amd64', { dispatcher, clock });
    const runc = checks.find((c) => c.name === 'artifact:runc')!;
    expect(runc.ok).toBe(false);
    expect(runc.message).toContain('502');
    expectBackoff(sleeps, [500]);
  });

  it('an unreachable mirror is a failed check, not an exception', async () => {
    const base = mirror.baseUrl;
    await mirror.close();
    const checks = await checkArtifacts(mirrorConfig(base), 'amd64', {
      dispatcher,
      clock: fakeClock().clock,
      retries: 0,
    });
    expect(checks.every((c) => !c.ok)).toBe(true);
    expect(checks[0]!.message).toContain(base);
    mirror = await startMirror();
  });

  it('throws CANCELLED when the caller aborts', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      checkArtifacts(mirrorConfig(mirror.baseUrl), 'amd64', { dispatcher, signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'CANCELLED' });
  });
});
