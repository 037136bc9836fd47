export { EarlierOutcomeUnknownError } from './earlierOutcomeUnknownError.js';
export type { IdempotentCall, IdempotentCallResult } from './internals/actionController.js';
export { type EarlierOutcome, NewInputNotConfirmedError } from './newInputNotConfirmedError.js';
export {
  type IdempotentMutationResult,
  type IdempotentMutationSettings,
  useIdempotentMutation,
} from './useIdempotentMutation.js';
export { type ResumePendingCalls, useResumePendingCalls } from './useResumePendingCalls.js';
