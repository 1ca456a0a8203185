import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_CRD_GROUP,
  DEFAULT_PID_FILE,
  DEFAULT_REGISTRY_AUTH_FILE,
  DEFAULT_SOCKET,
  DEFAULT_STATE_DIR,
} from '../../../src/config/daemon-config.js';
import { loadDaemonConfig, type LoadConfigInput } from '../../../src/config/load-config.js';
import { DIRECT } from '../../../src/config/proxy.js';
import { AgentError } from '../../../src/errors.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Load with nothing from the host: no /etc/agentd/config.yaml, no inherited env. */
function load(partial: Partial<LoadConfigInput> = {}) {
  return loadDaemonConfig({
    flags: {},
    env: {},
    cwd: dir,
    isTTY: false,
    defaultConfigFile: path.join(dir, 'no-default-config.yaml'),
    ...partial,
  });
}

async function configFile(text: string, name = 'agentd.yaml'): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, text);
  return file;
}

/** The INVALID_CONFIG error `fn` throws. */
function invalid(fn: () => unknown): AgentError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    expect((err as AgentError).code).toBe('INVALID_CONFIG');
    return err as AgentError;
  }
  throw new Error('expected INVALID_CONFIG, nothing was thrown');
}

describe('loadDaemonConfig defaults', () => {
  it('fills every default from docs/cli.md and freezes the result', () => {
    const c = load();
    expect(c).toEqual({
      configFile: null,
      socket: DEFAULT_SOCKET,
      socketMode: 0o660,
      socketGroup: null,
      pidFile: DEFAULT_PID_FILE,
      stateDir: DEFAULT_STATE_DIR,
      root: '/',
      host: 'systemd',
      sim: false,
      metricsAddress: null,
      kubeconfig: null,
      registryAuthFile: DEFAULT_REGISTRY_AUTH_FILE,
      machineName: null,
      watch: null,
      repair: true,
      fleet: true,
      fleetNamespace: 'agentd-system',
      crdGroup: DEFAULT_CRD_GROUP,
      shutdownGraceMs: 30_000,
      machineStartTimeoutMs: 120_000,
      verifyTimeoutMs: 180_000,
      switchOrder: 'standby',
      transferLimits: { minRateBytesPerSecond: 10 * 1024, rateWindowMs: 60_000, requestTimeoutMs: 120_000 },
      logLevel: 'info',
      logFormat: 'json',
      // No proxy variable in the environment: every outbound request goes directly.
      proxy: DIRECT,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('takes the proxy of outbound requests from the environment, and names a bad variable', () => {
    const c = load({ env: { HTTPS_PROXY: 'proxy.corp:3128', NO_PROXY: '.corp' } });
    expect(c.proxy.https?.url.href).toBe('http://proxy.corp:3128/');
    expect(c.proxy.noProxy).toBe('.corp');
    expect(() => load({ env: { HTTP_PROXY: 'ftp://proxy.corp' } })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('HTTP_PROXY=') }),
    );
  });

  it('takes the download bounds from a flag, the environment or the file, and names a bad one', async () => {
    expect(load({ flags: { downloadMinRate: '1MiB/s' } }).transferLimits.minRateBytesPerSecond).toBe(
      1024 ** 2,
    );
    expect(load({ env: { AGENTD_DOWNLOAD_RATE_WINDOW: '5m' } }).transferLimits.rateWindowMs).toBe(300_000);
    const file = await configFile('downloadMinRate: 500B/s\noutboundTimeout: 30s\n', 'bounds.yaml');
    expect(load({ flags: { config: file } }).transferLimits).toEqual({
      minRateBytesPerSecond: 500,
      rateWindowMs: 60_000,
      requestTimeoutMs: 30_000,
    });
    expect(() => load({ flags: { downloadMinRate: 'fast' } })).toThrow(/--download-min-rate.*10KiB\/s/);
    expect(() => load({ flags: { downloadMinRate: '0' } })).toThrow(/at least 1B\/s/);
    expect(() => load({ flags: { outboundTimeout: '10ms' } })).toThrow(/--outbound-timeout.*at least 1s/);
  });

  it('takes the machine start and verify timeouts from a flag, the environment or the file', async () => {
    expect(load({ flags: { machineStartTimeout: '45s' } }).machineStartTimeoutMs).toBe(45_000);
    expect(load({ env: { AGENTD_VERIFY_TIMEOUT: '2m' } }).verifyTimeoutMs).toBe(120_000);
    const file = await configFile('machineStartTimeout: 30s\nverifyTimeout: 15\n', 'timeouts.yaml');
    const c = load({ flags: { config: file } });
    expect(c.machineStartTimeoutMs).toBe(30_000);
    expect(c.verifyTimeoutMs).toBe(15_000);
    expect(() => load({ flags: { verifyTimeout: 'soon' } })).toThrow(/--verify-timeout/);
  });

  it('logs pretty on a terminal unless a format is given', () => {
    expect(load({ isTTY: true }).logFormat).toBe('pretty');
    expect(load({ isTTY: true, flags: { logFormat: 'json' } }).logFormat).toBe('json');
  });

  it('reads the default config file when it exists and none is named', async () => {
    const file = await configFile('logLevel: debug\n', 'default.yaml');
    const c = load({ defaultConfigFile: file });
    expect(c.configFile).toBe(file);
    expect(c.logLevel).toBe('debug');
  });

  it('--sim (flag or AGENTD_SIM) leaves the host config file alone; a file it names is read', async () => {
    // An installed host's config: a try-out must not take its state directory or root.
    const file = await configFile(`stateDir: ${path.join(dir, 'production')}\nroot: /\n`, 'default.yaml');
    const sim = path.join(dir, '.agentd');
    for (const c of [
      load({ defaultConfigFile: file, flags: { sim: true } }),
      load({ defaultConfigFile: file, env: { AGENTD_SIM: '1' } }),
    ]) {
      expect(c.configFile).toBeNull();
      expect(c.stateDir).toBe(path.join(sim, 'state'));
      expect(c.root).toBe(path.join(sim, 'root'));
    }
    const named = load({ defaultConfigFile: file, flags: { sim: true, config: file } });
    expect(named.configFile).toBe(file);
    expect(named.stateDir).toBe(path.join(dir, 'production'));
    // Without --sim, the host's file holds.
    expect(load({ defaultConfigFile: file, env: { AGENTD_SIM: 'no' } }).configFile).toBe(file);
  });

  it('--sim puts every path not given under ./.agentd and uses the simulated host', () => {
    const c = load({ flags: { sim: true } });
    const sim = path.join(dir, '.agentd');
    expect(c).toMatchObject({
      sim: true,
      host: 'sim',
      socket: path.join(sim, 'agentd.sock'),
      pidFile: path.join(sim, 'agentd.pid'),
      stateDir: path.join(sim, 'state'),
      root: path.join(sim, 'root'),
      registryAuthFile: path.join(sim, 'registry-auth.json'),
    });
  });

  it('takes the registry auth file from a flag, the environment or the file, relative to the working directory', () => {
    expect(load({ flags: { registryAuthFile: 'auth.json' } }).registryAuthFile).toBe(
      path.join(dir, 'auth.json'),
    );
    expect(load({ env: { AGENTD_REGISTRY_AUTH_FILE: '/etc/x.json' } }).registryAuthFile).toBe('/etc/x.json');
    expect(() => load({ flags: { registryAuthFile: '' } })).toThrow(/--registry-auth-file/);
  });

  it('--sim keeps paths that are given explicitly', () => {
    const c = load({ flags: { sim: true, socket: 'my.sock', host: 'sim' }, env: { AGENTD_ROOT: '/r' } });
    expect(c.socket).toBe(path.join(dir, 'my.sock'));
    expect(c.root).toBe('/r');
    expect(c.host).toBe('sim');
    expect(c.pidFile).toBe(path.join(dir, '.agentd', 'agentd.pid'));
  });

  it('--sim with --host systemd is refused, naming both as they were given', async () => {
    // The try-out mode would run real host commands against the try-out's paths.
    const why = /contradict each other: --sim is the try-out mode on the simulated host/;
    for (const [input, named] of [
      [{ flags: { sim: true, host: 'systemd' } }, '--sim and --host systemd'],
      [{ flags: { host: 'systemd' }, env: { AGENTD_SIM: '1' } }, 'AGENTD_SIM=1 and --host systemd'],
      [{ flags: { sim: true }, env: { AGENTD_HOST: 'systemd' } }, '--sim and AGENTD_HOST=systemd'],
    ] as const) {
      const err = invalid(() => load(input));
      expect(err.message).toContain(named);
      expect(err.message).toMatch(why);
    }
    const file = await configFile('sim: true\nhost: systemd\n');
    expect(invalid(() => load({ flags: { config: file } })).message).toContain(
      `${file}: sim: true and host: systemd contradict each other`,
    );
    // --host sim without --sim, and --sim alone, stay as they were.
    expect(load({ flags: { sim: true, host: 'sim' } }).host).toBe('sim');
    expect(load({ flags: { host: 'systemd' }, env: { AGENTD_SIM: 'no' } }).host).toBe('systemd');
  });

  it('AGENTD_SIM=1 is --sim', () => {
    expect(load({ env: { AGENTD_SIM: '1' } }).host).toBe('sim');
    expect(load({ env: { AGENTD_SIM: 'off' } }).host).toBe('systemd');
  });

  it('resolves relative paths against the working directory', () => {
    const c = load({ flags: { socket: 'a/s.sock', pidFile: './p.pid', stateDir: 'st', kubeconfig: 'kc' } });
    expect(c.socket).toBe(path.join(dir, 'a/s.sock'));
    expect(c.pidFile).toBe(path.join(dir, 'p.pid'));
    expect(c.stateDir).toBe(path.join(dir, 'st'));
    expect(c.kubeconfig).toBe(path.join(dir, 'kc'));
  });

  it('parses the metrics address, IPv6 included', () => {
    expect(load({ flags: { metricsAddress: '127.0.0.1:9101' } }).metricsAddress).toEqual({
      host: '127.0.0.1',
      port: 9101,
    });
    expect(load({ flags: { metricsAddress: '[::1]:9101' } }).metricsAddress).toEqual({
      host: '::1',
      port: 9101,
    });
    expect(load({ flags: { metricsAddress: 'localhost:0' } }).metricsAddress).toEqual({
      host: 'localhost',
      port: 0,
    });
  });

  it('accepts socket modes with and without a leading 0 or 0o', () => {
    expect(load({ flags: { socketMode: '0600' } }).socketMode).toBe(0o600);
    expect(load({ flags: { socketMode: '640' } }).socketMode).toBe(0o640);
    expect(load({ flags: { socketMode: '0o660' } }).socketMode).toBe(0o660);
  });

  it('--no-watch and --watch', () => {
    expect(load({ flags: { watch: false } }).watch).toBe(false);
    expect(load({ flags: { watch: true } }).watch).toBe(true);
    expect(load({ env: { AGENTD_WATCH: 'no' } }).watch).toBe(false);
  });

  it('--no-fleet, AGENTD_FLEET and the fleet key', async () => {
    expect(load().fleet).toBe(true);
    expect(load({ flags: { fleet: false } }).fleet).toBe(false);
    expect(load({ env: { AGENTD_FLEET: 'false' } }).fleet).toBe(false);
    expect(load({ flags: { config: await configFile('fleet: false\n') } }).fleet).toBe(false);
  });

  it('--fleet-namespace, AGENTD_FLEET_NAMESPACE and the fleetNamespace key; a bad name is named', async () => {
    expect(load().fleetNamespace).toBe('agentd-system');
    expect(load({ flags: { fleetNamespace: 'rollout' } }).fleetNamespace).toBe('rollout');
    expect(load({ env: { AGENTD_FLEET_NAMESPACE: 'from-env' } }).fleetNamespace).toBe('from-env');
    const file = await configFile('fleetNamespace: from-file\n');
    expect(load({ flags: { config: file } }).fleetNamespace).toBe('from-file');
    expect(
      load({ flags: { config: file }, env: { AGENTD_FLEET_NAMESPACE: 'env-wins' } }).fleetNamespace,
    ).toBe('env-wins');
    for (const bad of ['Agentd', 'agentd_system', '-x', 'a'.repeat(64), '']) {
      expect(() => load({ flags: { fleetNamespace: bad } })).toThrow(
        /--fleet-namespace.*expected a Kubernetes namespace name/s,
      );
    }
  });
});

describe('loadDaemonConfig precedence: flag > env > file > default', () => {
  const options = [
    // [key, env var, file text, env value, flag value, expected from file, from env, from flag]
    {
      key: 'socket',
      env: 'AGENTD_SOCKET',
      file: 'socket: /file.sock',
      envValue: '/env.sock',
      flag: '/flag.sock',
      fromFile: '/file.sock',
      fromEnv: '/env.sock',
      fromFlag: '/flag.sock',
      out: 'socket',
    },
    {
      key: 'logLevel',
      env: 'AGENTD_LOG_LEVEL',
      file: 'logLevel: warn',
      envValue: 'debug',
      flag: 'error',
      fromFile: 'warn',
      fromEnv: 'debug',
      fromFlag: 'error',
      out: 'logLevel',
    },
    {
      key: 'shutdownGrace',
      env: 'AGENTD_SHUTDOWN_GRACE',
      file: 'shutdownGrace: 1m',
      envValue: '10s',
      flag: '1500ms',
      fromFile: 60_000,
      fromEnv: 10_000,
      fromFlag: 1500,
      out: 'shutdownGraceMs',
    },
    {
      key: 'socketMode',
      env: 'AGENTD_SOCKET_MODE',
      file: 'socketMode: 0640',
      envValue: '0600',
      flag: '0700',
      fromFile: 0o640,
      fromEnv: 0o600,
      fromFlag: 0o700,
      out: 'socketMode',
    },
    {
      key: 'crdGroup',
      env: 'AGENTD_CRD_GROUP',
      file: 'crdGroup: file.example.io',
      envValue: 'env.example.io',
      flag: 'unbounded-kube.io',
      fromFile: 'file.example.io',
      fromEnv: 'env.example.io',
      fromFlag: 'unbounded-kube.io',
      out: 'crdGroup',
    },
  ] as const;

  for (const o of options) {
    it(`${o.key}: file over default, env over file, flag over env`, async () => {
      const file = await configFile(`${o.file}\n`);
      const flagsFile = { config: file };
      const get = (c: ReturnType<typeof load>): unknown => c[o.out];
      expect(get(load({ flags: flagsFile }))).toEqual(o.fromFile);
      expect(get(load({ flags: flagsFile, env: { [o.env]: o.envValue } }))).toEqual(o.fromEnv);
      expect(get(load({ flags: { ...flagsFile, [o.key]: o.flag }, env: { [o.env]: o.envValue } }))).toEqual(
        o.fromFlag,
      );
    });
  }

  it('an empty env value does not override the file', async () => {
    const file = await configFile('logLevel: warn\n');
    expect(load({ flags: { config: file }, env: { AGENTD_LOG_LEVEL: '' } }).logLevel).toBe('warn');
  });

  it('AGENTD_CONFIG names the file when --config does not, relative to the working directory', async () => {
    await configFile('logLevel: trace\n', 'from-env.yaml');
    await configFile('logLevel: fatal\n', 'from-flag.yaml');
    expect(load({ env: { AGENTD_CONFIG: 'from-env.yaml' } }).logLevel).toBe('trace');
    expect(
      load({ flags: { config: 'from-flag.yaml' }, env: { AGENTD_CONFIG: 'from-env.yaml' } }).logLevel,
    ).toBe('fatal');
  });
});

describe('loadDaemonConfig YAML numbers read like the same text given as a flag', () => {
  it('socketMode: 0660 is octal 0660, and 0440 is not decimal 440 (= 0670)', async () => {
    expect(load({ flags: { config: await configFile('socketMode: 0660\n') } }).socketMode).toBe(0o660);
    expect(load({ flags: { config: await configFile('socketMode: 0440\n') } }).socketMode).toBe(0o440);
    expect(load({ flags: { config: await configFile('socketMode: 0o600\n') } }).socketMode).toBe(0o600);
    expect(load({ flags: { config: await configFile('socketMode: "0640"\n') } }).socketMode).toBe(0o640);
  });

  it('shutdownGrace: 30 is 30 seconds, as --shutdown-grace 30 is', async () => {
    expect(load({ flags: { config: await configFile('shutdownGrace: 30\n') } }).shutdownGraceMs).toBe(30_000);
    expect(load({ flags: { shutdownGrace: '30' } }).shutdownGraceMs).toBe(30_000);
  });

  it('socketGroup: 0 is GID 0, sim: true and watch: false are booleans', async () => {
    const c = load({ flags: { config: await configFile('socketGroup: 0\nsim: true\nwatch: false\n') } });
    expect(c.socketGroup).toBe('0');
    expect(c.sim).toBe(true);
    expect(c.watch).toBe(false);
  });

  it('an empty file or a file with only comments is no options', async () => {
    expect(load({ flags: { config: await configFile('') } }).logLevel).toBe('info');
    expect(load({ flags: { config: await configFile('# nothing\n') } }).logLevel).toBe('info');
  });
});

describe('loadDaemonConfig rejects bad values with INVALID_CONFIG naming the option and its source', () => {
  const badFlags: [string, Record<string, unknown>, RegExp][] = [
    ['socket mode not octal', { socketMode: '999' }, /--socket-mode.*"999"/],
    ['socket mode too wide', { socketMode: '07777' }, /--socket-mode.*"07777"/],
    ['socket mode not a number', { socketMode: 'rw-rw----' }, /--socket-mode/],
    ['duration with a unit it does not know', { shutdownGrace: '5x' }, /--shutdown-grace.*"5x"/],
    ['negative duration', { shutdownGrace: '-1s' }, /--shutdown-grace.*"-1s"/],
    ['metrics address without a port', { metricsAddress: 'localhost' }, /--metrics-address.*"localhost"/],
    ['metrics address port too big', { metricsAddress: '127.0.0.1:70000' }, /--metrics-address.*65535/],
    ['metrics address with a path', { metricsAddress: 'http://x:1' }, /--metrics-address/],
    ['host not systemd or sim', { host: 'docker' }, /--host.*"docker"/],
    ['switch order not standby or cold', { switchOrder: 'warm' }, /--switch-order.*"warm"/],
    ['log level not a level', { logLevel: 'loud' }, /--log-level.*"loud"/],
    ['log format not json or pretty', { logFormat: 'xml' }, /--log-format.*"xml"/],
    ['crd group not a DNS name', { crdGroup: 'Not_A_Group' }, /--crd-group.*"Not_A_Group"/],
    ['empty socket path', { socket: '' }, /--socket/],
  ];
  for (const [name, flags, pattern] of badFlags) {
    it(`flag: ${name}`, () => {
      const err = invalid(() => load({ flags }));
      expect(err.message).toMatch(pattern);
      expect(err.message).toMatch(/expected|must|Invalid|Too/);
    });
  }

  it('names the env var when the value came from the environment', () => {
    const err = invalid(() => load({ env: { AGENTD_SOCKET_MODE: '888' } }));
    expect(err.message).toContain('--socket-mode (from env AGENTD_SOCKET_MODE)');
    expect(err.message).toContain('"888"');
    const err2 = invalid(() => load({ env: { AGENTD_LOG_LEVEL: 'loud' } }));
    expect(err2.message).toContain('AGENTD_LOG_LEVEL');
    const err3 = invalid(() => load({ env: { AGENTD_SIM: 'maybe' } }));
    expect(err3.message).toContain('AGENTD_SIM');
    const err4 = invalid(() => load({ env: { AGENTD_SWITCH_ORDER: 'hot' } }));
    expect(err4.message).toContain('--switch-order (from env AGENTD_SWITCH_ORDER)');
  });

  it('names the file and key when the value came from the file', async () => {
    const file = await configFile('metricsAddress: nowhere\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toBe(
      `${file}: metricsAddress: expected HOST:PORT such as 127.0.0.1:9101, got "nowhere"`,
    );
  });

  it('reports every bad option at once', () => {
    const err = invalid(() => load({ flags: { socketMode: 'x', shutdownGrace: 'y', host: 'z' } }));
    expect(err.message).toContain('--socket-mode');
    expect(err.message).toContain('--shutdown-grace');
    expect(err.message).toContain('--host');
    expect(Array.isArray(err.data.issues)).toBe(true);
  });

  it('a bad file value is reported even when valid values surround it', async () => {
    const file = await configFile('logLevel: debug\nshutdownGrace: soon\nhost: sim\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toBe(
      `${file}: shutdownGrace: expected a duration such as 30s, 5m or 1500ms, got "soon"`,
    );
  });

  it('a flag fixes a bad file value (the file value is never looked at)', async () => {
    const file = await configFile('logLevel: loud\n');
    expect(load({ flags: { config: file, logLevel: 'warn' } }).logLevel).toBe('warn');
  });

  it('unknown YAML key', async () => {
    const file = await configFile('logLevel: info\nsocketPath: /x.sock\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(file);
    expect(err.message).toContain('socketPath');
  });

  it('YAML that is a list, not a mapping', async () => {
    const file = await configFile('- socket: /x\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/mapping.*list/);
  });

  it('YAML that is a scalar, not a mapping', async () => {
    const file = await configFile('just words\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/mapping.*string/);
  });

  it('YAML that does not parse', async () => {
    const file = await configFile('socket: [unclosed\n');
    const err = invalid(() => load({ flags: { config: file } }));
    // One line: where, then what; not the parser's excerpt with a caret under an empty line.
    expect(err.message).toMatch(
      new RegExp(`^${file}: at the end of the file: not valid YAML: Flow sequence .* end with a \\]$`),
    );
    await configFile('logLevel: info\nsocket: a: b\n');
    const err2 = invalid(() => load({ flags: { config: file } }));
    expect(err2.message).toBe(
      `${file}: line 2, column 9: not valid YAML: Nested mappings are not allowed in compact mappings`,
    );
  });

  it('a duplicate YAML key', async () => {
    const file = await configFile('logLevel: info\nlogLevel: debug\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toBe(`${file}: logLevel: given twice (line 2); give each key once`);
  });

  it('a YAML key that is not a name', async () => {
    const file = await configFile('logLevel: info\n? [socket]\n: /x.sock\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toBe(`${file}: expected option names as keys, got a list as a key (line 2)`);
  });

  it('a config file that does not exist', () => {
    const file = path.join(dir, 'missing.yaml');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(`--config ${file}`);
    expect(err.message).toContain('cannot read');
    expect(err.cause).toBeDefined();
  });

  it('a config file that is a directory', async () => {
    const sub = path.join(dir, 'conf.d');
    await mkdir(sub);
    const err = invalid(() => load({ flags: { config: sub } }));
    expect(err.message).toContain(`--config ${sub}`);
    expect(err.message).toContain('cannot read');
  });

  it('AGENTD_CONFIG naming a missing file', () => {
    const err = invalid(() => load({ env: { AGENTD_CONFIG: 'nope.yaml' } }));
    expect(err.message).toContain(path.join(dir, 'nope.yaml'));
  });
});

describe('loadDaemonConfig bounds what would fail only later', () => {
  const durations = [
    ['shutdownGrace', '--shutdown-grace', 'AGENTD_SHUTDOWN_GRACE', 'shutdownGraceMs'],
    [
      'machineStartTimeout',
      '--machine-start-timeout',
      'AGENTD_MACHINE_START_TIMEOUT',
      'machineStartTimeoutMs',
    ],
    ['verifyTimeout', '--verify-timeout', 'AGENTD_VERIFY_TIMEOUT', 'verifyTimeoutMs'],
  ] as const;
  for (const [key, flag, env, out] of durations) {
    it(`${key}: at most 596h, the longest a timer can wait (a longer one would fire at once)`, async () => {
      expect(load({ flags: { [key]: '596h' } })[out]).toBe(596 * 3_600_000);
      expect(2 ** 31 - 1).toBeGreaterThanOrEqual(596 * 3_600_000);
      for (const long of ['596h1ms', '597h', '2147483648ms', '99999999999999999999h', '30000000']) {
        expect(invalid(() => load({ flags: { [key]: long } })).message).toBe(
          `invalid ${flag}: expected a duration of at most 596h, got "${long}"`,
        );
      }
      expect(invalid(() => load({ env: { [env]: '600h' } })).message).toContain(
        `invalid ${flag} (from env ${env}): expected a duration of at most 596h`,
      );
      const file = await configFile(`${key}: 1000h\n`);
      expect(invalid(() => load({ flags: { config: file } })).message).toBe(
        `${file}: ${key}: expected a duration of at most 596h, got "1000h"`,
      );
      // A number of milliseconds given in code is bounded the same.
      expect(invalid(() => load({ flags: { [key]: 2 ** 31 } })).message).toContain('at most 596h');
    });
  }

  it('--socket: at most 107 bytes (a unix socket path), checked before anything is created', async () => {
    const fits = `/${'s'.repeat(101)}.sock`;
    expect(Buffer.byteLength(fits)).toBe(107);
    expect(load({ flags: { socket: fits } }).socket).toBe(fits);
    const long = `/${'s'.repeat(102)}.sock`;
    expect(invalid(() => load({ flags: { socket: long } })).message).toBe(
      `invalid --socket: the path ${long} is 108 bytes long, expected at most 107 (the limit of a unix socket path, 108 bytes with its final NUL); choose a shorter path`,
    );
    // Bytes, not characters; a relative path counts as the absolute path it resolves to.
    const wide = `/${'é'.repeat(52)}.sock`;
    expect(invalid(() => load({ env: { AGENTD_SOCKET: wide } })).message).toContain(
      'invalid --socket (from env AGENTD_SOCKET): the path',
    );
    const relative = 'r'.repeat(107 - dir.length);
    expect(invalid(() => load({ flags: { socket: relative } })).message).toContain(
      `the path ${path.join(dir, relative)} is 108 bytes long`,
    );
    const file = await configFile(`socket: ${long}\n`);
    expect(invalid(() => load({ flags: { config: file } })).message).toMatch(
      new RegExp(`^${file}: socket: the path /s+\\.sock is 108 bytes long`),
    );
    // --sim's default under a deep working directory.
    const deep = path.join(dir, 'd'.repeat(100));
    expect(invalid(() => load({ cwd: deep, flags: { sim: true } })).message).toContain(
      `invalid --socket (its default): the path ${path.join(deep, '.agentd', 'agentd.sock')} is`,
    );
  });

  it('--socket-mode: refuses any access for others (the socket controls the node as root)', () => {
    for (const ok of ['0660', '0600', '0640', '0700', '0770', '0000']) {
      expect(load({ flags: { socketMode: ok } }).socketMode).toBe(parseInt(ok, 8));
    }
    for (const bad of ['0666', '0777', '0604', '0662', '0661', '0o666']) {
      expect(invalid(() => load({ flags: { socketMode: bad } })).message).toBe(
        `invalid --socket-mode: expected a mode that gives others no access, such as 0660 or 0600 (the socket controls the node as root: give access through --socket-group), got "${bad}"`,
      );
    }
    expect(invalid(() => load({ env: { AGENTD_SOCKET_MODE: '666' } })).message).toContain(
      'invalid --socket-mode (from env AGENTD_SOCKET_MODE): expected a mode that gives others no access',
    );
    expect(invalid(() => load({ flags: { socketMode: 0o666 } })).message).toContain('gives others no access');
  });

  it('--socket-group: a group name or a GID, nothing a lookup could only fail on later', async () => {
    for (const ok of ['agentd', 'agentd-ops', '_ops', 'Domain.Users', 'machine$', '0', '4294967294']) {
      expect(load({ flags: { socketGroup: ok } }).socketGroup).toBe(ok);
    }
    for (const bad of ['-1', '1.5', 'ops team', 'a:b', '-g', '']) {
      expect(invalid(() => load({ flags: { socketGroup: bad } })).message).toBe(
        `invalid --socket-group: expected a group name (such as agentd) or a numeric GID, got ${JSON.stringify(bad)}`,
      );
    }
    expect(invalid(() => load({ flags: { socketGroup: '4294967295' } })).message).toContain(
      'expected a GID of at most 4294967294',
    );
    const file = await configFile('socketGroup: -1\n');
    expect(invalid(() => load({ flags: { config: file } })).message).toBe(
      `${file}: socketGroup: expected a group name (such as agentd) or a numeric GID, got "-1"`,
    );
  });
});

describe('loadDaemonConfig messages: <file>: <key>: what is wrong, what was expected', () => {
  it('a value of the wrong kind says what the option takes and what it got, once', async () => {
    const cases: [string, string][] = [
      [
        'shutdownGrace: [1, 2]',
        'shutdownGrace: expected a duration such as 30s, 5m or 1500ms, got a list [1,2]',
      ],
      ['shutdownGrace:', 'shutdownGrace: expected a duration such as 30s, 5m or 1500ms, got no value'],
      ['socket: null', 'socket: expected a path, got no value'],
      ['socket: {a: 1}', 'socket: expected a path, got a mapping {"a":1}'],
      ['socket: ""', 'socket: expected a path, got ""'],
      ['socketMode: ~', 'socketMode: expected an octal mode such as 0660, got no value'],
      ['sim: maybe', 'sim: expected true or false (also yes/no, on/off, 1/0), got "maybe"'],
      [
        'logLevel: [a]',
        'logLevel: expected one of trace, debug, info, warn, error, fatal, silent, got a list ["a"]',
      ],
      ['host: 5', 'host: expected systemd or sim, got "5"'],
      ['machineName: true', 'machineName: expected a Machine name, got true'],
    ];
    for (const [text, message] of cases) {
      const file = await configFile(`${text}\n`);
      expect(invalid(() => load({ flags: { config: file } })).message, text).toBe(`${file}: ${message}`);
    }
  });

  it('each unknown key on its own line, with the option it was probably meant to be', async () => {
    const file = await configFile('sockett: /x.sock\nsocket_group: ops\nLogLevel: info\nfoo: 1\n');
    const keys = "(the keys are the flags' names in camelCase, such as socketGroup)";
    expect(invalid(() => load({ flags: { config: file } })).message.split('\n')).toEqual([
      `${file}: sockett: unknown key; did you mean socket? ${keys}`,
      `${file}: socket_group: unknown key; did you mean socketGroup? ${keys}`,
      `${file}: LogLevel: unknown key; did you mean logLevel? ${keys}`,
      `${file}: foo: unknown key ${keys}`,
    ]);
  });

  it('a file that is not a mapping says what it is', async () => {
    const file = await configFile('42\n');
    expect(invalid(() => load({ flags: { config: file } })).message).toBe(
      `${file}: expected a YAML mapping of options (key: value lines such as logLevel: info), got a number`,
    );
  });
});
