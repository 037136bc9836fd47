// Node's native count where there is one; a Web-standard runtime (edge, workers) has no Buffer.
const nodeByteLength = (globalThis as { Buffer?: { byteLength(text: string, encoding: 'utf8'): number } }).Buffer
  ?.byteLength;

/** Size in UTF-8 bytes, skipping the count when the text cannot possibly exceed the limit. */
export function utf8Bytes(text: string, limit: number): number {
  if (text.length * 3 <= limit) return text.length;
  return nodeByteLength ? nodeByteLength(text, 'utf8') : countUtf8Bytes(text);
}

/** What `Buffer.byteLength(text, 'utf8')` answers, in plain JavaScript. */
export function countUtf8Bytes(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) bytes += 1;
    else if (unit >= 0xd800 && unit < 0xdc00 && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      // A surrogate pair: two code units, four bytes.
      bytes += 2;
      i++;
    } else bytes += 2; // three bytes (a lone surrogate is written as U+FFFD)
  }
  return bytes;
}
