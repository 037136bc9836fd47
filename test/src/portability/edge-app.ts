// Runs INSIDE edge-runtime (bundled by edge-runtime.test.ts): a tRPC app behind the fetch adapter with both
// packages' built ESM, PGlite in memory, and two clients (httpLink, httpBatchLink) that call it through a fetch
// function instead of a network. It returns what happened as JSON; the test outside the VM asserts on it.
import { PGlite } from '@electric-sql/pglite';
import { createTRPCClient, httpBatchLink, httpLink } from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
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
  /** Every other server outcome, per mode, through raw requests: status, reason and replay flag. */
  raw: Record<string, EdgeRawAnswer>;
}

/** One raw request's answer: its status, `Idempotent-Replayed`, and the error's code and reason (if any). */
export interface EdgeRawAnswer {
  status: number;
  replayed: string | null;
  code?: string;
  reason?: string | null;
  data?: unknown;
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
  // Small limits make the other outcomes: a result too large to store, and a duplicate refused at once.
  const modes = {
    transaction: createIdempotency({ db, scope, maxResponseBytes: 256, wait: 0 }),
    lease: createIdempotency({ db, scope, mode: 'lease', maxResponseBytes: 256, wait: 0 }),
  };
  await inTransaction.migrate();

  let runs = 0;
  const t = initTRPC.context<Context>().create({ errorFormatter: idempotencyErrorFormatter });
  const amount = (input: unknown) => input as { amount: number };
  // The slow procedure holds its key until released, so a duplicate meets it in progress.
  let started = false;
  let release: () => void = () => {};
  const hold = () => {
    started = false;
    return new Promise<void>((resolve) => {
      release = resolve;
    });
  };
  let held = hold();
  const outcomes = (middleware: typeof inTransaction.middleware) => ({
    large: t.procedure
      .use(middleware)
      .input(amount)
      .mutation(({ input }) => 'x'.repeat(input.amount)),
    declined: t.procedure
      .use(middleware)
      .input(amount)
      .mutation((): never => {
        throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
      }),
    slow: t.procedure
      .use(middleware)
      .input(amount)
      .mutation(async ({ input }) => {
        started = true;
        await held;
        return input;
      }),
  });
  const router = t.router({
    transaction: t.router(outcomes(modes.transaction.middleware)),
    lease: t.router(outcomes(modes.lease.middleware)),
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

  const raw: EdgeOutcome['raw'] = {};
  const rawCall = async (path: string, key: string, input: unknown): Promise<EdgeRawAnswer> => {
    const res = await serverFetch(`http://edge.invalid/trpc/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
      body: JSON.stringify(input),
    });
    const body = (await res.json()) as { error?: { data?: { code?: string; idempotency?: { reason?: string } } } };
    return {
      status: res.status,
      replayed: res.headers.get('idempotent-replayed'),
      ...(body.error
        ? { code: body.error.data?.code, reason: body.error.data?.idempotency?.reason ?? null }
        : { data: body }),
    };
  };
  for (const mode of ['transaction', 'lease'] as const) {
    raw[`${mode}.large`] = await rawCall(`${mode}.large`, `${mode}-large`, { amount: 1000 });
    raw[`${mode}.largeAgain`] = await rawCall(`${mode}.large`, `${mode}-large`, { amount: 1000 });
    raw[`${mode}.declined`] = await rawCall(`${mode}.declined`, `${mode}-declined`, { amount: 1 });
    raw[`${mode}.declinedAgain`] = await rawCall(`${mode}.declined`, `${mode}-declined`, { amount: 1 });
    raw[`${mode}.mismatch`] = await rawCall(`${mode}.declined`, `${mode}-declined`, { amount: 2 });
    held = hold();
    const original = rawCall(`${mode}.slow`, `${mode}-slow`, { amount: 3 });
    while (!started) await new Promise((resolve) => setTimeout(resolve, 1));
    raw[`${mode}.conflict`] = await rawCall(`${mode}.slow`, `${mode}-slow`, { amount: 3 });
    release();
    raw[`${mode}.slow`] = await original;
    raw[`${mode}.slowAgain`] = await rawCall(`${mode}.slow`, `${mode}-slow`, { amount: 3 });
  }
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
    raw,
  };
  return JSON.stringify(outcome);
}

(globalThis as { edgeScenario?: typeof edgeScenario }).edgeScenario = edgeScenario;
