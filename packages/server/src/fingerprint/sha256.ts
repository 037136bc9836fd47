/** Hex SHA-256 through Web Crypto, which Node 20, browsers and edge runtimes (Vercel Edge, Workers, Deno) all have. */
export async function sha256Hex(data: BufferSource): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', data);
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}
