/** What every tRPC call on the demo sees. The middleware reads request headers from `req` and writes `resHeaders`. */
export interface DemoContext {
  req: Request;
  resHeaders: Headers;
  /** The demo has no login: the caller names itself with `x-demo-user` (the storm uses its own user per run). */
  userId: string;
  /** Simulated payment-provider latency for this call, from `x-demo-processing-ms` (the flaky network's 409 mode). */
  processingMs: number;
}

const MAX_PROCESSING_MS = 5_000;

export function createDemoContext(req: Request, resHeaders: Headers): DemoContext {
  const user = req.headers.get('x-demo-user')?.trim();
  const processing = Number(req.headers.get('x-demo-processing-ms') ?? 0);
  return {
    req,
    resHeaders,
    userId: user && /^[\w.-]{1,64}$/.test(user) ? user : 'demo',
    processingMs: Number.isFinite(processing) ? Math.min(Math.max(processing, 0), MAX_PROCESSING_MS) : 0,
  };
}
