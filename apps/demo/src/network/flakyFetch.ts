import { type ConcreteFault, concreteFaults, type FaultMode } from './faultModes';

/** What happened to one HTTP attempt, as seen below the client link. */
export interface NetworkAttempt {
  /** The idempotency keys the request carried (one, or several for a batch). */
  keys: string[];
  /** The fault injected into this attempt, if any. */
  fault: ConcreteFault | null;
  /** What the caller saw: an HTTP status, or the network error it got instead. */
  outcome: number | 'lost' | 'timed-out' | 'network-error';
  /** The keys the server answered from its store (`Idempotent-Replayed: true`, or `b0, b2` for a batch). */
  replayed: string[];
}

export interface FlakyFetchOptions {
  /** Read before every request, so a UI toggle applies at once. */
  mode: () => FaultMode;
  /** The real fetch. Default: `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** How long a slow response is held back. Default 3000 ms: longer than the demo client's 2000 ms attempt timeout. */
  slowMs?: number;
  /** How long the "earlier copy" keeps the server busy in in-flight-duplicate mode. Default 1200 ms (server wait: 300 ms). */
  processingMs?: number;
  /** Chance that an attempt gets a fault in chaos mode. Default 0.4. */
  chaosRate?: number;
  /** Default `Math.random`. */
  random?: () => number;
  /** Called once per HTTP attempt the client made (a ghost copy is not one), after it settled. */
  onAttempt?: (attempt: NetworkAttempt) => void;
}

/** Reads the keys from `Idempotency-Key: "k"` or `Idempotency-Keys: b0="k1", b1="k2"`; enough for the demo's UUIDs. */
export function requestKeys(headers: Headers): string[] {
  const single = headers.get('idempotency-key');
  if (single) return [single.trim().replace(/^"(.*)"$/, '$1')];
  const batch = headers.get('idempotency-keys');
  if (!batch) return [];
  return [...batch.matchAll(/b\d+\s*=\s*"([^"]*)"/g)].map((match) => match[1] ?? '');
}

/** Maps `Idempotent-Replayed` onto the request's keys: `true` (or `?1`) for a single call, `b0, b2` for a batch. */
export function replayedKeys(keys: string[], response: Response | undefined): string[] {
  const value = response?.headers.get('idempotent-replayed')?.trim();
  if (!value || value === 'false' || value === '?0') return [];
  if (value === 'true' || value === '?1') return keys.slice(0, 1);
  const replayed = value.split(',').map((token) => keys[Number(token.trim().replace(/^b/, ''))]);
  return [...new Set(replayed.filter((key): key is string => key !== undefined))];
}

function networkError(message: string): TypeError {
  // Browsers reject fetch with a bare TypeError when the connection drops; keep that shape.
  return new TypeError(`Failed to fetch (${message})`);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError');
}

function delay(ms: number, signal: AbortSignal | null | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A `fetch` that misbehaves like a mobile network. Faults are real: the request really reaches the server (or
 * the server really sheds it), and what is lost is the answer on its way back. Requests without an idempotency
 * key (queries) are never touched.
 */
export function flakyFetch(options: FlakyFetchOptions): typeof fetch {
  const realFetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const slowMs = options.slowMs ?? 3_000;
  const processingMs = options.processingMs ?? 1_200;
  const chaosRate = options.chaosRate ?? 0.4;
  const random = options.random ?? Math.random;
  const seen = new Set<string>();

  function pickFault(keys: string[]): ConcreteFault | null {
    const mode = options.mode();
    if (mode === 'off' || keys.length === 0) return null;
    if (mode === 'lose-every-response') return 'lose-response';
    if (mode === 'chaos') {
      if (random() >= chaosRate) return null;
      return concreteFaults[Math.floor(random() * concreteFaults.length)] ?? null;
    }
    // Only the first attempt of a key: the retry shows how the library recovers.
    const fresh = keys.some((key) => !seen.has(key));
    return fresh ? mode : null;
  }

  return async (input, init) => {
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    for (const [name, value] of new Headers(init?.headers)) headers.set(name, value);
    const keys = requestKeys(headers);
    const fault = pickFault(keys);
    for (const key of keys) seen.add(key);
    const report = (outcome: NetworkAttempt['outcome'], response?: Response) =>
      options.onAttempt?.({ keys, fault, outcome, replayed: replayedKeys(keys, response) });

    if (fault === 'unavailable') headers.set('x-demo-fault', 'unavailable');
    if (fault === 'in-flight-duplicate') {
      headers.set('x-demo-processing-ms', String(processingMs));
      // The earlier copy: sent first, still running when ours arrives; its answer is lost on the slow link.
      realFetch(input, { ...init, headers, signal: null }).then(
        (response) => response.body?.cancel(),
        () => {},
      );
      // A head start, so the copy has claimed the key before ours arrives.
      await delay(250, init?.signal);
    }

    let response: Response;
    try {
      response = await realFetch(input, { ...init, headers });
    } catch (error) {
      report(init?.signal?.aborted ? 'timed-out' : 'network-error');
      throw error;
    }

    if (fault === 'lose-response') {
      // Let the whole answer arrive (the server has committed), then drop it.
      try {
        await response.arrayBuffer();
      } catch (error) {
        report(init?.signal?.aborted ? 'timed-out' : 'network-error', response);
        throw error;
      }
      report('lost', response);
      throw networkError('demo: response lost after the server committed');
    }
    if (fault === 'slow-response') {
      try {
        await delay(slowMs, init?.signal);
      } catch (error) {
        report('timed-out', response);
        // The abort may already have errored the body: cancelling it then rejects, which changes nothing.
        await response.body?.cancel().catch(() => {});
        throw error;
      }
    }
    report(response.status, response);
    return response;
  };
}
