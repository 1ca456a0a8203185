/**
 * The simulated host's network, as far as reset looks at it: the `ip` lines of
 * src/host/upstream-cleanup.ts, played against `<root>/var/lib/agentd-sim/network.json`
 * (`{"links": [...], "rules": [{"priority": "32765", "table": 51820}], "routes": [{"table":
 * 51820, "route": "default dev wg51820"}]}`). Absent, the host has `lo` and the default rules.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { errorCode, toAgentError } from '../../errors.js';
import { writeFileAtomic } from '../../host/fs-atomic.js';
import type { HostPaths } from '../../host/paths.js';

export const SIM_NETWORK_FILE = 'var/lib/agentd-sim/network.json';

export interface SimNetwork {
  links: string[];
  rules: Array<{ priority: string; table: number | 'local' | 'main' | 'default' }>;
  routes: Array<{ table: number; route: string }>;
}

export type SimIpCommand =
  | { verb: 'link-show' }
  | { verb: 'link-delete'; name: string }
  | { verb: 'rule-show' }
  | { verb: 'rule-del'; priority: string }
  | { verb: 'route-show-all' }
  | { verb: 'route-flush'; table: number };

/** The `ip` lines the sim accepts, or undefined. */
export function parseSimIp(args: readonly string[]): SimIpCommand | undefined {
  const line = args.join(' ');
  if (line === '-o link show') return { verb: 'link-show' };
  if (line === 'rule show') return { verb: 'rule-show' };
  if (line === 'route show table all') return { verb: 'route-show-all' };
  if (args.length === 3 && args[0] === 'link' && args[1] === 'delete' && /^[\w.-]+$/.test(args[2] ?? '')) {
    return { verb: 'link-delete', name: args[2] as string };
  }
  if (args.length === 4 && line.startsWith('rule del priority ') && /^\d+$/.test(args[3] ?? '')) {
    return { verb: 'rule-del', priority: args[3] as string };
  }
  if (args.length === 4 && line.startsWith('route flush table ') && /^\d+$/.test(args[3] ?? '')) {
    return { verb: 'route-flush', table: Number(args[3]) };
  }
  return undefined;
}

function defaultNetwork(): SimNetwork {
  return {
    links: ['lo'],
    rules: [
      { priority: '0', table: 'local' },
      { priority: '32766', table: 'main' },
      { priority: '32767', table: 'default' },
    ],
    routes: [],
  };
}

async function readNetwork(file: string): Promise<SimNetwork> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as SimNetwork;
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return defaultNetwork();
    throw toAgentError(err, `sim: read ${file}`);
  }
}

type Outcome = { exitCode: number; stdout: string; stderr: string };
const ok = (stdout = ''): Outcome => ({ exitCode: 0, stdout, stderr: '' });

/** Run one `ip` line against the simulated network. */
export async function applySimIp(paths: HostPaths, cmd: SimIpCommand): Promise<Outcome> {
  const file = path.join(paths.root, SIM_NETWORK_FILE);
  const net = await readNetwork(file);
  const save = () => writeFileAtomic(file, `${JSON.stringify(net, null, 2)}\n`);
  switch (cmd.verb) {
    case 'link-show':
      return ok(net.links.map((l, i) => `${i + 1}: ${l}: <UP,LOWER_UP> mtu 1500 state UNKNOWN\n`).join(''));
    case 'link-delete': {
      if (!net.links.includes(cmd.name)) {
        return { exitCode: 1, stdout: '', stderr: `Cannot find device "${cmd.name}"\n` };
      }
      net.links = net.links.filter((l) => l !== cmd.name);
      await save();
      return ok();
    }
    case 'rule-show':
      return ok(net.rules.map((r) => `${r.priority}:\tfrom all lookup ${r.table}\n`).join(''));
    case 'rule-del': {
      const i = net.rules.findIndex((r) => r.priority === cmd.priority);
      if (i < 0) return { exitCode: 2, stdout: '', stderr: 'RTNETLINK answers: No such file or directory\n' };
      net.rules.splice(i, 1);
      await save();
      return ok();
    }
    case 'route-show-all':
      return ok(net.routes.map((r) => `${r.route} table ${r.table}\n`).join(''));
    case 'route-flush':
      net.routes = net.routes.filter((r) => r.table !== cmd.table);
      await save();
      return ok();
  }
}
