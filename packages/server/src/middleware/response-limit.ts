import { utf8Bytes } from '../serialize/utf8-bytes.js';
import type { Runtime } from './call.js';

/** The largest result that is stored: `maxResponseBytes`, or less where the store cannot take more in one statement. */
function responseLimit(rt: Runtime): number {
  const { maxResultBytes } = rt.store;
  const { maxResponseBytes } = rt.options;
  return maxResultBytes !== undefined && maxResultBytes < maxResponseBytes ? maxResultBytes : maxResponseBytes;
}

/**
 * The size in UTF-8 bytes of a result to store that is over `responseLimit`, else undefined. A stored error is a
 * result like a success: one too large to store is refused the same way, never stored cut short (its replay would
 * differ from what the first caller saw) nor left to fail the statement with a retryable 500.
 */
export function oversizedBytes(rt: Runtime, response: string): number | undefined {
  const limit = responseLimit(rt);
  const bytes = utf8Bytes(response, limit);
  return bytes > limit ? bytes : undefined;
}
