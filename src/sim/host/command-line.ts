/**
 * The grammar of the simulated host: exactly the command lines of docs/compatibility.md's host-command
 * table (what `src/host/machines.ts` issues). Anything else is not a command of the sim.
 */
import { MACHINE_NAMES } from '../../host/types.js';
import type { MachineName } from '../../host/types.js';
import { SIM_UNITS } from './state.js';
import { parseUpstreamDaemon, type UpstreamDaemonVerb } from './host-commands.js';
import { parseSimIp, type SimIpCommand } from './network.js';
import type { SimUnitName } from './state.js';

/** `machinectl <verb> <m>`. */
export type MachinectlVerb = 'enable' | 'disable' | 'start' | 'terminate' | 'show' | 'remove';
const MACHINECTL_VERBS: readonly MachinectlVerb[] = [
  'enable',
  'disable',
  'start',
  'terminate',
  'show',
  'remove',
];

/**
 * A command run inside a machine through `systemd-run --machine=<m> --pipe --wait`, or asked of
 * the machine's systemd over its bus (`systemctl --machine=<m> is-active kubelet.service`): both
 * reach the machine's bus, fail alike when it does not run, and answer alike.
 */
export type InMachineAction =
  | { type: 'true' }
  /** `systemctl enable --now <unit>…`: one transaction (containerd before kubelet). */
  | { type: 'enable-now'; units: SimUnitName[] }
  /** `systemctl stop <unit>…`: one transaction. */
  | { type: 'stop'; units: SimUnitName[] }
  /** `systemctl start --no-block default.target`: the machine's normal target (out of standby). */
  | { type: 'start-default' }
  | { type: 'is-active'; unit: 'kubelet.service' }
  /** `journalctl -u <unit> -n <lines> --no-pager`: diagnostics of a failed machine. */
  | { type: 'journal'; unit: SimUnitName; lines: number }
  /** Any other command: a health gate `exec` check (the model runs a few, see model.ts). */
  | { type: 'exec'; argv: string[] };

/** A parsed command line the sim accepts. */
export type SimCommand =
  | { kind: 'machinectl'; verb: MachinectlVerb; machine: MachineName }
  | { kind: 'daemon-reload' }
  | { kind: 'nspawn-unit'; verb: 'reset-failed' | 'stop'; machine: MachineName }
  | { kind: 'nspawn-unit-state'; machine: MachineName }
  /** `systemctl status systemd-nspawn@<m>.service --no-pager -n <lines>`. */
  | { kind: 'nspawn-status'; machine: MachineName; lines: number }
  | { kind: 'in-machine'; machine: MachineName; action: InMachineAction }
  /** `ldconfig -p`: the host's linker cache (GPU discovery). */
  | { kind: 'ldconfig-cache' }
  /** `systemctl is-enabled|is-active|disable --now unbounded-agent-daemon.service` (the takeover). */
  | { kind: 'upstream-daemon'; verb: UpstreamDaemonVerb }
  /** The `ip` lines of reset's upstream cleanup (network.ts). */
  | { kind: 'ip'; command: SimIpCommand };

/** The machine a command acts on (latency faults apply per machine), or undefined. */
export function commandMachine(cmd: SimCommand): MachineName | undefined {
  return 'machine' in cmd ? cmd.machine : undefined;
}

function asMachine(word: string | undefined): MachineName | undefined {
  return (MACHINE_NAMES as readonly (string | undefined)[]).includes(word)
    ? (word as MachineName)
    : undefined;
}

function asUnit(word: string | undefined): SimUnitName | undefined {
  return (SIM_UNITS as readonly (string | undefined)[]).includes(word) ? (word as SimUnitName) : undefined;
}

const NSPAWN_UNIT = /^systemd-nspawn@(.+)\.service$/;

/** The `-n` argument of journalctl and systemctl status: a line count. */
function lineCount(word: string | undefined): number | undefined {
  return word !== undefined && /^\d{1,5}$/.test(word) ? Number(word) : undefined;
}

/** Parse `file args…` into a sim command, or undefined when the sim does not accept that line. */
export function parseSimCommand(file: string, args: readonly string[]): SimCommand | undefined {
  switch (file) {
    case 'machinectl':
      return parseMachinectl(args);
    case 'systemctl':
      return parseHostSystemctl(args);
    case 'systemd-run':
      return parseSystemdRun(args);
    case 'ip': {
      const command = parseSimIp(args);
      return command ? { kind: 'ip', command } : undefined;
    }
    case 'ldconfig':
      return args.length === 1 && args[0] === '-p' ? { kind: 'ldconfig-cache' } : undefined;
    default:
      return undefined;
  }
}

function parseMachinectl(args: readonly string[]): SimCommand | undefined {
  if (args.length !== 2) return undefined;
  const verb = MACHINECTL_VERBS.find((v) => v === args[0]);
  const machine = asMachine(args[1]);
  return verb && machine ? { kind: 'machinectl', verb, machine } : undefined;
}

/** `systemctl show` of a machine's unit reads exactly these, in this order (src/host/machines.ts). */
const UNIT_STATE_ARGS = ['show', '--property=ActiveState', '--property=SubState', '--property=Result'];

function parseHostSystemctl(args: readonly string[]): SimCommand | undefined {
  if (args.length === 1 && args[0] === 'daemon-reload') return { kind: 'daemon-reload' };
  const upstream = parseUpstreamDaemon(args);
  if (upstream) return { kind: 'upstream-daemon', verb: upstream };
  const busMachine = asMachine(/^--machine=(.*)$/.exec(args[0] ?? '')?.[1]);
  if (busMachine) {
    if (args.length === 3 && args[1] === 'is-active' && args[2] === 'kubelet.service')
      return {
        kind: 'in-machine',
        machine: busMachine,
        action: { type: 'is-active', unit: 'kubelet.service' },
      };
    return args.length === 4 &&
      args[1] === 'start' &&
      args[2] === '--no-block' &&
      args[3] === 'default.target'
      ? { kind: 'in-machine', machine: busMachine, action: { type: 'start-default' } }
      : undefined;
  }
  if (args.length === UNIT_STATE_ARGS.length + 1 && UNIT_STATE_ARGS.every((a, i) => args[i] === a)) {
    const machine = asMachine(NSPAWN_UNIT.exec(args.at(-1) ?? '')?.[1]);
    return machine ? { kind: 'nspawn-unit-state', machine } : undefined;
  }
  if (args.length === 5 && args[0] === 'status' && args[2] === '--no-pager' && args[3] === '-n') {
    const machine = asMachine(NSPAWN_UNIT.exec(args[1] ?? '')?.[1]);
    const lines = lineCount(args[4]);
    return machine && lines !== undefined ? { kind: 'nspawn-status', machine, lines } : undefined;
  }
  if (args.length !== 2 || (args[0] !== 'reset-failed' && args[0] !== 'stop')) return undefined;
  const machine = asMachine(NSPAWN_UNIT.exec(args[1] ?? '')?.[1]);
  return machine ? { kind: 'nspawn-unit', verb: args[0], machine } : undefined;
}

function parseSystemdRun(args: readonly string[]): SimCommand | undefined {
  const [machineFlag, pipe, wait, ...inner] = args;
  const machine = asMachine(/^--machine=(.*)$/.exec(machineFlag ?? '')?.[1]);
  if (!machine || pipe !== '--pipe' || wait !== '--wait') return undefined;
  const action = parseInMachine(inner);
  return action ? { kind: 'in-machine', machine, action } : undefined;
}

function parseInMachine(inner: readonly string[]): InMachineAction | undefined {
  if (inner.length === 1 && inner[0] === '/bin/true') return { type: 'true' };
  if (inner.length === 6 && inner[0] === 'journalctl' && inner[1] === '-u' && inner[3] === '-n') {
    const unit = asUnit(inner[2]);
    const lines = lineCount(inner[4]);
    return unit && lines !== undefined && inner[5] === '--no-pager'
      ? { type: 'journal', unit, lines }
      : undefined;
  }
  // systemctl and journalctl are agentd's own lines: only the exact forms above and below.
  if (inner[0] === 'journalctl') return undefined;
  if (inner[0] !== 'systemctl') return inner.length > 0 ? { type: 'exec', argv: [...inner] } : undefined;
  if (inner.length >= 4 && inner[1] === 'enable' && inner[2] === '--now') {
    const units = asUnits(inner.slice(3));
    return units ? { type: 'enable-now', units } : undefined;
  }
  if (inner.length >= 3 && inner[1] === 'stop') {
    const units = asUnits(inner.slice(2));
    return units ? { type: 'stop', units } : undefined;
  }
  if (inner.length === 3 && inner[1] === 'is-active' && inner[2] === 'kubelet.service') {
    return { type: 'is-active', unit: 'kubelet.service' };
  }
  return undefined;
}

/** Each word a unit of the sim, else undefined. */
function asUnits(words: readonly string[]): SimUnitName[] | undefined {
  const units = words.map(asUnit);
  return units.every((u): u is SimUnitName => u !== undefined) ? units : undefined;
}

/** The command line as one string, shell-quoted where needed (for results, logs and errors). */
export function formatCommandLine(file: string, args: readonly string[]): string {
  return [file, ...args].map(quoteArg).join(' ');
}

function quoteArg(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}
