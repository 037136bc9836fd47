import { type RawResponse, rawRequest } from './raw-http.ts';

/** What a test needs from one tRPC answer over raw HTTP. */
export interface CallResult extends RawResponse {
  /** `result.data` of a success, else undefined. */
  data: unknown;
  /** `error.data.idempotency.reason`, else undefined. */
  reason: string | undefined;
  /** `error.data.code` (the tRPC code name), else undefined. */
  code: string | undefined;
}

/**
 * Calls one mutation over raw HTTP (no client, no retry), with the `Idempotency-Key` header written
 * byte for byte as given.
 */
export async function callRaw(opts: {
  port: number;
  path: string;
  input: unknown;
  key?: string | Buffer;
  user?: string;
  headers?: [string, string | Buffer][];
}): Promise<CallResult> {
  const headers: [string, string | Buffer][] = [...(opts.headers ?? [])];
  if (opts.key !== undefined) headers.push(['Idempotency-Key', opts.key]);
  if (opts.user !== undefined) headers.push(['x-user', opts.user]);
  const res = await rawRequest({ port: opts.port, path: `/${opts.path}`, headers, body: JSON.stringify(opts.input) });
  return { ...res, ...readEnvelope(res.json) };
}

/** Calls a batch of mutations on one path, with an `Idempotency-Keys` header written as given. */
export async function callBatchRaw(opts: {
  port: number;
  path: string;
  inputs: unknown[];
  keys?: string;
  user?: string;
}): Promise<RawResponse & { calls: ReturnType<typeof readEnvelope>[] }> {
  const headers: [string, string][] = [];
  if (opts.keys !== undefined) headers.push(['Idempotency-Keys', opts.keys]);
  if (opts.user !== undefined) headers.push(['x-user', opts.user]);
  const body = Object.fromEntries(opts.inputs.map((input, i) => [String(i), input]));
  const res = await rawRequest({
    port: opts.port,
    path: `/${opts.inputs.map(() => opts.path).join(',')}?batch=1`,
    headers,
    body: JSON.stringify(body),
  });
  const calls = Array.isArray(res.json) ? res.json.map(readEnvelope) : [];
  return { ...res, calls };
}

function readEnvelope(json: unknown): { data: unknown; reason: string | undefined; code: string | undefined } {
  const envelope = json as {
    result?: { data?: unknown };
    error?: { data?: { code?: string; idempotency?: { reason?: string } } };
  } | null;
  return {
    data: envelope?.result?.data,
    reason: envelope?.error?.data?.idempotency?.reason,
    code: envelope?.error?.data?.code,
  };
}
