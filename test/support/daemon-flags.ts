/**
 * The flags that put every path of a daemon on the simulated host under one directory. Plain
 * (no vitest import), so the benches use it too.
 */
import path from 'node:path';

/** `--socket`, `--pid-file`, `--state-dir`, `--root` under `dir`, and `--host sim`. */
export function simDaemonFlags(dir: string, socket = path.join(dir, 'agentd.sock')): string[] {
  return [
    '--socket',
    socket,
    '--pid-file',
    path.join(dir, 'agentd.pid'),
    '--state-dir',
    path.join(dir, 'state'),
    '--root',
    path.join(dir, 'root'),
    '--host',
    'sim',
  ];
}
