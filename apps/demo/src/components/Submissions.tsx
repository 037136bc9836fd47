'use client';

import type { NetworkAttempt } from '@/network/flakyFetch';
import { formatCents, shortKey } from './format';

export interface Submission {
  id: number;
  key: string;
  amountCents: number;
  description: string;
  /** How the call was sent: a submit, or the re-send that settled an earlier submission before a changed input. */
  via: 'submit' | 'earlier';
  attempts: number;
  replayed: boolean;
  outcome: 'pending' | 'charged' | 'declined' | 'failed' | 'unknown';
  paymentId?: number;
  message?: string;
}

function describeAttempt(attempt: NetworkAttempt, key: string): string {
  const what =
    attempt.outcome === 'lost'
      ? 'answer lost'
      : attempt.outcome === 'timed-out'
        ? 'timed out'
        : attempt.outcome === 'network-error'
          ? 'network error'
          : String(attempt.outcome);
  return attempt.replayed.includes(key) ? `${what} replayed` : what;
}

function outcomeText(submission: Submission): string {
  switch (submission.outcome) {
    case 'pending':
      return 'sending…';
    case 'charged':
      return `charged #${submission.paymentId}`;
    case 'declined':
      return `declined: ${submission.message}`;
    case 'failed':
      return `failed: ${submission.message}`;
    case 'unknown':
      return `unknown: ${submission.message}`;
  }
}

export function Submissions({
  submissions,
  network,
}: {
  submissions: Submission[];
  network: ReadonlyMap<string, NetworkAttempt[]>;
}) {
  return (
    <section className="card">
      <h2>Submissions</h2>
      <table>
        <thead>
          <tr>
            <th>Payment</th>
            <th>Key</th>
            <th className="num">Attempts</th>
            <th>Replayed</th>
            <th>Outcome</th>
            <th>What the network did (this key)</th>
          </tr>
        </thead>
        <tbody data-testid="submissions-body">
          {submissions.map((submission) => (
            <tr
              key={submission.id}
              data-testid="submission"
              data-outcome={submission.outcome}
              data-attempts={submission.attempts}
              data-replayed={String(submission.replayed)}
              data-key={submission.key}
            >
              <td>
                {formatCents(submission.amountCents)} {submission.description}
                {submission.via === 'earlier' && <span className="tag">earlier, settled</span>}
              </td>
              <td>
                <code title={submission.key}>{shortKey(submission.key)}</code>
              </td>
              <td className="num">{submission.attempts}</td>
              <td>{submission.replayed ? <span className="tag replay">replayed</span> : 'no'}</td>
              <td className={`outcome ${submission.outcome}`}>{outcomeText(submission)}</td>
              <td className="small">
                {(network.get(submission.key) ?? []).map((attempt, index) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: attempts are append-only
                  <span key={index} className={attempt.fault ? 'hop faulty' : 'hop'}>
                    {attempt.fault ? `${attempt.fault}: ` : ''}
                    {describeAttempt(attempt, submission.key)}
                  </span>
                ))}
              </td>
            </tr>
          ))}
          {submissions.length === 0 && (
            <tr>
              <td colSpan={6} className="hint">
                Submit a payment, with the flaky network on.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </section>
  );
}
