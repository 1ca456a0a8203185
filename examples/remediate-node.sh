#!/usr/bin/env bash
# Scripted remediation of one node with `agentctl --json` and jq: drain it, update it (or repave
# it), check that it came back healthy, and make it schedulable again.
#
#   remediate-node.sh [KUBERNETES_VERSION]
#
# Without a version the node is repaved: a fresh machine with the config it already has.
# Environment:
#   AGENTD_SOCKET   the agentd socket (default /run/agentd/agentd.sock)
#   SKIP_DRAIN=1    skip drain and uncordon (a node without Kubernetes, e.g. `agentd --sim`)
#   BUSY_RETRIES    how often to retry while another operation holds the node (default 10)
#
# Exit codes are agentctl's (docs/cli.md): 0 done, 1 an operation failed, 2 usage, 3 agentd
# unreachable, 4 still busy after the retries, 5 timed out.
set -euo pipefail

version="${1:-}"
busy_retries="${BUSY_RETRIES:-10}"
ctl() { agentctl --json "$@"; }
log() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# Run a mutating command; on exit 4 (BUSY: another operation runs) wait for that operation
# and try again. stdout: the final operation (JSON). Progress from agentctl stays on stderr.
run_op() {
  local attempt=0 out rc running
  while :; do
    set +e
    out="$(ctl "$@")"
    rc=$?
    set -e
    if [ "$rc" -ne 4 ] || [ "$attempt" -ge "$busy_retries" ]; then
      printf '%s\n' "$out"
      return "$rc"
    fi
    attempt=$((attempt + 1))
    running="$(jq -r '.error.operation // empty' <<<"$out")"
    log "busy: operation ${running:-?} holds the node; waiting for it (attempt $attempt/$busy_retries)"
    [ -n "$running" ] && ctl ops wait "$running" >/dev/null 2>&1 || sleep 5
  done
}

# 1. The daemon answers and is ready (exit 3 here means agentd is not running).
status="$(ctl status)"
state="$(jq -r '.daemon.state' <<<"$status")"
if [ "$state" != ready ]; then
  log "agentd is $state, not ready: try again later"
  exit 1
fi
log "node: active machine $(jq -r '.node.activeMachine // "none"' <<<"$status"), kubernetes $(jq -r '.node.applied.kubernetesVersion // "-"' <<<"$status")"

# 2. Drain: cordon and evict through the Eviction API (PodDisruptionBudgets are respected).
if [ "${SKIP_DRAIN:-0}" != 1 ]; then
  log "draining"
  drain="$(run_op drain --ignore-daemonsets --delete-emptydir-data --timeout 10m)" || {
    rc=$?
    log "drain failed (exit $rc): $(jq -r '.error.message // .error // "see above"' <<<"$drain")"
    log "pods left: $(jq -r '[.result.remaining[]? | "\(.namespace)/\(.name)"] | join(", ")' <<<"$drain")"
    exit "$rc"
  }
  log "drained: $(jq -r '.result.evicted | length' <<<"$drain") pods evicted"
fi

# 3. Update to the version, or repave with the config the node has.
if [ -n "$version" ]; then
  log "updating to Kubernetes $version"
  set +e
  op="$(run_op update --kubernetes-version "$version")"
  rc=$?
  set -e
else
  log "repaving (a fresh machine, same config)"
  set +e
  op="$(run_op update --force)"
  rc=$?
  set -e
fi
op_state="$(jq -r '.state // "error"' <<<"$op")"
log "update $(jq -r '.id // "-"' <<<"$op"): $op_state"
case "$op_state" in
  succeeded) ;;
  rolled_back)
    # The old machine is back and serving: give the node its pods back, but report the failure.
    log "rolled back: $(jq -r '.error.message' <<<"$op")"
    [ "${SKIP_DRAIN:-0}" = 1 ] || ctl uncordon >/dev/null
    exit 1
    ;;
  *)
    # Failed with no serving machine (or not started): leave it cordoned for a human.
    log "update did not succeed (exit $rc): $(jq -r '.error.message // "see above"' <<<"$op")"
    exit "$rc"
    ;;
esac

# 4. Check: one active machine, kubelet active in it, the wanted version applied.
status="$(ctl status)"
active="$(jq -r '.node.activeMachine // empty' <<<"$status")"
kubelet="$(jq -r --arg m "$active" '.node.machines[] | select(.name == $m) | .kubelet' <<<"$status")"
applied="$(jq -r '.node.applied.kubernetesVersion // empty' <<<"$status")"
if [ -z "$active" ] || [ "$kubelet" != active ]; then
  log "check failed: active machine '${active:-none}', kubelet '${kubelet:-unknown}'"
  exit 1
fi
if [ -n "$version" ] && [ "$applied" != "${version#v}" ]; then
  log "check failed: applied Kubernetes $applied, wanted $version"
  exit 1
fi
log "healthy: $active runs kubelet (Kubernetes $applied)"

# 5. Schedulable again.
if [ "${SKIP_DRAIN:-0}" != 1 ]; then
  ctl uncordon >/dev/null
  log "uncordoned"
fi
