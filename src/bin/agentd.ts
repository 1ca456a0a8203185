#!/usr/bin/env node
/**
 * agentd: the node agent daemon. Flags > AGENTD_* env > YAML config file > defaults.
 * Exit codes: 0 clean shutdown, 1 runtime failure, 2 invalid configuration or usage.
 */
import { Command, CommanderError, Option } from 'commander';
import { loadDaemonConfig } from '../config/load-config.js';
import { formatDuration } from '../config/duration.js';
import type { DaemonConfigInput } from '../config/daemon-config.js';
import { describeError, isAgentError } from '../errors.js';
import { createLogger } from '../log.js';
import { VERSION } from '../version.js';
import type { Daemon } from '../daemon/daemon.js';

process.title = 'agentd';

export function buildAgentdCommand(): Command {
  return new Command('agentd')
    .description(
      'Node agent: keeps the nspawn machine running kubelet at its desired configuration (kube1/kube2 blue/green).',
    )
    .version(VERSION, '-V, --version')
    .addOption(new Option('--config <file>', 'daemon config file (YAML)').env('AGENTD_CONFIG'))
    .option('--socket <path>', 'admin socket (default /run/agentd/agentd.sock)')
    .option('--socket-mode <mode>', 'socket permissions, octal (default 0660)')
    .option('--socket-group <name|gid>', 'group owning the socket')
    .option('--pid-file <path>', 'PID file (default /run/agentd/agentd.pid)')
    .option('--state-dir <dir>', 'operation journal, history, artifact cache (default /var/lib/agentd)')
    .option('--root <dir>', 'resolve every host path under this directory (default /)')
    .addOption(
      new Option('--host <kind>', 'how host commands run (default systemd)').choices(['systemd', 'sim']),
    )
    .option('--sim', 'try-out mode: simulated host, local artifact mirror, paths under ./.agentd/')
    .option('--metrics-address <host:port>', 'TCP listener serving only /metrics, /healthz, /readyz')
    .option('--kubeconfig <file>', 'Kubernetes credentials for the watcher and drain')
    .option('--machine-name <name>', 'the Machine CR to watch (default: the applied config MachineName)')
    .option('--watch', 'run the Machine CR watcher (default: when Kubernetes credentials exist)')
    .option('--no-watch', 'do not run the Machine CR watcher')
    .option('--crd-group <group>', 'API group of the Machine CRD (default unbounded-cloud.io)')
    .option(
      '--shutdown-grace <duration>',
      `how long shutdown waits for in-flight work (default ${formatDuration(30_000)})`,
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

async function main(argv: string[]): Promise<number> {
  const cmd = buildAgentdCommand().exitOverride();
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
    process.stderr.write(`agentd: ${describeError(err)}\n`);
    return 2;
  }
  const logger = createLogger({ level: config.logLevel, format: config.logFormat });
  // The handlers come before startup: a signal during startup recovery must not kill the
  // process on the spot (Node's default), leaving the PID file and the socket behind. It asks
  // startup to stop instead; a second signal exits at once (the journal covers in-flight work).
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

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`agentd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
