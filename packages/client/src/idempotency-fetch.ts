/** The `fetch` shape tRPC's HTTP links call. */
export type FetchLike = (input: RequestInfo | URL | string, init?: RequestInit) => Promise<Response>;

/** tRPC's JSON-RPC codes for the statuses a proxy or load balancer answers with. */
const CODES: Record<number, [name: string, code: number]> = {
  400: ['BAD_REQUEST', -32600],
  401: ['UNAUTHORIZED', -32001],
  403: ['FORBIDDEN', -32003],
  404: ['NOT_FOUND', -32004],
  405: ['METHOD_NOT_SUPPORTED', -32005],
  408: ['TIMEOUT', -32008],
  409: ['CONFLICT', -32009],
  413: ['PAYLOAD_TOO_LARGE', -32013],
  422: ['UNPROCESSABLE_CONTENT', -32022],
  429: ['TOO_MANY_REQUESTS', -32029],
  500: ['INTERNAL_SERVER_ERROR', -32603],
  501: ['NOT_IMPLEMENTED', -32603],
  502: ['BAD_GATEWAY', -32603],
  503: ['SERVICE_UNAVAILABLE', -32603],
  504: ['GATEWAY_TIMEOUT', -32603],
};

/**
 * Wraps `fetch` for tRPC's HTTP links so a response that is not tRPC's — a proxy's HTML 503, a load
 * balancer's plain-text 502 — keeps its status and headers (`Retry-After`) for `idempotencyLink`.
 *
 * The links parse every body as JSON; a non-JSON body throws before the status is recorded, and the call
 * fails as if no response had come. So an error response whose body is not a tRPC error is replaced by a
 * tRPC-shaped JSON error with the same status, status text and headers:
 * `{ error: { message, code, data: { code, httpStatus, nonTrpcResponse: true } } }`.
 * tRPC's own responses, and successful ones, pass through untouched (and unread).
 */
export function idempotencyFetch(fetchImpl?: FetchLike): FetchLike {
  return async (input, init) => {
    const doFetch = fetchImpl ?? (globalThis.fetch as FetchLike);
    const response = await doFetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (response.ok) return response;

    const text = await response.text();
    if (isTRPCBody(text)) return rebuild(response, text);

    const [name, code] = CODES[response.status] ?? (response.status >= 500 ? CODES[500]! : CODES[400]!);
    const body = {
      error: {
        code,
        message:
          `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''} from ${url}: ` +
          'not a tRPC response (a proxy or gateway answered)',
        data: { code: name, httpStatus: response.status, nonTrpcResponse: true },
      },
    };
    return rebuild(response, JSON.stringify(body));
  };
}

/** A tRPC error body: `{ error: … }`, or a batch's array of results. */
function isTRPCBody(text: string): boolean {
  try {
    const json: unknown = JSON.parse(text);
    return Array.isArray(json) || (typeof json === 'object' && json !== null && 'error' in json);
  } catch {
    return false;
  }
}

function rebuild(response: Response, body: string): Response {
  const headers = new Headers(response.headers);
  headers.set('content-type', 'application/json');
  // The body is now decoded text: its old length and encoding no longer describe it.
  headers.delete('content-length');
  headers.delete('content-encoding');
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}
