export { EarlierOutcomeUnknownError } from './earlier-outcome-unknown-error.js';
export type { IdempotentCall, IdempotentCallResult } from './internals/action-controller.js';
export { type EarlierOutcome, NewInputNotConfirmedError } from './new-input-not-confirmed-error.js';
export {
  type IdempotentMutationResult,
  type IdempotentMutationSettings,
  useIdempotentMutation,
} from './use-idempotent-mutation.js';
export { type ResumePendingCalls, useResumePendingCalls } from './use-resume-pending-calls.js';
