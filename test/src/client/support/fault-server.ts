import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AnyRouter } from '@trpc/server';
import { createHTTPHandler } from '@trpc/server/adapters/standalone';

/** What the fault layer does with one HTTP request. */
export type Fault =
  /** Forwarded and answered normally. */
  | 'pass'
  /** Forwarded; the server runs and commits, then the connection dies before any response byte. */
  | 'drop-after-commit'
  /** Not forwarded: a reverse proxy's HTML 503 page with `Retry-After: 1`. */
  | 'html-503'
  /** Not forwarded: a proxy's HTML 503 page without `Retry-After` (backend down). */
  | 'html-503-no-retry-after'
  /** Not forwarded: a proxy's HTML 403 page. */
  | 'html-403'
  /** Forwarded without the `x-user` header: the user's session ended, the app's auth middleware answers 401. */
  | 'session-ended'
  /** Forwarded with an expired CSRF token: the app's CSRF check, before the middleware, answers 403. */
  | 'csrf-expired'
  /** Forwarded to a procedure this server does not have (a rolling deploy's other version): tRPC's 404. */
  | 'procedure-gone'
  /** Not forwarded and never answered. */
  | 'hang';

/** One HTTP request as the fault layer saw it. */
export interface SeenRequest {
  at: number;
  method: string;
  path: string;
  key: string | undefined;
  keys: string | undefined;
  fault: Fault;
  /** When the connection closed before an answer was sent: the client gave up (aborted) on it. */
  abandonedAt?: number;
}

/**
 * A real HTTP server on 127.0.0.1: tRPC's standalone handler behind a fault layer that decides, per request,
 * whether to pass it, kill the answer after the server committed, answer like a proxy, or hang.
 */
export async function startFaultServer<TRouter extends AnyRouter>(opts: {
  router: TRouter;
  createContext: (o: { req: IncomingMessage; res: ServerResponse }) => unknown;
  fault?: (req: SeenRequest, seenBefore: SeenRequest[]) => Fault;
}) {
  const handler = createHTTPHandler({ router: opts.router, createContext: opts.createContext as never });
  const seen: SeenRequest[] = [];
  let decide = opts.fault ?? (() => 'pass' as Fault);

  const server = createServer((req, res) => {
    const entry: SeenRequest = {
      at: performance.now(),
      method: req.method ?? '',
      path: new URL(req.url ?? '/', 'http://x').pathname,
      key: header(req, 'idempotency-key'),
      keys: header(req, 'idempotency-keys'),
      fault: 'pass',
    };
    entry.fault = decide(entry, [...seen]);
    seen.push(entry);
    res.on('close', () => {
      if (!res.writableFinished) entry.abandonedAt = performance.now();
    });
    switch (entry.fault) {
      case 'pass':
        return void handler(req, res);
      case 'session-ended':
        delete req.headers['x-user'];
        return void handler(req, res);
      case 'csrf-expired':
        req.headers['x-csrf'] = 'expired';
        return void handler(req, res);
      case 'procedure-gone':
        req.url = (req.url ?? '/').replace(/^\/[^?]*/, '/payments.renamed');
        return void handler(req, res);
      case 'drop-after-commit': {
        // The first byte of the answer means the handler returned and its transaction committed.
        const kill = () => {
          req.socket.destroy();
          return res;
        };
        res.writeHead = kill as never;
        res.write = kill as never;
        res.end = kill as never;
        res.flushHeaders = kill as never;
        return void handler(req, res);
      }
      case 'html-503':
      case 'html-503-no-retry-after':
        res.writeHead(503, {
          'content-type': 'text/html',
          ...(entry.fault === 'html-503' && { 'retry-after': '1' }),
        });
        return void res.end('<html><body><h1>503 Service Temporarily Unavailable</h1><hr>nginx</body></html>');
      case 'html-403':
        res.writeHead(403, { 'content-type': 'text/html' });
        return void res.end('<html><body><h1>403 Forbidden</h1></body></html>');
      case 'hang':
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    setFault(fault: (req: SeenRequest, seenBefore: SeenRequest[]) => Fault) {
      decide = fault;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
