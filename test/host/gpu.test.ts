/**
 * A GPU host on real systemd, with no GPU: device nodes made with mknod in the test host
 * (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/dri/card0`), stand-in driver libraries (empty shared
 * objects with the driver's sonames) in the host's linker cache, and a machine image with a
 * stand-in `nvidia-ctk`. The join binds the devices and the library directory, and inside the
 * booted machine the setup unit has linked the libraries, updated ldconfig's cache and
 * generated the CDI spec before containerd started, and containerd loaded the nvidia runtime's
 * drop-in over its config.toml.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile, copyFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTAINERD_LOADED_CONFIG } from '../../src/sim/mirror/artifact-content.js';
import { type OperationJson } from '../support/real-host/assert-node.js';
import { startRealNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';
import { SYSTEM_TESTS_REQUIRED, hasTool } from '../support/system-tools.js';

const run = promisify(execFile);
const LIB_DIR = '/opt/nvidia/lib';
const LIBS = ['libcuda.so.1', 'libnvidia-ml.so.1'];

// The stand-in libraries are compiled with cc (build-essential); CI has it.
const canRun = requireRealHost() && (hasTool('cc') || SYSTEM_TESTS_REQUIRED);

describe.skipIf(!canRun)('a GPU host on real systemd', { timeout: 240_000 }, () => {
  let node: RealNode;
  let work: string;

  const inMachine = async (argv: string[]): Promise<string> =>
    (await node.host.execOk(['systemd-run', '--machine=kube1', '--pipe', '--wait', ...argv])).stdout;

  beforeAll(async () => {
    node = await startRealNode({ label: 'gpu' });
    await node.waitReady();
    // Stand-in driver libraries: empty shared objects carrying the driver's sonames.
    work = await mkdtemp(path.join(os.tmpdir(), 'agentd-gpu-libs-'));
    await writeFile(path.join(work, 'empty.c'), 'int agentd_stand_in;\n');
    await mkdir(node.host.outside(LIB_DIR), { recursive: true });
    for (const lib of LIBS) {
      await run('cc', [
        '-shared',
        '-fPIC',
        `-Wl,-soname,${lib}`,
        '-o',
        path.join(work, lib),
        path.join(work, 'empty.c'),
      ]);
      await copyFile(path.join(work, lib), node.host.outside(`${LIB_DIR}/${lib}`));
    }
    await writeFile(node.host.outside('/etc/ld.so.conf.d/nvidia.conf'), `${LIB_DIR}\n`);
    await node.host.execOk([
      'sh',
      '-c',
      'ldconfig && mknod /dev/nvidia0 c 195 0 && mknod /dev/nvidiactl c 195 255 && mkdir -p /dev/dri && mknod /dev/dri/card0 c 226 0',
    ]);
    const op = await node.agentctlJson<OperationJson>(
      ['update', '--config', await node.configFile(node.agentConfig({ OCIImage: node.image('gpu') }))],
      0,
      300_000,
    );
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  }, 120_000);

  it('binds the device nodes and the library directory into the machine', async () => {
    const settings = (await node.host.execOk(['cat', '/etc/systemd/nspawn/kube1.nspawn'])).stdout;
    expect(settings).toContain('Bind=/dev/nvidia0\n');
    expect(settings).toContain('Bind=/dev/dri/card0\n');
    expect(settings).toContain(`BindReadOnly=${LIB_DIR}:/run/host-nvidia/0\n`);
    await inMachine(['test', '-c', '/dev/nvidia0']);
    await inMachine(['test', '-c', '/dev/dri/card0']);
    expect((await inMachine(['ls', '/run/host-nvidia/0'])).split('\n')).toEqual(expect.arrayContaining(LIBS));
  });

  it('linked each library into the multiarch directory and ldconfig caches it there', async () => {
    for (const lib of LIBS) {
      expect((await inMachine(['readlink', `/usr/lib/x86_64-linux-gnu/${lib}`])).trim()).toBe(
        `/run/host-nvidia/0/${lib}`,
      );
    }
    const cache = await inMachine(['ldconfig', '-p']);
    // /lib is /usr/lib in the merged-/usr image: the linker names the first of the two.
    expect(cache).toMatch(
      /libcuda\.so\.1 \(libc6,x86-64\) => (\/usr)?\/lib\/x86_64-linux-gnu\/libcuda\.so\.1/,
    );
    expect((await inMachine(['systemctl', 'is-active', 'agentd-nvidia-setup.service'])).trim()).toBe(
      'active',
    );
  });

  it('generated the CDI spec with the hooks as upstream, and registered the nvidia runtime', async () => {
    const spec = await inMachine(['cat', '/etc/cdi/nvidia.yaml']);
    expect(spec).toContain(
      '# args: cdi generate --output=/etc/cdi/nvidia.yaml --disable-hook all --enable-hook create-symlinks --enable-hook update-ldcache',
    );
    expect(spec).toMatch(
      /# ldconfig: \tlibcuda\.so\.1 \(libc6,x86-64\) => (\/usr)?\/lib\/x86_64-linux-gnu\/libcuda\.so\.1/,
    );
    const dropIn = await inMachine(['cat', '/etc/containerd/conf.d/99-nvidia-runtime.toml']);
    expect(dropIn).toContain("BinaryName = '/usr/bin/nvidia-container-runtime'");
  });

  it('containerd loaded the nvidia drop-in over config.toml: nvidia the default, CDI on, runc and untrusted kept', async () => {
    // The containerd stand-in writes what it loaded at its start, imports merged as containerd 2.x
    // merges them (src/sim/mirror/artifact-content.ts): one `key = value` per line.
    const loaded = new Map(
      (await inMachine(['cat', CONTAINERD_LOADED_CONFIG]))
        .split('\n')
        .filter((l) => !l.startsWith('#') && l.includes(' = '))
        .map((l) => [l.slice(0, l.indexOf(' = ')), l.slice(l.indexOf(' = ') + 3)] as const),
    );
    expect(loaded.get('imports')).toBe(
      "['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia-runtime.toml']",
    );
    const cri = "plugins.'io.containerd.cri.v1.runtime'";
    expect(loaded.get(`${cri}.containerd.default_runtime_name`)).toBe("'nvidia'");
    expect(loaded.get(`${cri}.containerd.runtimes.nvidia.options.BinaryName`)).toBe(
      "'/usr/bin/nvidia-container-runtime'",
    );
    expect(loaded.get(`${cri}.enable_cdi`)).toBe('true');
    expect(loaded.get(`${cri}.cdi_spec_dirs`)).toBe("['/etc/cdi', '/var/run/cdi']");
    for (const runtime of ['runc', 'untrusted']) {
      expect(loaded.get(`${cri}.containerd.runtimes.${runtime}.options.BinaryName`)).toBe(
        "'/usr/local/bin/runc'",
      );
    }
    expect(loaded.get("plugins.'io.containerd.cri.v1.images'.registry.config_path")).toBe(
      "'/etc/containerd/certs.d'",
    );
  });
});
