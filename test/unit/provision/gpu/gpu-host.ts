/** Test helper: a GPU host made of files under a temp root, with a recorded `ldconfig -p`. */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CommandResult, CommandRunner } from '../../../../src/host/types.js';

/** `ldconfig -p` as a driver 570 host prints it (abridged), with a 32-bit entry and non-driver libraries. */
export const LDCONFIG_OUTPUT = `1530 libs found in cache \`/etc/ld.so.cache'
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /opt/nvidia/lib64/libnvidia-ptxjitcompiler.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
\tlibGLX_nvidia.so.0 (libc6,x86-64, OS ABI: Linux 2.6.32) => /usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib64/libnvidia-ml.so.1
`;

/** The host libraries LDCONFIG_OUTPUT names for x86-64 (each must exist under the root). */
export const HOST_LIBRARIES = [
  '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1',
  '/opt/nvidia/lib64/libnvidia-ptxjitcompiler.so.1',
  '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
  '/usr/lib/x86_64-linux-gnu/libcuda.so',
  '/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0',
];

export const GPU_DEVICES = [
  '/dev/dri/card0',
  '/dev/dri/renderD128',
  '/dev/nvidia-caps/nvidia-cap1',
  '/dev/nvidia-uvm',
  '/dev/nvidia0',
  '/dev/nvidiactl',
];

async function put(root: string, hostPath: string, content = ''): Promise<void> {
  const file = path.join(root, hostPath);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, content);
}

/** Make `root` a GPU host: device nodes (as plain files), driver libraries, a /dev/dri/by-path dir. */
export async function makeGpuHost(root: string, options: { libraries?: string[] } = {}): Promise<void> {
  for (const dev of GPU_DEVICES) await put(root, dev);
  await mkdir(path.join(root, 'dev/dri/by-path'), { recursive: true });
  for (const lib of options.libraries ?? HOST_LIBRARIES) await put(root, lib, 'ELF');
}

/** A runner that answers `ldconfig -p` with `output` and counts the calls; any other command fails. */
export function ldconfigRunner(output = LDCONFIG_OUTPUT): CommandRunner & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async run(file, args): Promise<CommandResult> {
      calls.push([file, ...args].join(' '));
      if (file !== 'ldconfig' || args.join(' ') !== '-p') throw new Error(`unexpected command ${file}`);
      return { command: 'ldconfig -p', exitCode: 0, stdout: output, stderr: '', durationMs: 0 };
    },
  };
}
