import type { MiddlewareOpts } from '../middleware/call-source.js';
import { CallTrace } from './call-trace.js';
import type { Telemetry } from './telemetry.js';

/** The middleware, with a call span around each call and the call's trace passed in for the modes' hooks. */
export function traceCalls(
  telemetry: Telemetry,
  fn: (opts: MiddlewareOpts) => Promise<unknown>,
): (opts: MiddlewareOpts) => Promise<unknown> {
  return async (opts) => {
    const trace = new CallTrace(telemetry, opts.path);
    try {
      const result = await fn({ ...opts, trace });
      trace.end(result);
      return result;
    } catch (error) {
      trace.end(undefined, error);
      throw error;
    }
  };
}
