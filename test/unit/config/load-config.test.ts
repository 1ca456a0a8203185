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

  it('--sim keeps paths and a host that are given explicitly', () => {
    const c = load({ flags: { sim: true, socket: 'my.sock', host: 'systemd' }, env: { AGENTD_ROOT: '/r' } });
    expect(c.socket).toBe(path.join(dir, 'my.sock'));
    expect(c.root).toBe('/r');
    expect(c.host).toBe('systemd');
    expect(c.pidFile).toBe(path.join(dir, '.agentd', 'agentd.pid'));
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
      flag: '0666',
      fromFile: 0o640,
      fromEnv: 0o600,
      fromFlag: 0o666,
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
  });

  it('names the file and key when the value came from the file', async () => {
    const file = await configFile('metricsAddress: nowhere\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(`--metrics-address (from ${file} key metricsAddress)`);
    expect(err.message).toContain('"nowhere"');
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
    expect(err.message).toContain('--shutdown-grace (from');
    expect(err.message).toContain('key shutdownGrace');
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
    expect(err.message).toContain(`--config ${file}`);
    expect(err.message).toContain('not valid YAML');
  });

  it('a duplicate YAML key', async () => {
    const file = await configFile('logLevel: info\nlogLevel: debug\n');
    const err = invalid(() => load({ flags: { config: file } }));
    expect(err.message).toContain(file);
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
