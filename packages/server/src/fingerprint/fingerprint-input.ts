import { TRPCError } from '@trpc/server';
import { CanonicalEncodeError, type EncodeLimits } from './canonical-encode.js';
import { fingerprint } from './fingerprint.js';

const LIMIT_OPTION = { too_deep: 'maxInputDepth', too_large: 'maxInputBytes' } as const;

/**
 * The call's fingerprint over `{ path, input }` (`input`: the raw input, or the part `fromInput`'s `fingerprint`
 * chose), or the 4xx that says why it cannot have one: 413 past `maxInputBytes`, 400 past `maxInputDepth` or for
 * what cannot be fingerprinted (a binary stream). Never a 500: the same input always gets the same answer, so a
 * client must not retry it.
 */
export async function fingerprintInput(path: string, input: unknown, limits: EncodeLimits): Promise<string> {
  try {
    // Plain data hashes synchronously: awaiting the string itself would only add a turn of the microtask queue.
    const hex = fingerprint(path, input, limits);
    return typeof hex === 'string' ? hex : await hex;
  } catch (error) {
    if (!(error instanceof CanonicalEncodeError)) throw error;
    const option = error.kind === 'unsupported' ? '' : ` (the \`${LIMIT_OPTION[error.kind]}\` option)`;
    throw new TRPCError({
      code: error.kind === 'too_large' ? 'PAYLOAD_TOO_LARGE' : 'BAD_REQUEST',
      message: `idempotency: the input of ${path} cannot be fingerprinted: ${error.message}${option}`,
      cause: error,
    });
  }
}
