import type { AddressInfo } from 'node:net';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { afterAll, beforeAll, inject } from 'vitest';
import { type Backend, type BackendName, openBackend } from './backends.ts';
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

export type PaymentsServer = Awaited<ReturnType<typeof startPaymentsServer>>;

/**
 * A payments server on a fresh database of one backend, for the tests of one describe block: `use` registers the
 * hooks that open it before them and close it after. Read `backend` and `server` inside tests only.
 */
export class PaymentsFixture {
  backend!: Backend;
  server!: PaymentsServer;

  use(name: BackendName, opts: Omit<PaymentsAppOptions, 'db' | 'pool'> = {}): void {
    beforeAll(async () => {
      this.backend = await openBackend(name, inject('pgAdminUrl'));
      this.server = await startPaymentsServer({ ...this.backend.via, ...opts });
    });
    afterAll(async () => {
      await this.server?.close();
      await this.backend?.drop();
    });
  }
}
