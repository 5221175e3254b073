/**
 * The conformance suite from a page (or Deno), through the WebSocket gateway to Redis: the runtime's
 * own WebSocket (src/platform/websocket.ts) and src/dataplane/ws-client.ts. A gateway must already
 * be running; test/dataplane/browser-gateway.ts starts Redis + gateway and then the Chromium runner
 * (which passes the gateway's URL and token to the page as query `gateway`, `token`) or, with
 * --deno, the Deno runner (env SPECLAB_GATEWAY_URL/_TOKEN). Each test uses a fresh namespace (its
 * own key prefix on the server), so tests never share state.
 */
import type { Suite } from '../harness/suite.ts';
import { toHostRow } from '../../src/dataplane/column-store.ts';
import type { DataPlaneClient } from '../../src/dataplane/types.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';
import { standardWebSocket } from '../../src/platform/websocket.ts';
import { conformanceSuite } from './conformance.ts';

export function gatewayRemoteConformance(url: string, token: string, runtime: 'browser' | 'deno'): Suite {
  return conformanceSuite(
    `dataplane/conformance/gateway-${runtime}`,
    async (_ctx, gpu) => {
      const namespace = `page-${crypto.randomUUID()}`;
      const clients: DataPlaneClient[] = [];
      const open = async (): Promise<DataPlaneClient> => {
        const c = await connectDataPlaneGateway({ url, token, namespace, gpu, WebSocket: standardWebSocket() });
        clients.push(c);
        return c;
      };
      const client = await open();
      return {
        client,
        peer: open,
        host: (row) => toHostRow(row, gpu, 'conformance read-back'),
        close: async () => {
          for (const c of clients) await c.close();
        },
      };
    },
    { only: [runtime] },
  );
}
