/**
 * Thrown by a mutation whose input changed while the outcome of the previous submission was unknown and
 * could not be learnt (the network is still down): the new input was not sent, so the user is never
 * charged for both without knowing. Retry later; the earlier submission is settled first, with its key.
 */
export class EarlierOutcomeUnknownError<TVariables = unknown> extends Error {
  override name = 'EarlierOutcomeUnknownError';
  constructor(
    /** The earlier submission's input. */
    readonly variables: TVariables,
    /** Its key, still held for it. */
    readonly key: string,
    override readonly cause: unknown,
  ) {
    super(
      'The outcome of the earlier submission is still unknown, so the changed one was not sent. ' +
        'Try again once the network is back: the earlier one is settled first, with its own key.',
    );
  }
}
