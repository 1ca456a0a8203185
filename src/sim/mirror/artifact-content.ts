/**
 * The bytes the mirror serves: small `#!/bin/sh` stand-ins for the kube/CRI/CNI binaries that
 * print their version the way the real ones do, packed like the upstream releases. Output is
 * deterministic per (artifact, version, arch) and memoised.
 */
import { createHash } from 'node:crypto';
import { buildTarGz, type TarBuildEntry } from './tar-build.js';

export const KUBE_BINARIES = ['kubelet', 'kubectl', 'kube-proxy', 'kubeadm'] as const;
export const CONTAINERD_BINARIES = [
  'containerd',
  'containerd-shim-runc-v2',
  'containerd-stress',
  'ctr',
] as const;
export const CNI_PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'] as const;
export const MIRROR_ARCHES = ['amd64', 'arm64'] as const;

export type KubeBinary = (typeof KUBE_BINARIES)[number];
export type MirrorArch = (typeof MIRROR_ARCHES)[number];

/** One servable release asset. */
export type MirrorAsset =
  | { artifact: 'kube'; binary: KubeBinary; version: string; arch: MirrorArch }
  | { artifact: 'crictl' | 'containerd' | 'runc' | 'cni'; version: string; arch: MirrorArch };

/** Commands that run as services keep running; the tools print a line and exit. */
const LONG_RUNNING = new Set(['kubelet', 'kube-proxy', 'containerd', 'containerd-shim-runc-v2']);

/** A 40-hex fake commit id, stable per (name, version). */
export function fakeCommit(name: string, version: string): string {
  return createHash('sha256').update(`${name}@${version}`).digest('hex').slice(0, 40);
}

/** What `<name> --version` prints for the real binary. */
export function versionText(name: string, version: string): string {
  const major = Number(version.split('.')[0]);
  const containerdModule =
    major >= 2 ? 'github.com/containerd/containerd/v2' : 'github.com/containerd/containerd';
  switch (name) {
    case 'kubelet':
    case 'kube-proxy':
    case 'kubectl':
      return `Kubernetes v${version}`;
    case 'kubeadm':
      return `kubeadm version: &version.Info{Major:"${version.split('.')[0]}", Minor:"${version.split('.')[1]}", GitVersion:"v${version}"}`;
    case 'containerd':
      return `containerd ${containerdModule} v${version} ${fakeCommit('containerd', version)}`;
    case 'ctr':
    case 'containerd-shim-runc-v2':
    case 'containerd-stress':
      return `${name} ${containerdModule} v${version}`;
    case 'runc':
      return [
        `runc version ${version}`,
        `commit: v${version}-0-g${fakeCommit('runc', version).slice(0, 8)}`,
        'spec: 1.2.0',
        'go: go1.23.4',
        'libseccomp: 2.5.5',
      ].join('\n');
    case 'crictl':
      return `crictl version v${version}`;
    default:
      // CNI plugins
      return `CNI ${name} plugin v${version}\nCNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`;
  }
}

/**
 * How the long-running stand-ins behave once started as services (on a real systemd host; the
 * simulated host never runs them):
 * - kubelet answers `GET /healthz` on 127.0.0.1:10248 with `200 ok`, as the real one does, when
 *   the machine has perl (a Debian rootfs always has perl-base); `unhealthy` makes it run but
 *   never answer, like a kubelet that cannot reach its runtime.
 *   Its arguments stay on perl's command line (`/proc/<pid>/cmdline`): the real-host suite
 *   reads there the command line systemd gave kubelet (its drop-ins, `/etc/default/kubelet`).
 * - containerd loads its configuration as containerd 2.x does (`--config`, then every file its
 *   `imports` name, merged key by key) and writes what it loaded to
 *   `/run/containerd/stand-in-loaded-config.toml` before it tells systemd it is ready (its unit
 *   is `Type=notify`; `systemd-notify` is sent on behalf of the script, which stays the unit's
 *   main process), so the real-host suite sees which drop-ins took effect; a configuration
 *   containerd would refuse stops it, as it stops containerd. `containerd config dump` prints
 *   the same.
 */
export interface StubBehaviour {
  unhealthyKubelet?: boolean;
}

const KUBELET_HEALTHZ_PERL = [
  'use IO::Socket::INET;',
  'my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1:10248", Listen => 16, ReuseAddr => 1) or die "kubelet stand-in: listen 127.0.0.1:10248: $!\\n";',
  'while (my $c = $s->accept) {',
  '  my $line = <$c> // "";',
  '  while (my $h = <$c>) { last if $h =~ /^\\r?\\n$/ }',
  '  if ($line =~ m{^GET /healthz[ ?]}) { print $c "HTTP/1.0 200 OK\\r\\nContent-Type: text/plain\\r\\nContent-Length: 2\\r\\n\\r\\nok" }',
  '  else { print $c "HTTP/1.0 404 Not Found\\r\\nContent-Length: 0\\r\\n\\r\\n" }',
  '  close $c;',
  '}',
];

/** Where the containerd stand-in writes the configuration it loaded at its start. */
export const CONTAINERD_LOADED_CONFIG = '/run/containerd/stand-in-loaded-config.toml';

/**
 * containerd's configuration loading, for the TOML agentd and operators' drop-ins write (tables,
 * `key = value`, dotted and quoted keys; no arrays of tables): the `--config` file, then the
 * files its `imports` name (relative to the importing file, globs sorted as Go's
 * `filepath.Glob`), breadth first, each loaded once; a drop-in whose `version` is higher than the
 * root's is refused with containerd's message. Each file's keys replace the same keys of the
 * files before it and keep the others, as containerd 2.x merges plugin tables. The result is one
 * dotted key per line (valid TOML), after `imports = [...]` naming the files loaded, in order.
 */
const CONTAINERD_CONFIG_PERL =
  String.raw`use strict; use warnings; use File::Glob qw(bsd_glob); use File::Basename qw(dirname);
my ($config, $dump) = ('/etc/containerd/config.toml', 0);
for (my $i = 0; $i < @ARGV; $i++) {
  my $arg = $ARGV[$i];
  if ($arg eq '--config' || $arg eq '-c') { $config = $ARGV[++$i] // '' }
  elsif ($arg =~ /^--config=(.*)$/) { $config = $1 }
  elsif ($arg eq 'config' && ($ARGV[$i + 1] // '') eq 'dump') { $dump = 1; last }
}
sub fail { print STDERR "containerd: $_[0]\n"; exit 1 }
sub names {
  my ($text, $where) = @_;
  my ($rest, @out) = ($text);
  while (1) {
    $rest =~ s/^\s+//;
    if ($rest =~ s/^'([^']*)'// || $rest =~ s/^"([^"]*)"// || $rest =~ s/^([A-Za-z0-9_-]+)//) { push @out, $1 }
    else { fail("$where: cannot read the key $text") }
    $rest =~ s/^\s+//;
    last if $rest eq '';
    $rest =~ s/^\.// or fail("$where: cannot read the key $text");
  }
  return @out;
}
sub quoted { my $n = shift; $n =~ /^[A-Za-z0-9_-]+$/ ? $n : "'$n'" }
sub load {
  my ($file) = @_;
  open(my $fh, '<', $file) or fail("failed to load TOML from $file: $!");
  my (@table, @pairs, $n);
  while (my $line = <$fh>) {
    $n++;
    next if $line =~ /^\s*(#.*)?$/;
    fail("$file:$n: arrays of tables are beyond this stand-in") if $line =~ /^\s*\[\[/;
    if ($line =~ /^\s*\[(.*)\]\s*$/) { @table = names($1, "$file:$n"); next }
    $line =~ /^\s*([^=]+?)\s*=\s*(.*?)\s*$/ or fail("$file:$n: expected key = value, got $line");
    my ($key, $value) = ($1, $2);
    while (($value =~ tr/[//) > ($value =~ tr/]//)) {
      my $more = <$fh>;
      fail("$file:$n: unterminated array") unless defined $more;
      $n++;
      $more =~ s/^\s+|\s+$//g;
      $value .= " $more";
    }
    push @pairs, [[@table, names($key, "$file:$n")], $value];
  }
  close $fh;
  return @pairs;
}
my (@loaded, %seen, %value, @order, $root);
my @pending = ($config);
while (@pending) {
  my $file = shift @pending;
  next if $seen{$file}++;
  my @pairs = load($file);
  my ($version) = map { $_->[1] } grep { "@{$_->[0]}" eq 'version' } @pairs;
  $version //= 0;
  $root //= $version;
  fail("drop-in config version $version higher than root config version $root") if $version > $root;
  push @loaded, $file;
  for my $pair (@pairs) {
    my @path = @{$pair->[0]};
    if ("@path" eq 'imports') {
      for my $import ($pair->[1] =~ /'([^']*)'|"([^"]*)"/g) {
        next unless defined $import;
        $import = dirname($file) . "/$import" unless $import =~ m{^/};
        push @pending, $import =~ /\*/ ? sort { $a cmp $b } bsd_glob($import) : $import;
      }
      next;
    }
    my $key = join('.', map { quoted($_) } @path);
    push @order, $key unless exists $value{$key};
    $value{$key} = $pair->[1];
  }
}
my $out = "# containerd stand-in: the configuration it loaded\n";
$out .= 'imports = [' . join(', ', map { "'$_'" } @loaded) . "]\n";
$out .= "$_ = $value{$_}\n" for @order;
if ($dump) { print $out; exit 0 }
mkdir '/run/containerd';
open(my $fh, '>', '${CONTAINERD_LOADED_CONFIG}.tmp') or fail("write ${CONTAINERD_LOADED_CONFIG}: $!");
print $fh $out;
close $fh or fail("write ${CONTAINERD_LOADED_CONFIG}: $!");
rename('${CONTAINERD_LOADED_CONFIG}.tmp', '${CONTAINERD_LOADED_CONFIG}') or fail("write ${CONTAINERD_LOADED_CONFIG}: $!");
`.split('\n');

function serviceBody(name: string, behaviour: StubBehaviour): string[] {
  const idle = 'while :; do sleep 3600; done';
  if (name === 'kubelet' && !behaviour.unhealthyKubelet) {
    return [
      'if command -v perl >/dev/null 2>&1; then',
      `  exec perl - "$@" <<'AGENTD_KUBELET_EOF'`,
      ...KUBELET_HEALTHZ_PERL,
      'AGENTD_KUBELET_EOF',
      'fi',
      idle,
    ];
  }
  if (name === 'containerd') {
    return [
      'if command -v perl >/dev/null 2>&1; then',
      `  perl - "$@" <<'AGENTD_CONTAINERD_EOF' || exit 1`,
      ...CONTAINERD_CONFIG_PERL,
      'AGENTD_CONTAINERD_EOF',
      'fi',
      `case " $* " in *' config dump '*) exit 0 ;; esac`,
      'if [ -n "${NOTIFY_SOCKET:-}" ] && command -v systemd-notify >/dev/null 2>&1; then',
      '  systemd-notify --ready',
      'fi',
      idle,
    ];
  }
  return [idle];
}

/** The shell stand-in for binary `name`. */
export function stubScript(
  name: string,
  version: string,
  arch: MirrorArch,
  behaviour: StubBehaviour = {},
): string {
  const extra =
    name === 'kubectl'
      ? `  version) printf 'Client Version: v%s\\nKustomize Version: v5.7.1\\n' '${version}'; exit 0 ;;\n`
      : '';
  const body = LONG_RUNNING.has(name) ? serviceBody(name, behaviour) : ['exit 0'];
  return [
    '#!/bin/sh',
    `# ${name} ${version} linux/${arch}: a stand-in served by the agentd sim artifact mirror.`,
    'case "$1" in',
    `  --version|-v) cat <<'AGENTD_VERSION_EOF'`,
    versionText(name, version),
    'AGENTD_VERSION_EOF',
    '    exit 0 ;;',
    `${extra}esac`,
    ...body,
    '',
  ].join('\n');
}

function exe(path: string, name: string, version: string, arch: MirrorArch): TarBuildEntry {
  return { path, content: stubScript(name, version, arch), mode: 0o755 };
}

function build(asset: MirrorAsset, behaviour: StubBehaviour): Buffer {
  const { version, arch } = asset;
  switch (asset.artifact) {
    case 'kube':
      return Buffer.from(stubScript(asset.binary, version, arch, behaviour));
    case 'runc':
      return Buffer.from(stubScript('runc', version, arch));
    case 'crictl':
      return buildTarGz([exe('crictl', 'crictl', version, arch)]);
    case 'containerd':
      return buildTarGz([
        { path: 'bin/', type: 'directory' },
        ...CONTAINERD_BINARIES.map((b) => exe(`bin/${b}`, b, version, arch)),
      ]);
    case 'cni':
      return buildTarGz([
        { path: './', type: 'directory' },
        ...CNI_PLUGINS.map((p) => exe(`./${p}`, p, version, arch)),
      ]);
  }
}

const memo = new Map<string, { bytes: Buffer; sha256: string }>();

/** The asset's bytes and their SHA-256 (computed once per process and behaviour). */
export function assetContent(
  asset: MirrorAsset,
  behaviour: StubBehaviour = {},
): { bytes: Buffer; sha256: string } {
  const key = `${asset.artifact}|${'binary' in asset ? asset.binary : ''}|${asset.version}|${asset.arch}|${behaviour.unhealthyKubelet === true}`;
  let hit = memo.get(key);
  if (!hit) {
    const bytes = build(asset, behaviour);
    hit = { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
    memo.set(key, hit);
  }
  return hit;
}

/** The upstream file name of an asset (what checksum files list). */
export function assetFileName(asset: MirrorAsset): string {
  const { version, arch } = asset;
  switch (asset.artifact) {
    case 'kube':
      return asset.binary;
    case 'crictl':
      return `crictl-v${version}-linux-${arch}.tar.gz`;
    case 'containerd':
      return `containerd-${version}-linux-${arch}.tar.gz`;
    case 'runc':
      return `runc.${arch}`;
    case 'cni':
      return `cni-plugins-linux-${arch}-v${version}.tgz`;
  }
}
