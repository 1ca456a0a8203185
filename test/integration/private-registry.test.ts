/**
 * A private registry through the daemon: an image behind Basic auth (a front in this test that
 * answers only with the right credentials, the sim mirror behind it) is refused while the
 * `--registry-auth-file` has no credentials for it, with the host left as it was, and pulled
 * once the file has them, with no restart (docs/operations.md, "Private registries").
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { simDefaultConfig, SIM_IMAGE_REPOSITORY } from '../../src/sim/default-config.js';
import { makeTempDir } from '../support/daemon.js';
import { startMirrorFront } from '../support/holding-registry.js';
import { SimNode } from '../support/sim-node.js';

const CREDENTIALS = 'robot:s3cret-pw';

/** A registry that answers only Basic `CREDENTIALS`, in front of the sim mirror on `mirrorPort`. */
function startPrivateRegistry(mirrorPort: number): Promise<string> {
  const expected = `Basic ${Buffer.from(CREDENTIALS).toString('base64')}`;
  return startMirrorFront(mirrorPort, (req, res) => {
    if (req.headers.authorization === expected) return false;
    res.writeHead(401, { 'www-authenticate': 'Basic realm="private"' }).end();
    return true;
  });
}

describe('a private registry', () => {
  it('is refused without credentials, naming the auth file, and pulled once the file has them', async () => {
    const node = new SimNode(await makeTempDir());
    const authFile = path.join(node.dir, 'registry-auth.json');
    await node.start({ args: ['--registry-auth-file', authFile] });
    const { port } = JSON.parse(await readFile(path.join(node.stateDir, 'sim-mirror.json'), 'utf8')) as {
      port: number;
    };
    const registry = await startPrivateRegistry(port);
    const config = {
      ...simDefaultConfig({ url: `http://127.0.0.1:${port}`, hostPort: `127.0.0.1:${port}` }),
      OCIImage: `${registry}/${SIM_IMAGE_REPOSITORY}:v1`,
    };

    const refused = await node.update({ config, wait: true });
    expect(refused.state).toBe('failed');
    expect(refused.error?.code).toBe('IMAGE_PULL_FAILED');
    expect(refused.error?.message).toContain(
      `agentd pulled anonymously: ${authFile} has no credentials for ${registry}`,
    );
    expect((await node.status()).node.activeMachine).toBeNull();

    await writeFile(
      authFile,
      JSON.stringify({ auths: { [registry]: { auth: Buffer.from(CREDENTIALS).toString('base64') } } }),
      { mode: 0o600 },
    );
    const joined = await node.update({ config, wait: true });
    expect(joined.state, JSON.stringify(joined.error)).toBe('succeeded');
    expect((await node.readVerifiedApplied('kube1')).OCIImage).toBe(config.OCIImage);
    expect(node.daemon?.logs()).not.toContain('s3cret');
    await node.stop();
  });
});
