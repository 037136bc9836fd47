'use client';

import { formatCents } from './format';
import type { Submission } from './Submissions';

/** What became of the last submission, in words a customer understands, with "Try again" when it is unknown. */
export function PayStatus({ last, onTryAgain }: { last: Submission | null; onTryAgain: () => void }) {
  if (!last) return null;
  const amount = formatCents(last.amountCents);
  let text: string;
  switch (last.outcome) {
    case 'pending':
      text = `Paying ${amount}…`;
      break;
    case 'charged':
      text = last.replayed
        ? `Charged ${amount} once (#${last.paymentId}): an earlier attempt had gone through, this is its answer.`
        : `Charged ${amount} (#${last.paymentId}).`;
      break;
    case 'declined':
      text = `Declined: ${last.message}`;
      break;
    case 'failed':
      text = `Not charged: ${last.message}`;
      break;
    case 'unknown':
      text = `We could not confirm the payment of ${amount}: the answer was lost. Try again — the same key is sent, so you cannot be charged twice.`;
      break;
    default:
      text = '';
  }
  return (
    <div className={`status ${last.outcome}`} data-testid="pay-status" data-outcome={last.outcome} data-key={last.key}>
      <p>{text}</p>
      {last.outcome === 'unknown' && (
        <button type="button" onClick={onTryAgain} data-testid="try-again">
          Try again
        </button>
      )}
    </div>
  );
}
