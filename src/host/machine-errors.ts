/**
 * What machinectl and systemd-run mean when they fail, told apart by their messages as real
 * systemd 252 prints them (the simulated host prints the same; a contract test on a real host
 * holds both to it, see docs/testing.md). The machine manager decides on these classes, never
 * on raw message text.
 */

export type HostErrorClass =
  /** `machinectl remove` of a machine whose container still runs. */
  | 'busy'
  /** `systemd-run --machine=M` when M is not running (not registered, or its container is gone). */
  | 'host-down'
  /** `systemd-run --machine=M` right after `machinectl start`, before D-Bus inside M is up. */
  | 'bus-not-ready'
  /** machined knows no machine of that name (`show`, `terminate`). */
  | 'no-machine'
  /** There is no image of that name under /var/lib/machines (`start`, `enable`, `remove`…). */
  | 'no-image'
  /** machined still holds a registration of that name (`start` after a crash). */
  | 'already-exists'
  /** A systemd job failed (`machinectl start` of a machine whose container exits). */
  | 'job-failed'
  | 'other';

const PATTERNS: ReadonlyArray<[HostErrorClass, RegExp]> = [
  ['busy', /Device or resource busy/],
  ['host-down', /Failed to connect to bus: Host is down/],
  ['bus-not-ready', /Failed to connect to bus: No such file or directory/],
  ['already-exists', /already exists/i],
  ['no-machine', /No machine '[^']*' known/],
  ['no-image', /No image '[^']*' known|Machine image '[^']*' does not exist/],
  ['job-failed', /Job for \S+ failed/],
];

/** The class of a failed host command, from its stderr. */
export function classifyHostError(stderr: string): HostErrorClass {
  for (const [cls, re] of PATTERNS) if (re.test(stderr)) return cls;
  return 'other';
}
