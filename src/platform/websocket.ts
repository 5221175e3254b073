/**
 * The runtime's standard WebSocket constructor (browsers, Deno, Node 22+), for
 * src/dataplane/ws-client.ts. On Node 20 use `nodeWebSocket` from ./dataplane-gateway-node.ts.
 */
import type { WebSocketConstructor } from '../dataplane/ws-client.ts';

export function standardWebSocket(): WebSocketConstructor {
  const ctor = (globalThis as { WebSocket?: unknown }).WebSocket;
  if (typeof ctor !== 'function') {
    throw new Error(
      'this runtime has no global WebSocket (Node < 22?): pass nodeWebSocket from src/platform/dataplane-gateway-node.ts instead',
    );
  }
  return ctor as WebSocketConstructor;
}
