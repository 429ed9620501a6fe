/**
 * Comparing secrets (API keys, bearer tokens) without leaking them through timing, and reading
 * the token of an `Authorization: Bearer` header. `===` on a secret stops at the first differing
 * character, so its duration tells a caller how much of a guess was right; `secretEquals` looks
 * at every character of the guess whatever it finds. Known gap: JavaScript offers no guarantee
 * against the JIT short-cutting the loop; it does not today, and SMG's Rust relies on the same
 * kind of loop (`subtle`).
 */

/**
 * Whether `given` equals `secret`, in a time that depends on the length of `given` only (the
 * caller's own input), never on where the two differ nor on the secret's length.
 */
export function secretEquals(secret: string, given: string): boolean {
  const n = secret.length;
  if (n === 0) return given.length === 0;
  // A length mismatch is folded into the result instead of returning early.
  let diff = n ^ given.length;
  for (let i = 0; i < given.length; i++) {
    diff |= secret.charCodeAt(i % n) ^ given.charCodeAt(i);
  }
  return diff === 0;
}

/**
 * The token of a `Bearer` credential in an `Authorization` value, or null for another scheme or
 * an empty token. The scheme is case-insensitive (RFC 9110 §11.1) and may be followed by several
 * spaces, as SMG's control-plane check reads it.
 */
export function bearerToken(authorization: string | null): string | null {
  if (authorization === null) return null;
  const sp = authorization.indexOf(" ");
  if (sp !== 6 || authorization.slice(0, 6).toLowerCase() !== "bearer") return null;
  let i = sp;
  while (authorization.charCodeAt(i) === 32) i++;
  const token = authorization.slice(i);
  return token === "" ? null : token;
}
