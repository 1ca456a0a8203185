/**
 * agentd: the node agent daemon. Flags > AGENTD_* env > YAML config file > defaults.
 * Exit codes: 0 clean shutdown, 1 runtime failure (or the shutdown grace ended with an
 * operation still running), 2 invalid configuration or usage.
 * Bundled as dist/agentd.cjs (scripts/build.ts), run by the npm bin and the release executable.
 */
import { Command, CommanderError, Option } from 'commander';
import { loadDaemonConfig } from '../config/load-config.js';
import { MAX_DURATION_TEXT, formatDuration } from '../config/duration.js';
import { formatByteRate } from '../config/byte-rate.js';
import { DEFAULT_TRANSFER_LIMITS } from '../config/transfer-limits.js';
import {
  DAEMON_OPTIONS,
  DEFAULT_CONFIG_FILE,
  DEFAULT_REGISTRY_AUTH_FILE,
  SWITCH_ORDERS,
  type DaemonConfigInput,
} from '../config/daemon-config.js';
import { describeError, isAgentError } from '../errors.js';
import { createLogger } from '../log.js';
import { VERSION } from '../version.js';
import { exitQuietlyOnBrokenPipe, runProgram } from './run.js';
import type { Daemon } from '../daemon/daemon.js';

/** Every environment variable agentd reads, with its meaning: `agentd --help` and agentd(8) (proxies: src/config/proxy.ts). */
export const DAEMON_ENVIRONMENT: readonly (readonly [string, string])[] = [
  [
    'AGENTD_CONFIG',
    `the config file, like --config (default ${DEFAULT_CONFIG_FILE}, read when it exists, not with --sim)`,
  ],
  ...Object.values(DAEMON_OPTIONS).map((o) => [o.env, `like ${o.flag}`] as const),
  [
    'HTTPS_PROXY',
    'proxy of downloads, image pulls and fleet health checks to https URLs (https_proxy too; not the Kubernetes API, which follows the kubeconfig)',
  ],
  ['HTTP_PROXY', 'the same for http URLs (http_proxy too)'],
  ['NO_COLOR', 'a non-empty value: --log-format pretty without colors (they are only on a terminal anyway)'],
  [
    'NO_PROXY',
    'hosts reached directly: names (and their subdomains), .domains, IPs, CIDR ranges, *; localhost and loopback always',
  ],
  [
    'AGENTD_SIM_FAULTS',
    'simulated host only: faults to inject, <fault>:<machine> comma list (start-fails, kubelet-inactive, latency=<ms>; machine kube1, kube2 or *)',
  ],
  [
    'AGENTD_FAILPOINTS',
    'tests only: named points where agentd kills itself, to exercise crash recovery; never set it on a host',
  ],
];

/** The examples of `agentd --help` and agentd(8). */
const EXAMPLES = [
  'agentd --sim                                  # try-out: simulated host, everything under ./.agentd/',
  `agentd --config ${DEFAULT_CONFIG_FILE} --log-level debug`,
  'AGENTD_LOG_FORMAT=pretty agentd --sim         # readable logs',
  'agentd --kubeconfig /etc/agentd/kubeconfig --machine-name worker-01 --metrics-address 0.0.0.0:9101',
];

/** What `agentd --help` adds after the options: the config file, the environment, examples. */
function helpAfter(): string {
  const width = Math.max(...DAEMON_ENVIRONMENT.map(([name]) => name.length));
  return [
    '',
    'Configuration file:',
    `  ${DEFAULT_CONFIG_FILE} is read when it exists (not with --sim); --config FILE (or AGENTD_CONFIG) names another.`,
    '  YAML; its keys are the flag names in camelCase (socketGroup: agentd, shutdownGrace: 30s).',
    '  Precedence: flag > environment variable > config file > default.',
    `  Durations: 30s, 5m, 1500ms, 1h30m, or seconds (30); at most ${MAX_DURATION_TEXT}.`,
    '',
    'Environment:',
    ...DAEMON_ENVIRONMENT.map(([name, meaning]) => `  ${name.padEnd(width)}  ${meaning}`),
    '',
    'Examples:',
    ...EXAMPLES.map((e) => `  $ ${e}`),
    '',
  ].join('\n');
}

export function buildAgentdCommand(): Command {
  return new Command('agentd')
    .description(
      'Node agent: keeps the nspawn machine running kubelet at its desired configuration (kube1/kube2 blue/green).',
    )
    .version(VERSION, '-V, --version')
    .addOption(new Option('--config <file>', 'daemon config file (YAML)').env('AGENTD_CONFIG'))
    .option('--socket <path>', 'admin socket (default /run/agentd/agentd.sock)')
    .option('--socket-mode <mode>', 'socket permissions, octal, none for others (default 0660)')
    .option('--socket-group <name|gid>', 'group owning the socket: a name (looked up through NSS) or a GID')
    .option('--pid-file <path>', 'PID file (default /run/agentd/agentd.pid)')
    .option('--state-dir <dir>', 'operation journal, history, artifact cache (default /var/lib/agentd)')
    .option('--root <dir>', 'resolve every host path under this directory (default /)')
    .addOption(
      new Option('--host <kind>', 'how host commands run (default systemd)').choices(['systemd', 'sim']),
    )
    .option(
      '--sim',
      'try-out mode: simulated host, local artifact mirror, paths under ./.agentd/ (not with --host systemd)',
    )
    .option('--metrics-address <host:port>', 'TCP listener serving only /metrics, /healthz, /readyz')
    .option('--kubeconfig <file>', 'Kubernetes credentials for the watcher and drain')
    .option(
      '--registry-auth-file <file>',
      `credentials of private image registries, Docker's config.json format (default ${DEFAULT_REGISTRY_AUTH_FILE}, read at each pull when it exists)`,
    )
    .option('--machine-name <name>', 'the Machine CR to watch (default: the applied config MachineName)')
    .option('--watch', 'run the Machine CR watcher (default: when Kubernetes credentials exist)')
    .option('--no-watch', 'do not run the Machine CR watcher')
    .option('--repair', 'restart a stopped active machine or failed kubelet between requests (default)')
    .option('--no-repair', 'do not repair the node between requests')
    .option('--fleet', 'pass the fleet gate when a fleet policy exists in the cluster (default)')
    .option('--no-fleet', 'never wait for the fleet gate: this node is not part of a fleet rollout')
    .option(
      '--fleet-namespace <namespace>',
      'namespace of the fleet policy, failures and slot Leases (default agentd-system)',
    )
    .option('--crd-group <group>', 'API group of the Machine CRD (default unbounded-cloud.io)')
    .option(
      '--shutdown-grace <duration>',
      `how long shutdown waits for in-flight work (default ${formatDuration(30_000)})`,
    )
    .option(
      '--machine-start-timeout <duration>',
      `how long a machine may take to boot and answer (default ${formatDuration(120_000)})`,
    )
    .option(
      '--verify-timeout <duration>',
      `how long kubelet may take to turn active and healthy (default ${formatDuration(180_000)})`,
    )
    .addOption(
      new Option(
        '--switch-order <order>',
        'standby: boot the new machine beside the serving one before the switch; cold: boot it in the down window (default standby)',
      ).choices(SWITCH_ORDERS),
    )
    .option(
      '--download-min-rate <rate>',
      `the floor of a download's average rate, such as 10KiB/s (default ${formatByteRate(DEFAULT_TRANSFER_LIMITS.minRateBytesPerSecond)})`,
    )
    .option(
      '--download-rate-window <duration>',
      `the window a download's rate is averaged over (default ${formatDuration(DEFAULT_TRANSFER_LIMITS.rateWindowMs)})`,
    )
    .option(
      '--outbound-timeout <duration>',
      `the total deadline of an outbound call, plus a download's declared size at the floor rate (default ${formatDuration(DEFAULT_TRANSFER_LIMITS.requestTimeoutMs)})`,
    )
    .addOption(
      new Option('--log-level <level>', 'log level (default info)').choices([
        'trace',
        'debug',
        'info',
        'warn',
        'error',
        'fatal',
        'silent',
      ]),
    )
    .addOption(
      new Option('--log-format <format>', 'json, or pretty (default on a terminal)').choices([
        'json',
        'pretty',
      ]),
    )
    .addHelpText('after', helpAfter())
    .allowExcessArguments(false);
}

/** Only the flags the user actually passed (commander reports no defaults: we set none). */
function givenFlags(cmd: Command): Partial<Record<keyof DaemonConfigInput, unknown>> & { config?: string } {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(cmd.opts())) {
    const source = cmd.getOptionValueSource(key);
    if (value !== undefined && (source === 'cli' || (key === 'config' && source === 'env'))) out[key] = value;
  }
  return out;
}

/** Run the daemon until it stops; resolves to the process exit code. */
export async function runAgentd(argv: string[]): Promise<number> {
  process.title = 'agentd';
  // `agentd --help | head` exits quietly. Only until the daemon starts: a daemon whose stdout
  // (the journal) breaks must not exit 0 without a word.
  const removeBrokenPipeHandlers = exitQuietlyOnBrokenPipe();
  // Usage errors read like every other error of agentd: `agentd: <what is wrong>`.
  const cmd = buildAgentdCommand()
    .exitOverride()
    .configureOutput({
      outputError: (message, write) => write(`agentd: ${message.replace(/^error: /, '')}`),
    })
    .showHelpAfterError('(run agentd --help for the options)');
  try {
    cmd.parse(argv);
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    throw err;
  }
  let config;
  try {
    config = loadDaemonConfig({
      flags: givenFlags(cmd),
      env: process.env,
      cwd: process.cwd(),
      isTTY: Boolean(process.stdout.isTTY),
    });
  } catch (err) {
    // One line per bad value, each its own `agentd: ` line.
    for (const line of describeError(err).split('\n')) process.stderr.write(`agentd: ${line}\n`);
    return 2;
  }
  removeBrokenPipeHandlers();
  const logger = await createLogger({ level: config.logLevel, format: config.logFormat });
  // The handlers come before startup, before the PID file is written: a signal during startup
  // recovery must not kill the process on the spot (Node's default), leaving the PID file and
  // the socket behind. It asks startup to stop instead; a second signal exits at once (the
  // journal covers in-flight work).
  const startup = new AbortController();
  let daemon: Daemon | null = null;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now; the journal covers in-flight work');
      process.exit(1);
    }
    if (daemon) void daemon.stop(signal);
    else startup.abort(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Node's default for these would kill the daemon (SIGHUP, SIGUSR2) with its PID file and
  // socket left behind, or open the inspector on 127.0.0.1:9229 in a root process (SIGUSR1).
  // agentd has no use for them: each is logged and ignored (docs/operations.md, "Signals").
  process.on('SIGHUP', () =>
    logger.warn(
      { signal: 'SIGHUP' },
      'SIGHUP ignored: agentd has no reload; to apply a changed config file, flag or environment, restart it (systemctl restart agentd)',
    ),
  );
  process.on('SIGUSR1', () =>
    logger.info({ signal: 'SIGUSR1' }, 'SIGUSR1 ignored: agentd never opens the Node.js inspector'),
  );
  process.on('SIGUSR2', () =>
    logger.info({ signal: 'SIGUSR2' }, 'SIGUSR2 ignored: agentd has no use for it'),
  );
  try {
    // Loaded only now: a bad flag or config value is reported without loading the server.
    const { startDaemon } = await import('../daemon/daemon.js');
    daemon = await startDaemon(config, { logger, stopRequested: startup.signal });
  } catch (err) {
    process.stderr.write(`agentd: ${describeError(err)}\n`);
    return isAgentError(err) && err.code === 'INVALID_CONFIG' ? 2 : 1;
  }
  await daemon.stopped;
  return 0;
}

/**
 * The bundle's entry (dist/agentd.cjs): run agentd with this process's arguments. The process
 * exits once the daemon has stopped (or failed to start): whatever might still be pending then
 * must not keep a stopped agentd alive.
 */
export function run(): void {
  runProgram('agentd', () => runAgentd(process.argv), { exitWhenSettled: true });
}
