/**
 * Failpoints: named places where a test can make the daemon die at once (SIGKILL to itself),
 * to prove that recovery handles a crash exactly there. Read once from `AGENTD_FAILPOINTS`, a
 * comma list of point names; unset in production, where `failpoint()` is a set lookup.
 *
 * Engine points: `<kind>.<phase>.before` (journal says the phase runs, nothing done yet),
 * `<kind>.<phase>.after` (phase done and journaled), and mid-phase points such as
 * `update.provision.mid`. Host points: `cmd:<text>` dies when a host command line containing
 * `<text>` is about to run (e.g. `cmd:machinectl disable kube1`, the middle of a stop).
 * `stop:<point>` stops the process there instead (SIGSTOP), until the test sends SIGCONT.
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

/**
 * Stop here (SIGSTOP to itself) when `stop:<name>` is armed: the test that armed it sees the
 * process stopped, changes the host at exactly this point (fills the disk, lowers the
 * descriptor limit) and sends SIGCONT. Once per point.
 */
function pause(point: string): void {
  paused.add(point);
  process.stderr.write(`agentd: failpoint stop:${point}: stopping the process\n`);
  process.kill(process.pid, 'SIGSTOP');
}
const paused = new Set<string>();

/** Die here when the point is armed; stop here when `stop:<name>` is. */
export function failpoint(name: string): void {
  if (active.size === 0) return;
  if (active.has(name)) die(name);
  if (active.has(`stop:${name}`) && !paused.has(name)) pause(name);
}

/** Die before a host command whose line contains an armed `cmd:` text. */
export function commandFailpoint(commandLine: string): void {
  for (const text of commandPoints) if (commandLine.includes(text)) die(`cmd:${text}`);
}

export function failpointsArmed(): string[] {
  return [...active];
}
