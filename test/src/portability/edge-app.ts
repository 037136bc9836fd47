// Runs INSIDE edge-runtime (bundled by edge-runtime.test.ts): a tRPC app behind the fetch adapter with both
// packages' built ESM, PGlite in memory, and two clients (httpLink, httpBatchLink) that call it through a fetch
// function instead of a network. It returns what happened as JSON; the test outside the VM asserts on it.
import { PGlite } from '@electric-sql/pglite';
import { createTRPCClient, httpBatchLink, httpLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { type FetchCreateContextFnOptions, fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { getIdempotencyReason, idempotencyFetch, idempotencyHeaders, idempotencyLink } from '@trpc-idempotency/client';
import { createIdempotency, idempotencyErrorFormatter } from '@trpc-idempotency/server';
import { Kysely, PGliteDialect } from 'kysely';

/** PGlite's WebAssembly and data files, read by the host: the VM has no file system. */
export interface EdgeAssets {
  pgliteWasm: Uint8Array<ArrayBuffer>;
  initdbWasm: Uint8Array<ArrayBuffer>;
  fsBundle: Uint8Array<ArrayBuffer>;
}

/** One HTTP exchange as the fetch handler saw it. */
export interface EdgeExchange {
  key: string | null;
  keys: string | null;
  status: number;
  replayed: string | null;
}

export interface EdgeOutcome {
  first: unknown;
  replay: unknown;
  mismatch: unknown;
  generated: unknown;
  batchFirst: unknown[];
  batchReplay: unknown[];
  runs: number;
  exchanges: EdgeExchange[];
  settled: { key: string; replayed: boolean }[];
}

function createContext({ req, resHeaders }: FetchCreateContextFnOptions) {
  return { req, resHeaders, user: 'edge-user' };
}
type Context = ReturnType<typeof createContext>;

async function edgeScenario(assets: EdgeAssets): Promise<string> {
  // WebAssembly compiled inside the VM, as an edge function that bundles PGlite's .wasm files would.
  const pglite = new PGlite({
    pgliteWasmModule: await WebAssembly.compile(assets.pgliteWasm),
    initdbWasmModule: await WebAssembly.compile(assets.initdbWasm),
    fsBundle: new Blob([assets.fsBundle]),
  });
  const db = new Kysely<Record<string, never>>({ dialect: new PGliteDialect({ pglite }) });
  const scope = ({ ctx }: { ctx: Context }) => `user:${ctx.user}`;
  const inTransaction = createIdempotency({ db, scope });
  const withLease = createIdempotency({ db, scope, mode: 'lease' }); // its fencing token: crypto.randomUUID()
  await inTransaction.migrate();

  let runs = 0;
  const t = initTRPC.context<Context>().create({ errorFormatter: idempotencyErrorFormatter });
  const amount = (input: unknown) => input as { amount: number };
  const router = t.router({
    pay: t.procedure
      .use(inTransaction.middleware)
      .input(amount)
      .mutation(({ input }) => ({ charge: ++runs, amount: input.amount })),
    payLeased: t.procedure
      .use(withLease.middleware)
      .input(amount)
      .mutation(({ input }) => ({ charge: ++runs, amount: input.amount })),
  });

  const exchanges: EdgeExchange[] = [];
  const serverFetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const res = await fetchRequestHandler({ endpoint: '/trpc', req, router, createContext });
    exchanges.push({
      key: req.headers.get('idempotency-key'),
      keys: req.headers.get('idempotency-keys'),
      status: res.status,
      replayed: res.headers.get('idempotent-replayed'),
    });
    return res;
  };

  const settled: EdgeOutcome['settled'] = [];
  const http = { url: 'http://edge.invalid/trpc', headers: idempotencyHeaders, fetch: idempotencyFetch(serverFetch) };
  const clientWith = (terminating: ReturnType<typeof httpLink>) =>
    createTRPCClient<typeof router>({
      links: [
        idempotencyLink<typeof router>({
          procedures: ['pay', 'payLeased'],
          onSettled: ({ key, replayed }) => settled.push({ key, replayed }),
        }),
        terminating,
      ],
    });
  const single = clientWith(httpLink(http));
  const batched = clientWith(httpBatchLink(http));
  const keyed = (idempotencyKey: string) => ({ context: { idempotencyKey } });

  const first = await single.pay.mutate({ amount: 5 }, keyed('edge-key-1'));
  const replay = await single.pay.mutate({ amount: 5 }, keyed('edge-key-1'));
  const mismatch = await single.pay.mutate({ amount: 6 }, keyed('edge-key-1')).then(
    (result) => ({ result }),
    (error: { data?: { httpStatus?: number } }) => ({
      reason: getIdempotencyReason(error),
      httpStatus: error.data?.httpStatus,
    }),
  );
  const generated = await single.payLeased.mutate({ amount: 7 });
  const batch = () =>
    Promise.all([
      batched.pay.mutate({ amount: 8 }, keyed('edge-batch-1')),
      batched.payLeased.mutate({ amount: 9 }, keyed('edge-batch-2')),
    ]);
  const batchFirst = await batch();
  const batchReplay = await batch();
  await pglite.close();

  const outcome: EdgeOutcome = {
    first,
    replay,
    mismatch,
    generated,
    batchFirst,
    batchReplay,
    runs,
    exchanges,
    settled,
  };
  return JSON.stringify(outcome);
}

(globalThis as { edgeScenario?: typeof edgeScenario }).edgeScenario = edgeScenario;
