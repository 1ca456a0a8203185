#!/bin/sh
# Install agentd from an unpacked release tarball (agentd-<version>-linux-x64/), as root:
#   ./install.sh                 copy agentd and agentctl to /usr/local/bin, the man pages to
#                                /usr/local/share/man/man8, the unit to /etc/systemd/system,
#                                then systemctl daemon-reload; a first install enables and starts
#                                agentd, an upgrade keeps it enabled or disabled as it was
#   ./install.sh --uninstall [agentctl uninstall options, e.g. --yes --keep-config]
#                                hand over to `agentctl uninstall --host systemd` (stops agentd,
#                                tears the machines down, removes unit, state and config), then
#                                remove the files this script installed; rerun it if it failed
# Idempotent: a second run changes nothing and restarts nothing; a run with a new release
# replaces what differs and restarts agentd when it runs (that never stops kubelet). A masked
# unit (linked to /dev/null, or masked with --runtime) stays masked; agentd is not started.
# Without a running systemd (a chroot, an image build) agentd is enabled for the next boot only.
# DESTDIR=DIR installs under DIR instead of / (packaging, tests): no root needed, and systemd is
# asked only when DIR/run/systemd/system exists. See docs/operations.md.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=${DESTDIR:-}
bindir=$root/usr/local/bin
mandir=$root/usr/local/share/man/man8
unitdir=$root/etc/systemd/system
unit=$unitdir/agentd.service
# Whether install.sh has installed agentd here before (what deb-systemd-helper records for
# the .deb): "first" while a first install is under way, "installed" once it enabled agentd. In
# agentd's state directory, which lives as long as the install: agentctl uninstall removes it.
statedir=$root/var/lib/agentd
marker=$statedir/install-sh.state

say() { printf 'install.sh: %s\n' "$*"; }
die() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,16s/^# \{0,1\}//p' "$0"
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
  # Gone with the state directory unless agentctl uninstall was given another --state-dir.
  if [ -e "$marker" ] || [ -L "$marker" ]; then
    rm -f "$marker"
    say "removed $marker"
    rmdir "$statedir" 2>/dev/null || true
  fi
  exit 0
fi

if [ -z "$root" ] && command -v dpkg-query >/dev/null 2>&1 &&
  [ "$(dpkg-query -W -f '${db:Status-Status}' agentd 2>/dev/null || true)" = installed ]; then
  die "agentd is installed from the Debian package: upgrade it with the .deb (apt install ./agentd_<version>_amd64.deb), or remove that first"
fi
[ -x "$here/agentd" ] || die "$here/agentd is missing: run install.sh from the unpacked release tarball"
# Fails here, before anything changes, when the executable cannot run on this host.
version=$("$here/agentd" --version) || die "$here/agentd does not run on this host"

# The operator's symlinks. A unit linked to /dev/null is masked (by hand, or by systemctl mask
# before install.sh put a file there): it stays so, and agentd is not started. So is one masked at
# runtime (systemctl mask --runtime: the link in /run/systemd/system), which systemd honours only
# while no unit file is in /etc/systemd/system: that one is neither installed nor updated while
# the mask is there, since it would override the mask. Any other link where install.sh puts a
# file, or an agentctl link to anything but agentd, is not install.sh's: replacing it (or writing
# through it) would undo what the operator set up, so nothing is changed.
runtime_mask=$root/run/systemd/system/agentd.service
masked=
unmask="systemctl unmask agentd"
if [ "$(readlink "$unit" 2>/dev/null || true)" = /dev/null ]; then
  masked="$unit -> /dev/null"
elif [ "$(readlink "$runtime_mask" 2>/dev/null || true)" = /dev/null ]; then
  masked="$runtime_mask -> /dev/null"
  unmask="systemctl unmask --runtime agentd"
fi
for f in "$bindir/agentd" "$mandir/agentd.8" "$mandir/agentctl.8" "$unit" "$bindir/agentctl"; do
  [ -L "$f" ] || continue
  target=$(readlink "$f")
  if [ "$f" = "$unit" ] && [ "$target" = /dev/null ]; then continue; fi
  if [ "$f" = "$bindir/agentctl" ] && [ "$target" = agentd ]; then continue; fi
  die "$f is a symlink to $target, which install.sh did not make: nothing changed; remove it (or what installed it) and run install.sh again"
done

# A first install enables agentd; every later one keeps it enabled or disabled as the operator
# left it, as the .deb does. The first is one with no record and no unit installed yet, or one
# whose record says it did not finish. A unit with no record is an install.sh from before the
# record (or a state directory removed by hand): enabled or disabled, it is the operator's.
first=no
if [ -f "$marker" ]; then
  if [ "$(cat "$marker")" = first ]; then first=yes; fi
elif [ ! -e "$unit" ] && [ ! -L "$unit" ]; then
  first=yes
fi
# record first|installed: write the marker when it says otherwise (never through a link), in a
# state directory made as agentd makes it.
record() {
  if [ -f "$marker" ] && [ ! -L "$marker" ] && [ "$(cat "$marker")" = "$1" ]; then return 0; fi
  [ -d "$statedir" ] || mkdir -p "$(dirname "$statedir")"
  [ -d "$statedir" ] || mkdir -m 0700 "$statedir"
  rm -f "$marker.install-tmp"
  printf '%s\n' "$1" >"$marker.install-tmp"
  mv -f "$marker.install-tmp" "$marker"
}
if [ "$first" = yes ]; then record first; fi

changed=no
# put SRC DEST MODE: copy when different, through a temporary file and a rename, so that a
# running agentd keeps its old executable and nobody sees a half-written file.
put() {
  if [ -f "$2" ] && [ ! -L "$2" ] && cmp -s "$1" "$2"; then return 0; fi
  mkdir -p "$(dirname "$2")"
  rm -f "$2.install-tmp"
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
if [ "$masked" = "$unit -> /dev/null" ]; then
  say "left $masked as it is: agentd.service is masked"
elif [ -n "$masked" ]; then
  say "left $masked as it is: agentd.service is masked at runtime, so $unit was not installed (systemd lets a unit file there override the mask)"
else
  put "$here/systemd/agentd.service" "$unit" 0644
fi

if [ "$systemd" = no ]; then
  # Enabled for the next boot, not started, as the .deb does there (docs/operations.md): the link
  # `systemctl enable` makes for the unit's WantedBy=multi-user.target, made here because there is
  # no systemd to ask and, with DESTDIR, maybe no systemctl. agentctl uninstall removes it.
  wants=$unitdir/multi-user.target.wants/agentd.service
  if [ -n "$masked" ]; then
    say "systemd is not running here ($root/run/systemd/system is absent): agentd $version installed; agentd.service is masked ($masked), so it was not enabled and does not start at the next boot ($unmask, then run install.sh again)"
    if [ "$first" = no ]; then record installed; fi
    exit 0
  fi
  if [ "$first" = yes ]; then
    if [ "$(readlink "$wants" 2>/dev/null || true)" != /etc/systemd/system/agentd.service ]; then
      mkdir -p "$(dirname "$wants")"
      ln -sfn /etc/systemd/system/agentd.service "$wants"
      say "installed $wants -> /etc/systemd/system/agentd.service"
    fi
    record installed
    say "systemd is not running here ($root/run/systemd/system is absent): agentd $version installed and enabled, not started: it starts at the next boot"
  elif [ -L "$wants" ]; then
    record installed
    say "systemd is not running here ($root/run/systemd/system is absent): agentd $version installed; agentd.service stays enabled, not started: it starts at the next boot"
  else
    record installed
    say "systemd is not running here ($root/run/systemd/system is absent): agentd $version installed; agentd.service stays disabled, as it was"
  fi
  exit 0
fi
systemctl daemon-reload
state=$(systemctl is-enabled agentd.service 2>/dev/null || true)
# And whatever else systemd counts as masked (is-enabled: masked, masked-runtime).
case "$state" in
  masked) masked=${masked:-"systemctl is-enabled: $state"} ;;
  masked-runtime)
    [ -n "$masked" ] || unmask="systemctl unmask --runtime agentd"
    masked=${masked:-"systemctl is-enabled: $state"}
    ;;
esac
if [ -n "$masked" ]; then
  # A first install stays to be finished: unmasked, a rerun enables and starts agentd.
  if [ "$first" = no ]; then record installed; fi
  say "agentd $version installed; agentd.service is masked ($masked), so it was not enabled, started or restarted ($unmask, then run install.sh again)"
  exit 0
fi
if [ "$first" = yes ]; then
  systemctl enable agentd.service
  # Recorded once enabled: a start that fails is retried by a rerun, and a disable kept.
  record installed
  systemctl start agentd.service
  say "agentd $version installed, enabled and running (systemctl status agentd)"
  exit 0
fi
record installed
if systemctl is-active --quiet agentd.service; then
  # Running but not enabled (a `systemctl disable` without --now): kept, and said so.
  kept=
  case "$state" in
    enabled | enabled-runtime) ;;
    *) kept="; agentd.service stays ${state:-disabled}, as it was (systemctl enable agentd starts it at boot)" ;;
  esac
  if [ "$changed" = yes ]; then
    systemctl restart agentd.service
    say "agentd $version installed; agentd restarted$kept"
  else
    say "agentd $version installed and running (systemctl status agentd)$kept"
  fi
else
  case "$state" in
    enabled | enabled-runtime)
      # As deb-systemd-invoke does on an upgrade: an enabled agentd that is stopped is started.
      systemctl start agentd.service
      say "agentd $version installed and started (systemctl status agentd)"
      ;;
    *) say "agentd $version installed; agentd.service stays ${state:-disabled} and stopped, as it was (systemctl enable --now agentd starts it)" ;;
  esac
fi
