'use client';

import type { ResumedCall } from '@trpc-idempotency/client';
import { formatCents } from './format';

interface PaymentInput {
  amountCents: number;
  description: string;
}

function describe(resumed: ResumedCall): string {
  const input = resumed.input as PaymentInput | undefined;
  const what = input ? `Your payment of ${formatCents(input.amountCents)} (${input.description})` : 'A payment';
  switch (resumed.status) {
    case 'succeeded':
      return `${what} went through: #${(resumed.data as { id: number }).id}, charged once.`;
    case 'failed':
      return `${what} did not go through: ${resumed.error instanceof Error ? resumed.error.message : String(resumed.error)}`;
    case 'unknown':
      return `${what} is still unconfirmed (the network is down). It will be checked again on the next visit; it cannot be charged twice.`;
    case 'expired':
      return `${what} is too old to confirm safely. Check the ledger before paying again.`;
  }
}

/** One banner per payment a reload left pending, telling how it ended once resumed with its key. */
export function ResumeBanners({
  resuming,
  resumed,
  onDismiss,
}: {
  resuming: boolean;
  resumed: ResumedCall[];
  onDismiss: (key: string) => void;
}) {
  if (!resuming && resumed.length === 0) return null;
  return (
    <section className="banners">
      {resuming && <p className="banner">Checking payments left pending by the last visit…</p>}
      {resumed.map((entry) => (
        <p
          key={entry.call.key}
          className={`banner ${entry.status}`}
          data-testid="resume-banner"
          data-status={entry.status}
          data-key={entry.call.key}
          data-replayed={entry.status === 'succeeded' ? String(entry.replayed) : undefined}
        >
          {describe(entry)}{' '}
          <button type="button" className="link" onClick={() => onDismiss(entry.call.key)}>
            Dismiss
          </button>
        </p>
      ))}
    </section>
  );
}
