import { getIdempotencyData } from '../idempotency-error.js';
import { isKeyAnswer } from './outcome.js';
import { parseRetryAfter } from './retry-after.js';

/** Statuses that say "not now" rather than "no": the same request may succeed later. */
const RETRYABLE_STATUSES = new Set([408, 429, 500, 502, 503, 504]);

export interface RetryVerdict {
  retry: boolean;
  /** The server's own wait (`retryAfterMs` or `Retry-After`), which replaces backoff. */
  retryAfterMs?: number;
}

interface ErrorLike {
  data?: { httpStatus?: unknown } | null;
  meta?: { response?: { status?: unknown; headers?: { get(name: string): string | null } } } | null;
}

/**
 * The retry policy (DESIGN.md, Client). Retrying a keyed call is safe — the server replays a committed
 * result — so the question is only whether another attempt can succeed.
 */
export function classifyError(error: unknown, now: number): RetryVerdict {
  const e = (typeof error === 'object' && error !== null ? error : {}) as ErrorLike;
  const idempotency = getIdempotencyData(error);
  const response = e.meta?.response;
  const httpStatus = e.data?.httpStatus ?? response?.status;
  const status = typeof httpStatus === 'number' ? httpStatus : undefined;

  // The key's stored outcome (a replayed error, whatever its status) answers every retry the same way.
  if (idempotency?.reason === 'response_too_large' || isKeyAnswer(error)) return { retry: false };

  // No HTTP answer at all: connection refused or reset, an aborted hung attempt, or an unreadable body.
  if (status === undefined) return { retry: true };

  const retry =
    idempotency?.reason === 'in_progress' ||
    idempotency?.reason === 'store_unavailable' ||
    // A 409 without the in_progress reason is the application's own conflict: it will not change.
    (status !== 409 && RETRYABLE_STATUSES.has(status));
  if (!retry) return { retry: false };

  // JSON reads 1e400 as Infinity: only a finite wait ≥ 0 counts.
  const own = idempotency?.retryAfterMs;
  const retryAfterMs =
    own !== undefined && Number.isFinite(own) && own >= 0
      ? own
      : parseRetryAfter(response?.headers?.get('retry-after'), now);
  return retryAfterMs === undefined ? { retry: true } : { retry: true, retryAfterMs };
}
