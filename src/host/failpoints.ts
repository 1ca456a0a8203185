/**
 * Failpoints: named places where a test can make the daemon die at once (SIGKILL to itself),
 * to prove that recovery handles a crash exactly there. Read once from `AGENTD_FAILPOINTS`, a
 * comma list of point names; unset in production, where `failpoint()` is a set lookup.
 *
 * Engine points: `<kind>.<phase>.before` (journal says the phase runs, nothing done yet),
 * `<kind>.<phase>.after` (phase done and journaled), and mid-phase points such as
 * `update.provision.mid`. Host points: `cmd:<text>` dies when a host command line containing
 * `<text>` is about to run (e.g. `cmd:machinectl disable kube1`, the middle of a stop).
 */
const active: ReadonlySet<string> = new Set(
  (process.env.AGENTD_FAILPOINTS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);
const commandPoints = [...active].filter((p) => p.startsWith('cmd:')).map((p) => p.slice(4));

function die(point: string): never {
  process.stderr.write(`agentd: failpoint ${point}: killing the process\n`);
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL is not deliverable to a handler; this line is never reached.
  throw new Error(`failpoint ${point}`);
}

/** Die here when the point is armed. */
export function failpoint(name: string): void {
  if (active.size > 0 && active.has(name)) die(name);
}

/** Die before a host command whose line contains an armed `cmd:` text. */
export function commandFailpoint(commandLine: string): void {
  for (const text of commandPoints) if (commandLine.includes(text)) die(`cmd:${text}`);
}

export function failpointsArmed(): string[] {
  return [...active];
}
