/**
 * Issue 3 against real components: Debian's docker-registry (distribution 2.x) on 127.0.0.1
 * holds a test image pushed by skopeo; the daemon's `update` must provision `kube1` from that
 * real registry — a registry agentd's code did not write — and verify and commit it.
 * Skipped when docker-registry or skopeo is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostArch } from '../../src/provision/provisioner.js';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { writeOciLayout } from '../../src/sim/mirror/oci-image.js';
import {
  BUSYBOX,
  REGISTRY_BIN,
  SYSTEM_TESTS_REQUIRED,
  appliedConfigPath,
  busyboxImage,
  hasTool,
  mirrorAgentConfig,
  nodeStatus,
  rpcResult,
  sha256Hex,
  skopeoPush,
  startDockerRegistry,
  startSimDaemon,
  updateAndWait,
  type RealRegistry,
} from '../support/provision-fixtures.js';

const run = promisify(execFile);
const available = hasTool(REGISTRY_BIN) && hasTool('skopeo') && hasTool(BUSYBOX);

describe.skipIf(!available && !SYSTEM_TESTS_REQUIRED)(
  'provision from a real registry (docker-registry + skopeo)',
  () => {
    let dir: string;
    let registry: RealRegistry | undefined;
    let mirror: Mirror | undefined;
    const image = busyboxImage();
    const arch = hostArch();

    beforeAll(async () => {
      if (!available) {
        throw new Error(
          `AGENTD_REQUIRE_SYSTEM_TESTS=1 but ${REGISTRY_BIN}, skopeo or ${BUSYBOX} is missing (packages docker-registry, skopeo, busybox-static)`,
        );
      }
      dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-registry-provision-'));
      registry = await startDockerRegistry(dir);
      const layout = path.join(dir, 'layout');
      await writeOciLayout(layout, image, { tag: 'v1' });
      await skopeoPush(dir, layout, 'v1', `${registry.host}/agentd/rootfs:v1`);
      // Artifacts still come from a mirror: only the image is on the real registry.
      mirror = await startMirror();
    });

    afterAll(async () => {
      await mirror?.close();
      await registry?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('the daemon joins kube1 with the rootfs pulled from the registry', async () => {
      const d = await startSimDaemon();
      const config = mirrorAgentConfig(mirror as Mirror, { OCIImage: `${registry?.host}/agentd/rootfs:v1` });

      const op = await updateAndWait(d, { config });
      expect(op, `${JSON.stringify(op.error)}\n${registry?.logs()}`).toMatchObject({
        state: 'succeeded',
        to: 'kube1',
      });
      expect(op.result).toMatchObject({ imageDigest: image.manifests[arch].digest });

      const rootfs = path.join(d.root, 'var/lib/machines/kube1');
      expect(await readFile(path.join(rootfs, 'etc/agentd-image-arch'), 'utf8')).toBe(`${arch}\n`);
      expect(sha256Hex(await readFile(path.join(rootfs, 'bin/busybox')))).toBe(
        sha256Hex(await readFile(BUSYBOX)),
      );
      const { stdout } = await run(path.join(rootfs, 'usr/local/bin/kubelet'), ['--version']);
      expect(stdout.trim()).toBe('Kubernetes v1.34.0');

      const status = await nodeStatus(d);
      expect(status.node).toMatchObject({
        activeMachine: 'kube1',
        applied: { image: `${registry?.host}/agentd/rootfs:v1` },
      });
      expect(status.node.machines[0]).toEqual({ name: 'kube1', state: 'running', kubelet: 'active' });
      const applied = await rpcResult<{ verified: boolean; hash: string }>(d, 'config.get');
      expect(applied.verified).toBe(true);
      expect(applied.hash).toBe(sha256Hex(await readFile(appliedConfigPath(d.root, 'kube1'))));
      await d.stop();
    });

    it('preflight resolves the image on the registry and reports an unknown tag', async () => {
      const d = await startSimDaemon();
      const base = mirrorAgentConfig(mirror as Mirror, { OCIImage: `${registry?.host}/agentd/rootfs:v1` });
      const ok = await rpcResult<{ checks: Array<{ name: string; ok: boolean; message: string }> }>(
        d,
        'preflight',
        { config: base },
      );
      expect(ok.checks.find((c) => c.name === 'image')).toMatchObject({ ok: true });
      expect(ok.checks.find((c) => c.name === 'image')?.message).toContain(image.index.digest);

      const missing = await rpcResult<{ checks: Array<{ name: string; ok: boolean; message: string }> }>(
        d,
        'preflight',
        { config: { ...base, OCIImage: `${registry?.host}/agentd/rootfs:nope` } },
      );
      expect(missing.checks.find((c) => c.name === 'image')).toMatchObject({ ok: false });
      expect(missing.checks.find((c) => c.name === 'image')?.message).toContain('agentd/rootfs:nope');
      await d.stop();
    });
  },
);

/**
 * A registry agentd's code did not write, with auth: docker-registry with an htpasswd file (its
 * Basic auth; the hash made by htpasswd, package apache2-utils). The daemon's preflight is refused
 * while its registry auth file has no credentials, passes once it has them (read at each pull,
 * no restart), and the join pulls with them.
 */
const authAvailable = available && hasTool('htpasswd');

describe.skipIf(!authAvailable && !SYSTEM_TESTS_REQUIRED)(
  'provision from a real registry with htpasswd auth (docker-registry + skopeo + htpasswd)',
  () => {
    let dir: string;
    let registry: RealRegistry | undefined;
    let mirror: Mirror | undefined;
    const image = busyboxImage();

    beforeAll(async () => {
      if (!authAvailable) {
        throw new Error(
          `AGENTD_REQUIRE_SYSTEM_TESTS=1 but ${REGISTRY_BIN}, skopeo, ${BUSYBOX} or htpasswd is missing (packages docker-registry, skopeo, busybox-static, apache2-utils)`,
        );
      }
      dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-registry-auth-'));
      const htpasswd = path.join(dir, 'htpasswd');
      await writeFile(htpasswd, (await run('htpasswd', ['-Bbn', 'robot', 's3cret-pw'])).stdout);
      registry = await startDockerRegistry(dir, { htpasswd });
      const layout = path.join(dir, 'layout');
      await writeOciLayout(layout, image, { tag: 'v1' });
      await skopeoPush(dir, layout, 'v1', `${registry.host}/agentd/private:v1`, 'robot:s3cret-pw');
      mirror = await startMirror();
    });

    afterAll(async () => {
      await mirror?.close();
      await registry?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('is refused without credentials, naming the file, and joined once the auth file has them', async () => {
      const authFile = path.join(dir, 'registry-auth.json');
      const d = await startSimDaemon({ args: ['--registry-auth-file', authFile] });
      const config = mirrorAgentConfig(mirror as Mirror, { OCIImage: `${registry?.host}/agentd/private:v1` });
      const imageCheck = async () =>
        (
          await rpcResult<{ checks: Array<{ name: string; ok: boolean; message: string }> }>(d, 'preflight', {
            config,
          })
        ).checks.find((c) => c.name === 'image');

      const refused = await imageCheck();
      expect(refused?.ok).toBe(false);
      expect(refused?.message).toContain(
        `agentd pulled anonymously: ${authFile} has no credentials for ${registry?.host}`,
      );

      await writeFile(
        authFile,
        JSON.stringify({
          auths: { [`${registry?.host}`]: { auth: Buffer.from('robot:wrong').toString('base64') } },
        }),
      );
      expect((await imageCheck())?.message).toContain(
        `(as robot, the credentials for ${registry?.host} in ${authFile})`,
      );

      await writeFile(
        authFile,
        JSON.stringify({
          auths: { [`${registry?.host}`]: { auth: Buffer.from('robot:s3cret-pw').toString('base64') } },
        }),
      );
      expect(await imageCheck()).toMatchObject({ ok: true });
      const op = await updateAndWait(d, { config });
      expect(op, `${JSON.stringify(op.error)}\n${registry?.logs()}`).toMatchObject({
        state: 'succeeded',
        to: 'kube1',
      });
      expect(d.logs()).not.toContain('s3cret');
      await d.stop();
    });
  },
);
