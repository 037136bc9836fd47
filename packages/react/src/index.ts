export { EarlierOutcomeUnknownError } from './earlierOutcomeUnknownError.js';
export type { EarlierOutcome, IdempotentCall, IdempotentCallResult } from './internals/actionController.js';
export { NewInputNotConfirmedError } from './newInputNotConfirmedError.js';
export {
  type IdempotentMutationResult,
  type IdempotentMutationSettings,
  useIdempotentMutation,
} from './useIdempotentMutation.js';
export { type ResumePendingCalls, useResumePendingCalls } from './useResumePendingCalls.js';
