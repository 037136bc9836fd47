import type { AddressInfo } from 'node:net';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { createPaymentsApp, type PaymentsAppOptions } from './payments-app.ts';

/** The payments server in the test process, over real HTTP on 127.0.0.1: for tests that need no kill. */
export async function startPaymentsServer(opts: PaymentsAppOptions & { migrate?: boolean }) {
  const app = createPaymentsApp(opts);
  if (opts.migrate !== false) await app.idempotency.migrate();
  const server = createHTTPServer({ router: app.router, createContext: app.createContext });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    ...app,
    port,
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
