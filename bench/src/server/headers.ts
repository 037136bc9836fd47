import type { IncomingMessage } from 'node:http';

/** The context every bench server builds: the standalone adapter's request and response. */
export interface BenchContext {
  req: IncomingMessage;
  res: { setHeader(name: string, value: string): unknown; headersSent?: boolean };
}

export function idempotencyKeyOf(ctx: BenchContext): string | undefined {
  const value = ctx.req.headers['idempotency-key'];
  return typeof value === 'string' ? value : undefined;
}
