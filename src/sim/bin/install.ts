/**
 * Install the sim executables as shell wrappers named `machinectl`, `systemctl` and
 * `systemd-run`, for a directory that integration tests (or a `--sim` try-out) put first on PATH.
 */
import { chmod, mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PreconditionFailedError } from '../../errors.js';
import type { SimToolName } from './main.js';

export const SIM_TOOLS: readonly SimToolName[] = ['machinectl', 'systemctl', 'systemd-run'];

/**
 * Where the compiled executables are: `<repo>/dist/sim/bin`. This module sits three levels
 * below the repository root both as `src/sim/bin/install.ts` and as `dist/sim/bin/install.js`.
 */
export function simBinDistDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.join(path.resolve(here, '../../..'), 'dist', 'sim', 'bin');
}

const shellQuote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/** Write the three wrappers into `dir` (created if missing); each execs node on `dist/sim/bin/<name>.js`. */
export async function installSimBinaries(dir: string): Promise<void> {
  const distDir = simBinDistDir();
  await mkdir(dir, { recursive: true });
  for (const tool of SIM_TOOLS) {
    const script = path.join(distDir, `${tool}.js`);
    try {
      await stat(script);
    } catch (err) {
      throw new PreconditionFailedError(
        `install sim ${tool}: ${script} does not exist; run \`npm run build\` first`,
        {
          cause: err,
          data: { script },
        },
      );
    }
    const wrapper = path.join(dir, tool);
    // The node running us, not whichever `node` PATH finds: PATH is exactly what tests rearrange.
    await writeFile(wrapper, `#!/bin/sh\nexec ${shellQuote(process.execPath)} ${shellQuote(script)} "$@"\n`);
    await chmod(wrapper, 0o755);
  }
}
