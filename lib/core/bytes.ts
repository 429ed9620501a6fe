/** Byte helpers shared by the front, the worker client and the proxy. */

/** `parts` joined (`size` bytes in all); a single part is returned as it is. */
export function concat(parts: Uint8Array[], size: number): Uint8Array<ArrayBuffer> {
  if (parts.length === 1) return parts[0] as Uint8Array<ArrayBuffer>;
  const out = new Uint8Array(size);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}
