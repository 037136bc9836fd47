/**
 * A payments server on MariaDB or SQLite, run as a child process (through tsx) so a test can SIGKILL it
 * mid-handler or run two of them on one database. Environment: DIALECT (mariadb | sqlite | libsql), TARGET (a
 * mysql:// URL or a SQLite file path), MODE, WAIT_MS, LEASE_MS, HANDLER_DELAY_MS, INSTANCE, PORT. Reports JSON lines.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LibsqlDialect } from '@libsql/kysely-libsql';
import { initTRPC } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { createIdempotency, idempotencyErrorFormatter } from '@trpc-idempotency/server';
import Database from 'better-sqlite3';
import { type Dialect, Kysely, MysqlDialect, SqliteDialect } from 'kysely';
import { createPool } from 'mysql2';
import { z } from 'zod';

const env = process.env;
const report = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const target = env.TARGET ?? '';
const instance = env.INSTANCE ?? 'main';

function dialect(): Dialect {
  if (env.DIALECT === 'mariadb') return new MysqlDialect({ pool: createPool({ uri: target, connectionLimit: 10 }) });
  if (env.DIALECT === 'libsql') return new LibsqlDialect({ url: `file:${target}` });
  return new SqliteDialect({ database: new Database(target) });
}
const db = new Kysely<any>({ dialect: dialect() });

/** The middleware reads the request's headers from `ctx.req`: createContext passes it on. */
interface Context {
  req: IncomingMessage;
  res: ServerResponse;
  user: string;
}
const t = initTRPC.context<Context>().create({ errorFormatter: idempotencyErrorFormatter });
const idempotency = createIdempotency({
  db,
  scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user}`,
  mode: env.MODE === 'lease' ? 'lease' : 'transaction',
  ...(env.WAIT_MS ? { wait: Number(env.WAIT_MS) } : {}),
  ...(env.LEASE_MS ? { lease: Number(env.LEASE_MS) } : {}),
});
const router = t.router({
  payments: t.router({
    create: t.procedure
      .use(idempotency.middleware)
      .input(z.object({ ref: z.string(), amount: z.number().int() }))
      .mutation(async ({ ctx, input }) => {
        const { key } = ctx.idempotency;
        report({ ev: 'enter', key, ref: input.ref });
        await ctx.idempotency.db
          .insertInto('ledger')
          .values({ ref: input.ref, amount: input.amount, user_id: ctx.user, idem_key: key, instance })
          .execute();
        const delay = Number(env.HANDLER_DELAY_MS ?? 0);
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
        return { ref: input.ref, instance, execution: crypto.randomUUID() };
      }),
  }),
});

await idempotency.migrate();
const server = createHTTPServer({
  router,
  createContext: ({ req, res }): Context => {
    const user = req.headers['x-user'];
    return { req, res, user: typeof user === 'string' && user ? user : 'alice' };
  },
});
server.listen(Number(env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  report({ ev: 'listening', port: typeof address === 'object' && address ? address.port : 0 });
});
