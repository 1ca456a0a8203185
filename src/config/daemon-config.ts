/**
 * The daemon's configuration: one zod schema, defaults filled here and nowhere else, merged
 * from flags > `AGENTD_*` env > YAML file > defaults. A bad value is reported with the option,
 * where it came from, what was expected and what was received.
 */
import type { OutboundProxy } from './proxy.js';
import { DEFAULT_TRANSFER_LIMITS, type TransferLimits } from './transfer-limits.js';
import { parseByteRate } from './byte-rate.js';
import * as z from 'zod';
import { MAX_DURATION_MS, MAX_DURATION_TEXT, parseDuration } from './duration.js';
import { DEFAULT_FLEET_NAMESPACE, NAMESPACE_NAME_EXPECTED, NAMESPACE_NAME_RE } from './fleet-namespace.js';

export const DEFAULT_SOCKET = '/run/agentd/agentd.sock';
export const DEFAULT_PID_FILE = '/run/agentd/agentd.pid';
export const DEFAULT_STATE_DIR = '/var/lib/agentd';
export const DEFAULT_CONFIG_FILE = '/etc/agentd/config.yaml';
/** Credentials of private registries (docs/operations.md, "Private registries"): read at each pull when it exists. */
export const DEFAULT_REGISTRY_AUTH_FILE = '/etc/agentd/registry-auth.json';
export const DEFAULT_CRD_GROUP = 'unbounded-cloud.io';
export { DEFAULT_FLEET_NAMESPACE } from './fleet-namespace.js';
/** Where `--sim` puts everything not given explicitly, relative to the working directory. */
export const SIM_DIR = '.agentd';
/** The longest unix socket path bind(2) takes on Linux: 108 bytes with the final NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;
/** The largest GID (2^32-2: 2^32-1 is chown's "no change"). */
const MAX_GID = 2 ** 32 - 2;

const durationMs = z
  .union([
    z.number().nonnegative(),
    z.string().transform((s, ctx) => {
      const ms = parseDuration(s);
      if (ms === null) {
        ctx.addIssue({ code: 'custom', message: 'expected a duration such as 30s, 5m or 1500ms' });
        return z.NEVER;
      }
      return ms;
    }),
  ])
  // Every duration ends up in a timer, and a timer longer than 2^31-1 ms fires at once.
  .refine((ms) => ms <= MAX_DURATION_MS, `expected a duration of at most ${MAX_DURATION_TEXT}`);

/** A byte rate: `10KiB/s`, `1MiB/s`, or a number of bytes per second; at least 1 B/s. */
const byteRate = z
  .union([
    z.number(),
    z.string().transform((s, ctx) => {
      const rate = parseByteRate(s);
      if (rate === null) {
        ctx.addIssue({ code: 'custom', message: 'expected a rate such as 10KiB/s, 1MiB/s or 500B/s' });
        return z.NEVER;
      }
      return rate;
    }),
  ])
  .refine((rate) => Number.isFinite(rate) && rate >= 1, 'expected a rate of at least 1B/s');

/** A duration of at least 1 s: a deadline or window of less would fail every download. */
const windowMs = durationMs.refine((ms) => ms >= 1000, 'expected a duration of at least 1s');

const octalMode = z.union([
  z.number().int().min(0).max(0o777),
  z
    .string()
    .regex(/^(0o?)?[0-7]{3}$/, 'expected an octal mode such as 0660')
    .transform((s) => parseInt(s.replace(/^0o/, ''), 8)),
]);

/**
 * The admin socket's mode: no bit for others. Whoever can write to the socket can replace the
 * node's machines as root (docs/operations.md, "The socket group"): access goes through a group.
 */
const socketMode = octalMode.refine(
  (mode) => (mode & 0o007) === 0,
  'expected a mode that gives others no access, such as 0660 or 0600 (the socket controls the node as root: give access through --socket-group)',
);

/** A group name as useradd and groupadd accept it by default, or a numeric GID. */
const socketGroup = z.union([
  z
    .string()
    .regex(/^(\d+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$/, 'expected a group name (such as agentd) or a numeric GID')
    .refine((s) => !/^\d+$/.test(s) || Number(s) <= MAX_GID, `expected a GID of at most ${MAX_GID}`),
  z.number().int().nonnegative().max(MAX_GID),
]);

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, {
    message: 'expected HOST:PORT such as 127.0.0.1:9101',
    abort: true,
  })
  .refine((s) => Number(s.slice(s.lastIndexOf(':') + 1)) <= 65535, 'port must be at most 65535');

const boolish = z.union([
  z.boolean(),
  z
    .enum(['1', 'true', 'yes', 'on', '0', 'false', 'no', 'off'])
    .transform((s) => ['1', 'true', 'yes', 'on'].includes(s)),
]);

/** How an update switches machines (`--switch-order`; docs/architecture.md, "Hot standby"). */
export const SWITCH_ORDERS = ['standby', 'cold'] as const;

/** Every daemon option, as it may appear in the YAML file (camelCase keys). */
export const daemonConfigSchema = z.strictObject({
  socket: z.string().min(1).optional(),
  socketMode: socketMode.default(0o660),
  socketGroup: socketGroup.optional(),
  pidFile: z.string().min(1).optional(),
  stateDir: z.string().min(1).optional(),
  root: z.string().min(1).optional(),
  host: z.enum(['systemd', 'sim']).optional(),
  sim: boolish.default(false),
  metricsAddress: hostPort.optional(),
  kubeconfig: z.string().min(1).optional(),
  registryAuthFile: z.string().min(1).optional(),
  machineName: z.string().min(1).optional(),
  watch: boolish.optional(),
  repair: boolish.default(true),
  fleet: boolish.default(true),
  fleetNamespace: z
    .string()
    .regex(NAMESPACE_NAME_RE, NAMESPACE_NAME_EXPECTED)
    .default(DEFAULT_FLEET_NAMESPACE),
  crdGroup: z
    .string()
    .regex(
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/,
      'expected an API group such as unbounded-cloud.io',
    )
    .default(DEFAULT_CRD_GROUP),
  shutdownGrace: durationMs.default(30_000),
  machineStartTimeout: durationMs.default(120_000),
  verifyTimeout: durationMs.default(180_000),
  switchOrder: z.enum(SWITCH_ORDERS).default('standby'),
  downloadMinRate: byteRate.default(DEFAULT_TRANSFER_LIMITS.minRateBytesPerSecond),
  downloadRateWindow: windowMs.default(DEFAULT_TRANSFER_LIMITS.rateWindowMs),
  outboundTimeout: windowMs.default(DEFAULT_TRANSFER_LIMITS.requestTimeoutMs),
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  logFormat: z.enum(['json', 'pretty']).optional(),
});

export type DaemonConfigInput = z.input<typeof daemonConfigSchema>;

/** The resolved configuration the daemon runs with: every path absolute, every default filled. */
export interface DaemonConfig {
  configFile: string | null;
  socket: string;
  socketMode: number;
  socketGroup: string | number | null;
  pidFile: string;
  stateDir: string;
  root: string;
  host: 'systemd' | 'sim';
  sim: boolean;
  metricsAddress: { host: string; port: number } | null;
  kubeconfig: string | null;
  /** The registry auth file: read at each image pull (a missing file: anonymous pulls). */
  registryAuthFile: string;
  machineName: string | null;
  /** null: on when Kubernetes credentials exist. */
  watch: boolean | null;
  /** Keep the node at its desired state between requests (restart a stopped active machine). */
  repair: boolean;
  /** Take part in the fleet gate when a fleet policy exists (docs/fleet.md); false: never gate. */
  fleet: boolean;
  /** The namespace of the fleet policy, recorded failures and slot Leases (docs/fleet.md). */
  fleetNamespace: string;
  crdGroup: string;
  shutdownGraceMs: number;
  /** How long a machine may take to boot and answer `systemd-run` before `start` fails. */
  machineStartTimeoutMs: number;
  /** How long kubelet may take to turn active and healthy before `verify` fails. */
  verifyTimeoutMs: number;
  /**
   * How an update switches machines (docs/architecture.md, "Hot standby"): `standby` boots the
   * target beside the serving source before the node goes down; `cold` boots it in the down window.
   */
  switchOrder: (typeof SWITCH_ORDERS)[number];
  /**
   * Bounds of every download and registry call (docs/operations.md, "Limits"): the floor of a
   * download's average rate over its window, and the total deadline of a call.
   */
  transferLimits: TransferLimits;
  logLevel: string;
  logFormat: 'json' | 'pretty';
  /** The proxy of outbound HTTP (downloads, image pulls, health checks), from HTTPS_PROXY & co. */
  proxy: OutboundProxy;
}

const DURATION = 'a duration such as 30s, 5m or 1500ms';
const BOOLEAN = 'true or false (also yes/no, on/off, 1/0)';

/**
 * Option metadata: the flag and env names used in messages and help, and what a value must be
 * (the message of a value of the wrong kind: a list, a mapping, nothing).
 */
export const DAEMON_OPTIONS: Record<keyof DaemonConfigInput, { flag: string; env: string; expects: string }> =
  {
    socket: { flag: '--socket', env: 'AGENTD_SOCKET', expects: 'a path' },
    socketMode: { flag: '--socket-mode', env: 'AGENTD_SOCKET_MODE', expects: 'an octal mode such as 0660' },
    socketGroup: {
      flag: '--socket-group',
      env: 'AGENTD_SOCKET_GROUP',
      expects: 'a group name (such as agentd) or a numeric GID',
    },
    pidFile: { flag: '--pid-file', env: 'AGENTD_PID_FILE', expects: 'a path' },
    stateDir: { flag: '--state-dir', env: 'AGENTD_STATE_DIR', expects: 'a directory' },
    root: { flag: '--root', env: 'AGENTD_ROOT', expects: 'a directory' },
    host: { flag: '--host', env: 'AGENTD_HOST', expects: 'systemd or sim' },
    sim: { flag: '--sim', env: 'AGENTD_SIM', expects: BOOLEAN },
    metricsAddress: {
      flag: '--metrics-address',
      env: 'AGENTD_METRICS_ADDRESS',
      expects: 'HOST:PORT such as 127.0.0.1:9101',
    },
    kubeconfig: { flag: '--kubeconfig', env: 'AGENTD_KUBECONFIG', expects: 'a file' },
    registryAuthFile: { flag: '--registry-auth-file', env: 'AGENTD_REGISTRY_AUTH_FILE', expects: 'a file' },
    machineName: { flag: '--machine-name', env: 'AGENTD_MACHINE_NAME', expects: 'a Machine name' },
    watch: { flag: '--watch', env: 'AGENTD_WATCH', expects: BOOLEAN },
    repair: { flag: '--repair', env: 'AGENTD_REPAIR', expects: BOOLEAN },
    fleet: { flag: '--fleet', env: 'AGENTD_FLEET', expects: BOOLEAN },
    fleetNamespace: {
      flag: '--fleet-namespace',
      env: 'AGENTD_FLEET_NAMESPACE',
      expects: 'a Kubernetes namespace name such as agentd-system',
    },
    crdGroup: {
      flag: '--crd-group',
      env: 'AGENTD_CRD_GROUP',
      expects: 'an API group such as unbounded-cloud.io',
    },
    shutdownGrace: { flag: '--shutdown-grace', env: 'AGENTD_SHUTDOWN_GRACE', expects: DURATION },
    machineStartTimeout: {
      flag: '--machine-start-timeout',
      env: 'AGENTD_MACHINE_START_TIMEOUT',
      expects: DURATION,
    },
    verifyTimeout: { flag: '--verify-timeout', env: 'AGENTD_VERIFY_TIMEOUT', expects: DURATION },
    switchOrder: { flag: '--switch-order', env: 'AGENTD_SWITCH_ORDER', expects: 'standby or cold' },
    downloadMinRate: {
      flag: '--download-min-rate',
      env: 'AGENTD_DOWNLOAD_MIN_RATE',
      expects: 'a rate such as 10KiB/s, 1MiB/s or 500B/s',
    },
    downloadRateWindow: {
      flag: '--download-rate-window',
      env: 'AGENTD_DOWNLOAD_RATE_WINDOW',
      expects: DURATION,
    },
    outboundTimeout: { flag: '--outbound-timeout', env: 'AGENTD_OUTBOUND_TIMEOUT', expects: DURATION },
    logLevel: {
      flag: '--log-level',
      env: 'AGENTD_LOG_LEVEL',
      expects: 'one of trace, debug, info, warn, error, fatal, silent',
    },
    logFormat: { flag: '--log-format', env: 'AGENTD_LOG_FORMAT', expects: 'json or pretty' },
  };
