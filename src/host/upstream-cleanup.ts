/**
 * What upstream's reset removes beyond the machines, so a node agentd resets (or uninstalls)
 * is as clean as one upstream reset: the upstream daemon, the overlay network unbounded-net
 * made (interfaces, WireGuard keys, policy rules and route tables 51820–51899) and the
 * upstream agent's own files. Only what is upstream's by name: nothing else is touched
 * (docs/operations.md, "Reset").
 */
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { describeError, errorCode } from '../errors.js';
import type { HostPaths } from './paths.js';
import type { CommandRunner } from './types.js';
import { UPSTREAM_DAEMON_UNIT } from './upstream-daemon.js';

/** The overlay interfaces unbounded-net creates, besides its WireGuard ones (`wg<digits>`). */
export const UPSTREAM_OVERLAY_LINKS = Object.freeze(['geneve0', 'vxlan0', 'ipip0', 'unbounded0', 'cbr0']);
/** The route tables unbounded-net's WireGuard gateways use. */
export const UPSTREAM_ROUTE_TABLES = Object.freeze({ first: 51820, last: 51899 });
/** unbounded-net's WireGuard keys. */
export const UPSTREAM_WIREGUARD_KEYS = Object.freeze([
  '/etc/wireguard/server.priv',
  '/etc/wireguard/server.pub',
]);
/** The upstream daemon's units (the recovery one runs when the daemon fails). */
export const UPSTREAM_UNITS = Object.freeze([
  UPSTREAM_DAEMON_UNIT,
  'unbounded-agent-daemon-recovery.service',
]);

const WIREGUARD_LINK_RE = /^wg\d+$/;

/** What the cleanup removed, for the operation's result and the log. */
export interface UpstreamCleanupResult {
  readonly units: string[];
  readonly links: string[];
  /** `ip rule` priorities deleted. */
  readonly rules: string[];
  readonly tables: number[];
  readonly files: string[];
}

function isUpstreamTable(n: number): boolean {
  return n >= UPSTREAM_ROUTE_TABLES.first && n <= UPSTREAM_ROUTE_TABLES.last;
}

/** Interface names from `ip -o link show` (`2: wg51820: <…>`, `3: vxlan0@NONE: <…>`). */
export function parseLinkNames(output: string): string[] {
  const names: string[] = [];
  for (const line of output.split('\n')) {
    const m = /^\d+:\s+([^:\s@]+)(?:@[^:\s]*)?:/.exec(line);
    if (m) names.push(m[1] as string);
  }
  return names;
}

/** `ip rule show` lines that look up an upstream table: their priorities. */
export function parseUpstreamRules(output: string): string[] {
  const priorities: string[] = [];
  for (const line of output.split('\n')) {
    const m = /^(\d+):\s.*\blookup (\d+)\b/.exec(line);
    if (m && isUpstreamTable(Number(m[2]))) priorities.push(m[1] as string);
  }
  return priorities;
}

/** The upstream tables `ip route show table all` has routes in, ascending. */
export function parseUpstreamTables(output: string): number[] {
  const tables = new Set<number>();
  for (const m of output.matchAll(/\btable (\d+)\b/g)) {
    const n = Number(m[1]);
    if (isUpstreamTable(n)) tables.add(n);
  }
  return [...tables].sort((a, b) => a - b);
}

/** The part of a logger the cleanup uses: pino's, or a collector of agentctl uninstall. */
export interface CleanupLog {
  warn(obj: { err: string }, msg: string): void;
  info(obj: UpstreamCleanupResult, msg: string): void;
}

async function present(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}

/**
 * Remove what upstream's reset removes. Every step is tried (one that fails is logged and the
 * next runs), since a half-cleaned node is better than one cleanup error hiding the others.
 */
export async function removeUpstreamLeftovers(o: {
  runner: CommandRunner;
  paths: HostPaths;
  /** Where a step that failed, and what was removed, are told (the daemon's logger, or uninstall's report). */
  logger: CleanupLog;
  signal?: AbortSignal;
}): Promise<UpstreamCleanupResult> {
  const result: UpstreamCleanupResult = { units: [], links: [], rules: [], tables: [], files: [] };
  const run = (args: string[]) => o.runner.run(args[0] as string, args.slice(1), { signal: o.signal });
  const step = async (what: string, fn: () => Promise<void>): Promise<void> => {
    try {
      await fn();
    } catch (err) {
      o.logger.warn({ err: describeError(err) }, `reset: could not ${what}`);
    }
  };
  const removeFile = async (hostPath: string, recursive = false): Promise<void> => {
    const file = o.paths.resolve(hostPath);
    if (!(await present(file))) return;
    await rm(file, { recursive, force: true });
    result.files.push(hostPath);
  };

  for (const unit of UPSTREAM_UNITS) {
    const unitFile = `/etc/systemd/system/${unit}`;
    if (!(await present(o.paths.resolve(unitFile)))) continue;
    await step(`stop and disable ${unit}`, async () => {
      if (unit === UPSTREAM_DAEMON_UNIT) await run(['systemctl', 'disable', '--now', unit]);
      await removeFile(`/etc/systemd/system/multi-user.target.wants/${unit}`);
      await removeFile(`${unitFile}.d`, true);
      await removeFile(unitFile);
      result.units.push(unit);
    });
  }
  await step('remove the overlay interfaces', async () => {
    const links = parseLinkNames((await run(['ip', '-o', 'link', 'show'])).stdout);
    for (const name of links) {
      if (!WIREGUARD_LINK_RE.test(name) && !UPSTREAM_OVERLAY_LINKS.includes(name)) continue;
      await step(`delete interface ${name}`, async () => {
        await run(['ip', 'link', 'delete', name]);
        result.links.push(name);
      });
    }
  });
  await step('remove the policy rules of tables 51820-51899', async () => {
    for (const priority of parseUpstreamRules((await run(['ip', 'rule', 'show'])).stdout)) {
      await run(['ip', 'rule', 'del', 'priority', priority]);
      result.rules.push(priority);
    }
  });
  await step('flush route tables 51820-51899', async () => {
    for (const table of parseUpstreamTables((await run(['ip', 'route', 'show', 'table', 'all'])).stdout)) {
      await run(['ip', 'route', 'flush', 'table', String(table)]);
      result.tables.push(table);
    }
  });
  for (const key of UPSTREAM_WIREGUARD_KEYS) await step(`remove ${key}`, () => removeFile(key));
  await step('remove the upstream agent’s files', async () => {
    let names: string[] = [];
    try {
      names = await readdir(o.paths.resolve('/usr/local/bin'));
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
    for (const name of names.sort()) {
      if (name.startsWith('unbounded-agent')) await removeFile(path.posix.join('/usr/local/bin', name));
    }
    await removeFile('/tmp/unbounded-agent', true);
    let tmp: string[] = [];
    try {
      tmp = await readdir(o.paths.resolve('/tmp'));
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
    for (const name of tmp.sort()) {
      if (/^unbounded-agent-config\..*\.json$/.test(name)) await removeFile(`/tmp/${name}`);
    }
  });
  const removed =
    result.units.length +
    result.links.length +
    result.rules.length +
    result.tables.length +
    result.files.length;
  if (removed > 0) o.logger.info({ ...result }, 'reset removed what the upstream agent left on the host');
  return result;
}
