/** What became of the earlier submission when the input changed after its outcome was unknown. */
export type EarlierOutcome<TData, TVariables> =
  | { status: 'succeeded'; key: string; variables: TVariables; data: TData; replayed: boolean }
  | { status: 'failed'; key: string; variables: TVariables; error: unknown };

/**
 * Thrown by a mutation whose input changed while an earlier submission of the action was unknown or in flight,
 * when that earlier one was settled and `confirmNewInput` did not confirm the changed one (by default: the earlier
 * one went through). The changed input was not sent and no key was made for it: submitting it again sends it as a
 * new action. Show the user what became of the earlier one (`earlier`) and let them decide.
 */
export class NewInputNotConfirmedError<TData = unknown, TVariables = unknown> extends Error {
  override name = 'NewInputNotConfirmedError';
  constructor(
    /** The changed input, not sent. */
    readonly variables: TVariables,
    /** What became of the earlier submission. */
    readonly earlier: EarlierOutcome<TData, TVariables>,
  ) {
    super(
      `The earlier submission ${earlier.status === 'succeeded' ? 'went through' : 'failed'}, so the changed one ` +
        'was not sent. Submit it again to send it as a new action.',
    );
  }
}
