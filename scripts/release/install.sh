#!/bin/sh
# Install agentd from an unpacked release tarball (agentd-<version>-linux-x64/), as root:
#   ./install.sh                 copy agentd and agentctl to /usr/local/bin, the man pages to
#                                /usr/local/share/man/man8, the unit to /etc/systemd/system,
#                                then systemctl daemon-reload and enable --now agentd
#   ./install.sh --uninstall [agentctl uninstall options, e.g. --yes --keep-config]
#                                hand over to `agentctl uninstall --host systemd` (stops agentd,
#                                tears the machines down, removes unit, state and config), then
#                                remove the files this script installed; rerun it if it failed
# Idempotent: a second run changes nothing and restarts nothing; a run with a new release
# replaces what differs and restarts agentd when it runs (that never stops kubelet).
# Without a running systemd (a chroot, an image build) agentd is enabled for the next boot only.
# DESTDIR=DIR installs under DIR instead of / (packaging, tests): no root needed, and systemd is
# asked only when DIR/run/systemd/system exists. See docs/operations.md.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=${DESTDIR:-}
bindir=$root/usr/local/bin
mandir=$root/usr/local/share/man/man8
unitdir=$root/etc/systemd/system

say() { printf 'install.sh: %s\n' "$*"; }
die() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,14s/^# \{0,1\}//p' "$0"
}

mode=install
case "${1:-}" in
  --uninstall)
    mode=uninstall
    shift
    ;;
  -h | --help)
    usage
    exit 0
    ;;
  '') ;;
  *)
    printf 'install.sh: unknown argument: %s\n' "$1" >&2
    usage >&2
    exit 2
    ;;
esac
[ "$mode" = uninstall ] || [ $# -eq 0 ] || die "unexpected argument: $1 (only --uninstall takes arguments)"

if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then die "run as root (sudo $0)"; fi
systemd=no
if [ -d "$root/run/systemd/system" ]; then systemd=yes; fi

if [ "$mode" = uninstall ]; then
  # The installed agentctl if there is one (it matches the running daemon), else this release's.
  ctl=$bindir/agentctl
  [ -x "$ctl" ] || ctl=$here/agentctl
  # This script installed agentd on systemd: say so, unless the operator names a host. With no
  # daemon left to ask (stopped, or removed by an uninstall that failed later on), agentctl
  # needs it, and a rerun must be able to finish; a daemon that answers is checked against it.
  host_given=no
  for arg in "$@"; do
    case "$arg" in --host | --host=*) host_given=yes ;; esac
  done
  if [ "$host_given" = no ]; then set -- --host systemd "$@"; fi
  if [ -n "$root" ]; then set -- --root "$root" "$@"; fi
  "$ctl" uninstall "$@" || die "agentctl uninstall failed (exit $?): agentd and agentctl are left in $bindir so that a rerun can finish"
  for f in "$bindir/agentctl" "$bindir/agentd" "$mandir/agentd.8" "$mandir/agentctl.8"; do
    if [ -e "$f" ] || [ -L "$f" ]; then
      rm -f "$f"
      say "removed $f"
    fi
  done
  exit 0
fi

if [ -z "$root" ] && command -v dpkg-query >/dev/null 2>&1 &&
  [ "$(dpkg-query -W -f '${db:Status-Status}' agentd 2>/dev/null || true)" = installed ]; then
  die "agentd is installed from the Debian package: upgrade it with the .deb (apt install ./agentd_<version>_amd64.deb), or remove that first"
fi
[ -x "$here/agentd" ] || die "$here/agentd is missing: run install.sh from the unpacked release tarball"
# Fails here, before anything changes, when the executable cannot run on this host.
version=$("$here/agentd" --version) || die "$here/agentd does not run on this host"

changed=no
# put SRC DEST MODE: copy when different, through a temporary file and a rename, so that a
# running agentd keeps its old executable and nobody sees a half-written file.
put() {
  if [ -f "$2" ] && [ ! -L "$2" ] && cmp -s "$1" "$2"; then return 0; fi
  mkdir -p "$(dirname "$2")"
  cp "$1" "$2.install-tmp"
  chmod "$3" "$2.install-tmp"
  mv -f "$2.install-tmp" "$2"
  say "installed $2"
  changed=yes
}

put "$here/agentd" "$bindir/agentd" 0755
if [ "$(readlink "$bindir/agentctl" 2>/dev/null || true)" != agentd ]; then
  ln -sfn agentd "$bindir/agentctl"
  say "installed $bindir/agentctl -> agentd"
fi
put "$here/man/agentd.8" "$mandir/agentd.8" 0644
put "$here/man/agentctl.8" "$mandir/agentctl.8" 0644
put "$here/systemd/agentd.service" "$unitdir/agentd.service" 0644

if [ "$systemd" = no ]; then
  # Enabled for the next boot, not started, as the .deb does there (docs/operations.md): the link
  # `systemctl enable` makes for the unit's WantedBy=multi-user.target, made here because there is
  # no systemd to ask and, with DESTDIR, maybe no systemctl. agentctl uninstall removes it.
  wants=$unitdir/multi-user.target.wants/agentd.service
  if [ "$(readlink "$wants" 2>/dev/null || true)" != /etc/systemd/system/agentd.service ]; then
    mkdir -p "$(dirname "$wants")"
    ln -sfn /etc/systemd/system/agentd.service "$wants"
    say "installed $wants -> /etc/systemd/system/agentd.service"
  fi
  say "systemd is not running here ($root/run/systemd/system is absent): agentd $version installed and enabled, not started: it starts at the next boot"
  exit 0
fi
systemctl daemon-reload
if [ "$changed" = yes ] && systemctl is-active --quiet agentd.service; then
  systemctl enable agentd.service
  systemctl restart agentd.service
  say "agentd $version installed; agentd restarted"
else
  systemctl enable --now agentd.service
  say "agentd $version installed and running (systemctl status agentd)"
fi
