/**
 * The OpenAPI 3.1 document of the HTTP surface (docs/api.md). JSON-RPC methods themselves are
 * described by the OpenRPC document (`rpc.discover`); here /rpc is one POST route.
 */
import { ERROR_CODES } from '../errors.js';
import { RPC_BODY_LIMIT } from './app.js';

const jsonRpcError = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'integer' },
    message: { type: 'string' },
    data: {
      type: 'object',
      properties: { code: { type: 'string', enum: Object.keys(ERROR_CODES) } },
      additionalProperties: true,
    },
  },
};

export function buildOpenApiDocument(version: string): Record<string, unknown> {
  const errorBody = (description: string) => ({
    description,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/JsonRpcErrorResponse' } } },
  });
  return {
    openapi: '3.1.0',
    info: {
      title: 'agentd HTTP API',
      version,
      description:
        'Served on the agentd unix socket (default /run/agentd/agentd.sock). The optional TCP metrics listener serves only /metrics, /healthz and /readyz. Methods are described by the OpenRPC document (rpc.discover, openapi/agentd.openrpc.json).',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      {
        url: 'http://localhost',
        description: 'the unix socket (curl --unix-socket PATH http://localhost/...)',
      },
    ],
    paths: {
      '/rpc': {
        description:
          'POST only: any other method answers 405 with `Allow: POST` (error.data.code INVALID_REQUEST). Requests refused before they are read as JSON-RPC (405, 413, 415) are counted in agentd_rpc_requests_total under method "(invalid)" (docs/metrics.md).',
        post: {
          operationId: 'rpc',
          summary: 'JSON-RPC 2.0: a single request, a batch, or notifications.',
          requestBody: {
            required: true,
            description: `At most ${RPC_BODY_LIMIT} bytes.`,
            content: {
              'application/json': {
                schema: {
                  oneOf: [
                    { $ref: '#/components/schemas/JsonRpcRequest' },
                    { type: 'array', items: { $ref: '#/components/schemas/JsonRpcRequest' } },
                  ],
                },
              },
            },
          },
          responses: {
            '200': {
              description:
                'A response, or an array of responses for a batch (JSON-RPC errors also answer 200).',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      { $ref: '#/components/schemas/JsonRpcResponse' },
                      { type: 'array', items: { $ref: '#/components/schemas/JsonRpcResponse' } },
                    ],
                  },
                },
              },
            },
            '204': { description: 'Only notifications were sent: no body.' },
            '413': errorBody('The body exceeds the size limit (error.data.code PAYLOAD_TOO_LARGE).'),
            '415': errorBody(
              'The content type is not application/json or application/json-rpc (error.data.code INVALID_REQUEST; the message names the type received).',
            ),
            '500': errorBody(
              'An internal error outside any one call (error.data.code INTERNAL); see the agentd log.',
            ),
            '503': errorBody(
              'The server is closing (shutdown): the call was not run (error.data.code DRAINING); retry once agentd is back. Or the connection came from the reserve at the connection limit and asked for another method than status (error.data.code UNAVAILABLE, naming the limit; docs/operations.md, "Limits").',
            ),
          },
        },
      },
      '/healthz': {
        get: {
          operationId: 'healthz',
          summary: 'Liveness: 200 while the process serves.',
          responses: {
            '200': {
              description: 'Serving.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Probe' } } },
            },
          },
        },
      },
      '/readyz': {
        get: {
          operationId: 'readyz',
          summary: 'Readiness: 200 once startup recovery is done, 503 with reasons before.',
          responses: {
            '200': {
              description: 'Ready.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Probe' } } },
            },
            '503': {
              description: 'Not ready.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Probe' } } },
            },
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          summary: 'Prometheus metrics (text exposition format 0.0.4).',
          responses: {
            '200': { description: 'Metrics.', content: { 'text/plain': { schema: { type: 'string' } } } },
          },
        },
      },
      '/v1/events': {
        get: {
          operationId: 'events',
          summary: 'Server-sent events: operation, phase and progress transitions.',
          parameters: [
            {
              name: 'operation',
              in: 'query',
              required: false,
              description:
                'Only events of this operation id. Empty, given twice, or another query parameter: 400.',
              schema: { type: 'string', minLength: 1 },
            },
          ],
          responses: {
            '200': {
              description:
                'An endless text/event-stream. Each event has `event:` operation | phase | progress and a JSON `data:` line.',
              content: { 'text/event-stream': { schema: { type: 'string' } } },
            },
            '400': errorBody(
              'operation is empty or given twice, or the query has another parameter (error.data.code INVALID_REQUEST, error.data.parameter names it).',
            ),
          },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document.',
          responses: {
            '200': {
              description: 'The OpenAPI document.',
              content: { 'application/json': { schema: { type: 'object' } } },
            },
          },
        },
      },
    },
    components: {
      schemas: {
        JsonRpcRequest: {
          type: 'object',
          required: ['jsonrpc', 'method'],
          properties: {
            jsonrpc: { const: '2.0' },
            id: { type: ['string', 'integer', 'null'], description: 'Absent for a notification.' },
            method: { type: 'string' },
            params: { type: 'object', additionalProperties: true },
          },
        },
        JsonRpcResponse: {
          type: 'object',
          required: ['jsonrpc', 'id'],
          properties: {
            jsonrpc: { const: '2.0' },
            id: { type: ['string', 'integer', 'null'] },
            result: {},
            error: jsonRpcError,
          },
        },
        JsonRpcErrorResponse: {
          type: 'object',
          required: ['jsonrpc', 'id', 'error'],
          properties: { jsonrpc: { const: '2.0' }, id: { type: 'null' }, error: jsonRpcError },
        },
        Probe: {
          type: 'object',
          required: ['status'],
          properties: { status: { type: 'string' }, reasons: { type: 'array', items: { type: 'string' } } },
        },
      },
    },
  };
}
