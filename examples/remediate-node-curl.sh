#!/usr/bin/env bash
# The same remediation as remediate-node.sh, without agentctl: JSON-RPC 2.0 over HTTP on the
# agentd socket with `curl --unix-socket`, and jq. Useful where only curl is installed, and as a
# worked example of the API (docs/api.md).
#
#   remediate-node-curl.sh [KUBERNETES_VERSION]
#
# Environment: AGENTD_SOCKET (default /run/agentd/agentd.sock), SKIP_DRAIN=1 (no Kubernetes).
set -euo pipefail

socket="${AGENTD_SOCKET:-/run/agentd/agentd.sock}"
version="${1:-}"
log() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# call METHOD [PARAMS_JSON]: print the result; on a JSON-RPC error print "CODE: message" on
# stderr and return 1 (4 for BUSY). The stable code is error.data.code (docs/errors.md).
call() {
  local body response
  body="$(jq -nc --arg m "$1" --argjson p "${2:-"{}"}" '{jsonrpc: "2.0", id: 1, method: $m, params: $p}')"
  # No --max-time: with "wait": true the answer comes when the operation ends.
  response="$(curl -sS --unix-socket "$socket" -H 'content-type: application/json' -d "$body" http://agentd/rpc)" || {
    log "cannot reach agentd on $socket"
    return 3
  }
  if jq -e 'has("error")' >/dev/null <<<"$response"; then
    log "$1: $(jq -r '"\(.error.data.code // .error.code): \(.error.message)"' <<<"$response")"
    [ "$(jq -r '.error.data.code // empty' <<<"$response")" = BUSY ] && return 4
    return 1
  fi
  jq '.result' <<<"$response"
}

# 1. Ready? (GET /readyz answers 200 once startup recovery is done.)
if [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$socket" http://agentd/readyz)" != 200 ]; then
  log "agentd is not ready"
  exit 1
fi

# 2. Drain and wait for it ("wait": true). To watch progress instead, start it without "wait"
#    and stream its events:  curl -N --unix-socket "$socket" "http://agentd/v1/events?operation=<id>"
if [ "${SKIP_DRAIN:-0}" != 1 ]; then
  drain="$(call drain '{"ignoreDaemonSets": true, "deleteEmptyDirData": true, "timeoutSeconds": 600, "wait": true}')"
  if [ "$(jq -r .state <<<"$drain")" != succeeded ]; then
    log "drain $(jq -r .state <<<"$drain"): $(jq -r '.error.message' <<<"$drain")"
    exit 1
  fi
  log "drained: $(jq -r '.result.evicted | length' <<<"$drain") pods evicted"
fi

# 3. Update (or repave), waiting for the end.
if [ -n "$version" ]; then
  params="$(jq -nc --arg v "$version" '{set: {kubernetesVersion: $v}, wait: true, reason: "remediation"}')"
else
  params='{"force": true, "wait": true, "reason": "remediation (repave)"}'
fi
op="$(call update "$params")"
state="$(jq -r .state <<<"$op")"
log "update $(jq -r .id <<<"$op"): $state"
if [ "$state" != succeeded ]; then
  log "$(jq -r '.error.message // "see the operation"' <<<"$op")"
  [ "$state" = rolled_back ] && [ "${SKIP_DRAIN:-0}" != 1 ] && call uncordon '{"wait": true}' >/dev/null
  exit 1
fi

# 4. Check the node.
status="$(call status)"
active="$(jq -r '.node.activeMachine // empty' <<<"$status")"
kubelet="$(jq -r --arg m "$active" '.node.machines[] | select(.name == $m) | .kubelet' <<<"$status")"
applied="$(jq -r '.node.applied.kubernetesVersion // empty' <<<"$status")"
if [ -z "$active" ] || [ "$kubelet" != active ] || { [ -n "$version" ] && [ "$applied" != "${version#v}" ]; }; then
  log "check failed: active '${active:-none}', kubelet '${kubelet:-unknown}', Kubernetes '${applied:-none}'"
  exit 1
fi
log "healthy: $active runs kubelet (Kubernetes $applied)"

# 5. Schedulable again.
if [ "${SKIP_DRAIN:-0}" != 1 ]; then
  call uncordon '{"wait": true}' >/dev/null
  log "uncordoned"
fi
