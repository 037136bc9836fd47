import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { initTRPC } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { octetInputParser } from '@trpc/server/http';
import { createIdempotency, type IdempotencyOptions, idempotencyErrorFormatter } from '@trpc-idempotency/server';
import type { Kysely } from 'kysely';
import type { Pool } from 'pg';
import superjson from 'superjson';
import { z } from 'zod';

/** The caller's tenant, from an `x-tenant` header holding a JSON string (as a decoded token claim would be). */
interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  tenant: string;
}

/** A request body written as JSON text by the test itself. */
export class JsonText {
  constructor(readonly text: string) {}
}

export interface InputKindsAppOptions {
  db: Kysely<any>;
  pool?: Pool;
  /** `superjson` to run the router with tRPC's transformer. */
  transformer?: 'superjson';
  /** More middleware options (limits). */
  idempotency?: Partial<IdempotencyOptions<Ctx, any, true>>;
}

/**
 * A router with one guarded procedure per kind of input tRPC accepts (JSON or superjson, FormData, a binary
 * stream), plus unguarded twins, served over real HTTP on 127.0.0.1. Every handler run is counted.
 */
export async function startInputKindsServer(opts: InputKindsAppOptions) {
  const runs = { count: 0 };
  const t = initTRPC.context<Ctx>().create({
    errorFormatter: idempotencyErrorFormatter,
    ...(opts.transformer === 'superjson' ? { transformer: superjson } : {}),
  });
  const idempotency = createIdempotency({
    db: opts.db,
    ...(opts.pool ? { pool: opts.pool } : {}),
    scope: ({ ctx }: { ctx: Ctx }) => `tenant:${ctx.tenant}`,
    ...opts.idempotency,
  });
  const guarded = t.procedure.use(idempotency.middleware);
  const run = () => ++runs.count;

  const readForm = async (form: FormData) => {
    const fields: [string, string | { name: string; type: string; size: number; text: string }][] = [];
    for (const [name, value] of form) {
      fields.push([
        name,
        typeof value === 'string'
          ? value
          : { name: value.name, type: value.type, size: value.size, text: await value.text() },
      ]);
    }
    return fields;
  };
  const readStream = async (stream: ReadableStream) => new Uint8Array(await new Response(stream).arrayBuffer());

  const router = t.router({
    echo: guarded.input(z.unknown()).mutation(({ ctx, input }) => ({ run: run(), tenant: ctx.tenant, input })),
    count: guarded.input(z.unknown()).mutation(({ ctx }) => ({ run: run(), tenant: ctx.tenant })),
    plainCount: t.procedure.input(z.unknown()).mutation(() => ({ run: run() })),
    pay: guarded
      .input(z.object({ amount: z.number().int(), note: z.string().optional() }))
      .mutation(({ input }) => ({ run: run(), amount: input.amount })),
    plainPay: t.procedure
      .input(z.object({ amount: z.number().int() }))
      .mutation(({ input }) => ({ run: run(), amount: input.amount })),
    form: guarded
      .input(z.instanceof(FormData))
      .mutation(async ({ input }) => ({ run: run(), fields: await readForm(input) })),
    plainForm: t.procedure
      .input(z.instanceof(FormData))
      .mutation(async ({ input }) => ({ run: run(), fields: await readForm(input) })),
    upload: guarded.input(octetInputParser).mutation(async ({ input }) => ({
      run: run(),
      bytes: (await readStream(input)).length,
    })),
    plainUpload: t.procedure.input(octetInputParser).mutation(async ({ input }) => ({
      run: run(),
      bytes: (await readStream(input)).length,
    })),
  });

  const createContext = ({ req, res }: { req: IncomingMessage; res: ServerResponse }): Ctx => {
    const header = req.headers['x-tenant'];
    return { req, res, tenant: typeof header === 'string' ? (JSON.parse(header) as string) : 'acme' };
  };
  await idempotency.migrate();
  const server = createHTTPServer({ router, createContext });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    runs,
    port,
    url,
    /**
     * Posts one call; `body` is sent as is (a FormData, a Blob, bytes), as JSON (through superjson if on), or as
     * the JSON text given in `{ jsonText }` (for values JSON.stringify cannot write, such as 20 000 nested arrays).
     */
    async call(path: string, body: unknown, headers: Record<string, string> = {}) {
      const init: RequestInit & { duplex?: 'half' } = { method: 'POST', headers: { ...headers } };
      if (body instanceof FormData) init.body = body;
      else if (body instanceof Blob || body instanceof Uint8Array) {
        init.body = body instanceof Blob ? body : new Blob([body as Uint8Array<ArrayBuffer>]);
        (init.headers as Record<string, string>)['content-type'] = 'application/octet-stream';
      } else if (body instanceof JsonText) {
        init.body = opts.transformer === 'superjson' ? `{"json":${body.text}}` : body.text;
        (init.headers as Record<string, string>)['content-type'] = 'application/json';
      } else {
        init.body = JSON.stringify(opts.transformer === 'superjson' ? superjson.serialize(body) : body);
        (init.headers as Record<string, string>)['content-type'] = 'application/json';
      }
      const res = await fetch(`${url}/${path}`, init);
      const text = await res.text();
      const json = JSON.parse(text) as { result?: { data?: unknown }; error?: unknown };
      const decode = (value: unknown) =>
        value !== undefined && opts.transformer === 'superjson' ? superjson.deserialize(value as never) : value;
      const data = decode(json.result?.data);
      const error = decode(json.error) as
        | { message?: string; data?: { code?: string; idempotency?: { reason?: string } } }
        | undefined;
      return {
        status: res.status,
        replayed: res.headers.get('idempotent-replayed'),
        data: data as Record<string, unknown> | undefined,
        code: error?.data?.code,
        reason: error?.data?.idempotency?.reason,
        message: error?.message,
        body: text,
      };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type InputKindsServer = Awaited<ReturnType<typeof startInputKindsServer>>;
