#!/bin/sh
# The control-plane harness's reaper (test/support/control-plane/processes.ts): started by the
# test process in a session of its own with a pipe on stdin, it reads what the harness tells it —
# `group PGID` for each process group it started (etcd, kube-apiserver, kube-controller-manager
# each lead one), `forget PGID` for one it stopped itself, `dir PATH` for its temp directory —
# until the pipe closes. The harness closes it when the control plane stops; the kernel closes it
# when the test runner dies, however it dies. Then every group still known is SIGKILLed and the
# directories are removed.
set -u
groups=""
dirs=""
while read -r kind arg; do
  case "$kind" in
  group) groups="$groups $arg" ;;
  forget) groups=$(printf '%s\n' $groups | grep -vx -- "$arg" | tr '\n' ' ') ;;
  dir) dirs="$dirs $arg" ;;
  esac
done
for g in $groups; do
  kill -9 "-$g" 2>/dev/null || true
done
for d in $dirs; do
  [ -n "$d" ] && rm -rf -- "$d"
done
echo reaped
