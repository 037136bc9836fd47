import { isMarkedOutcomeUnknown } from './internals/outcome.js';
import { classifyError } from './internals/retry-policy.js';

/**
 * Whether a failed keyed call's outcome is unknown: the link gave up on an error it retries (a lost
 * answer, a timeout, a 5xx, a 409 `in_progress`), the call was aborted, or an earlier attempt got no answer
 * and the last one's error says nothing of the key (an auth layer's 401 after the session ended, a CSRF
 * check's 403, a 404 during a deploy, a proxy's page: only the key's own answer, marked by the server's
 * `idempotencyErrorFormatter`, tells). Such a call may have run; send it again with the same key. Any other
 * error is the server's definitive answer and spends the key. An error that did not come out of a tRPC call
 * (`useIdempotentMutation`'s refusal to send a changed input, say) sent nothing: false.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  // By name, not instanceof: a second copy of @trpc/client in a bundle must not turn an unknown into "failed".
  if (!(error instanceof Error && error.name === 'TRPCClientError')) return false;
  return isMarkedOutcomeUnknown(error) || classifyError(error, Date.now()).retry;
}
