/**
 * Limits of the admin API that both sides need: the daemon enforces them (src/server/), agentctl
 * checks a request against them before sending it. Kept apart so that agentctl loads no server code.
 */

/** Largest accepted `POST /rpc` body, in bytes (docs/api.md: 1 MiB). A full agent config is a few KiB. */
export const RPC_BODY_LIMIT = 1024 * 1024;
