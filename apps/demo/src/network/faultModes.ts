/**
 * How the flaky network misbehaves. Each fault hits the first HTTP attempt of a key, so the retry can get
 * through; `lose-every-response` loses every answer, so the link gives up and the outcome stays unknown.
 */
export type FaultMode =
  | 'off'
  | 'lose-response'
  | 'slow-response'
  | 'unavailable'
  | 'in-flight-duplicate'
  | 'chaos'
  | 'lose-every-response';

export const faultModes: ReadonlyArray<{ mode: FaultMode; label: string; explain: string }> = [
  { mode: 'off', label: 'Off', explain: 'A perfect network.' },
  {
    mode: 'lose-response',
    label: 'Lose the response',
    explain: 'The server commits the payment, then the connection drops before the answer arrives.',
  },
  {
    mode: 'slow-response',
    label: 'Slow response',
    explain: "The answer arrives after the client's attempt timeout, so the client gives up on it and retries.",
  },
  {
    mode: 'unavailable',
    label: '503 + Retry-After',
    explain: 'An overloaded gateway sheds the request (nothing runs) and says when to come back.',
  },
  {
    mode: 'in-flight-duplicate',
    label: '409 in flight',
    explain: 'An earlier copy of the request is still running on a slow connection when the app sends it again.',
  },
  { mode: 'chaos', label: 'Chaos', explain: 'Any of the above, at random, on any attempt.' },
  {
    mode: 'lose-every-response',
    label: 'Lose every answer',
    explain:
      'The server commits, every answer is dropped, and the link gives up: the outcome is unknown. "Try again" (once the network is back) reuses the key.',
  },
];

export const concreteFaults = ['lose-response', 'slow-response', 'unavailable', 'in-flight-duplicate'] as const;
export type ConcreteFault = (typeof concreteFaults)[number];
