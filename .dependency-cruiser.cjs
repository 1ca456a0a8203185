/**
 * The layering of src/, checked on every `npm test` (npm run lint). docs/architecture.md,
 * "The direction rule", states the same rules in prose; change both together.
 */
/** What each folder of src/ may import, besides itself and the top-level src/*.ts files. */
const ALLOWED = {
  bin: ['cli', 'config', 'daemon'],
  daemon: [
    'server',
    'rpc',
    'watcher',
    'engine',
    'fleet',
    'provision',
    'kube',
    'sim',
    'metrics',
    'config',
    'host',
  ],
  server: ['rpc', 'engine', 'metrics', 'config', 'host'],
  // sim: only uninstall, which tears down a --host sim node the way it tears down a real one
  // (the rule cli-sim-only-for-uninstall below keeps it to that file). fleet: only its operator
  // module, for fleet pause|resume with the operator's kubeconfig (rule cli-fleet-operator-lazy).
  cli: ['rpc', 'config', 'host', 'sim', 'fleet'],
  watcher: ['rpc', 'kube', 'metrics', 'config', 'host', 'retry'],
  rpc: ['engine', 'metrics', 'config', 'host'],
  // fleet: the gates on the Kubernetes API; they implement the engine's FleetGate and HealthGate
  // seams (src/engine/update.ts), which the daemon wires in.
  fleet: ['engine', 'kube', 'metrics', 'config', 'host', 'retry'],
  engine: ['provision', 'kube', 'tasks', 'metrics', 'config', 'host', 'retry'],
  provision: ['tasks', 'metrics', 'config', 'host', 'retry'],
  kube: ['config', 'host', 'retry'],
  sim: ['config', 'host'],
  tasks: ['metrics', 'host'],
  host: ['retry'],
  retry: ['host'],
  config: [],
  metrics: [],
};

const folderRules = Object.entries(ALLOWED).map(([from, allowed]) => ({
  name: `layering-${from}`,
  comment: `src/${from} may import only ${allowed.length ? allowed.map((f) => `src/${f}`).join(', ') : 'nothing of the other folders'} (docs/architecture.md)`,
  severity: 'error',
  from: { path: `^src/${from}/` },
  to: { path: `^src/(?!(?:${[from, ...allowed].join('|')})/)[^/]+/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycles, type-only imports included.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...folderRules,
    {
      name: 'retry-only-host-types',
      comment: 'src/retry is below src/host except for the seam types (Clock) in src/host/types.ts.',
      severity: 'error',
      from: { path: '^src/retry/' },
      to: { path: '^src/host/(?!types\\.ts$)' },
    },
    {
      name: 'sim-only-in-sim-mode',
      comment:
        'The simulated host and the mirror load only for --host sim / --sim: through src/daemon/sim-wiring.ts, itself imported dynamically.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(sim/|daemon/sim-wiring\\.ts$|cli/commands/uninstall\\.ts$)' },
      to: { path: '^src/sim/' },
    },
    {
      name: 'cli-sim-only-for-uninstall',
      comment:
        'Of the CLI, only uninstall drives the simulated host (for a node whose daemon ran --host sim).',
      severity: 'error',
      from: { path: '^src/cli/', pathNot: '^src/cli/commands/uninstall\\.ts$' },
      to: { path: '^src/sim/' },
    },
    {
      name: 'cli-fleet-operator-only',
      comment:
        "Of src/fleet, the CLI uses only operator.ts: fleet pause|resume act with the operator's kubeconfig (docs/fleet.md); everything else reaches the fleet through agentd.",
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/fleet/(?!operator\\.ts$)' },
    },
    {
      name: 'cli-fleet-operator-lazy',
      comment:
        'src/fleet/operator.ts loads the Kubernetes client: the CLI imports it with import() or for types only, so that no other command loads it (agentctl-kube.cjs, scripts/build.ts).',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/fleet/operator\\.ts$', dependencyTypesNot: ['dynamic-import', 'type-only'] },
    },
    {
      name: 'sim-wiring-dynamic-only',
      comment: 'src/daemon/sim-wiring.ts is loaded with import() so production starts never load it.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/daemon/sim-wiring\\.ts$', dependencyTypesNot: ['dynamic-import'] },
    },
    {
      name: 'kube-client-lazy',
      comment:
        '@kubernetes/client-node loads only once credentials may exist: src/kube/runtime.ts (the session) and src/watcher/watcher.ts (the supervisor) are imported with import() or for types only.',
      severity: 'error',
      from: { path: '^src/(kube/session|watcher/supervisor)\\.ts$' },
      to: {
        path: '^src/(kube/(runtime|client|index)|watcher/(watcher|index))\\.ts$',
        dependencyTypesNot: ['dynamic-import', 'type-only'],
      },
    },
    {
      name: 'kube-wiring-no-kube-client',
      comment:
        'The daemon reaches the Kubernetes client only through the session and the supervisor: it imports src/kube and src/watcher for types, or their session and supervisor modules.',
      severity: 'error',
      from: { path: '^src/daemon/' },
      to: {
        path: '^src/(kube|watcher)/(?!(session|supervisor)\\.ts$)',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'fleet-lazy',
      comment:
        'src/fleet uses the Kubernetes client: the daemon imports it with import() once credentials may exist, or for types; the health gate and its schema load no client code and are imported plainly.',
      severity: 'error',
      from: { path: '^src/daemon/' },
      to: {
        path: '^src/fleet/(?!(health-checks-schema|health-gate)\\.ts$)',
        dependencyTypesNot: ['type-only', 'dynamic-import'],
      },
    },
    {
      name: 'no-src-to-tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
