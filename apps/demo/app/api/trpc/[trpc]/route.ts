import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { ensureReady } from '@/server/backend';
import { createDemoContext } from '@/server/context';
import { appRouter } from '@/server/router';

// The database is opened on the first request, never while `next build` prerenders.
export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';

/**
 * The flaky network's "503" mode: the browser marks an attempt with `x-demo-fault: unavailable` and the
 * server really sheds it, the way an overloaded gateway does: a non-tRPC page, `Retry-After`, nothing run.
 */
function shedLoad(): Response {
  return new Response(
    '<!doctype html><title>503</title><h1>503 Service Unavailable</h1><p>Demo gateway: try again in 1 s.</p>',
    {
      status: 503,
      headers: { 'content-type': 'text/html; charset=utf-8', 'retry-after': '1', 'cache-control': 'no-store' },
    },
  );
}

async function handler(req: Request): Promise<Response> {
  if (req.headers.get('x-demo-fault') === 'unavailable') return shedLoad();
  try {
    await ensureReady();
  } catch (error) {
    console.error('[demo] database not ready:', error);
    return new Response('Database unavailable, try again shortly.', {
      status: 503,
      headers: { 'retry-after': '2', 'cache-control': 'no-store' },
    });
  }
  return fetchRequestHandler({
    endpoint: '/api/trpc',
    req,
    router: appRouter,
    createContext: ({ req, resHeaders }) => createDemoContext(req, resHeaders),
    onError: ({ error, path }) => {
      if (error.code === 'INTERNAL_SERVER_ERROR') console.error(`[demo] ${path ?? '?'} failed:`, error);
    },
  });
}

export { handler as GET, handler as POST };
