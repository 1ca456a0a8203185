/**
 * The events of `GET /v1/events`, as sent on the wire: the engine's event type, re-exported for
 * clients (agentctl) so that they depend on the API, not on the engine (types only).
 */
export type { EngineEvent as StreamEvent } from '../engine/events.js';
