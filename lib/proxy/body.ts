/**
 * Reads a request body once, as bytes, enforcing `--max-payload-size`: a declared length over
 * the cap is refused before reading, and a chunked body is cut off as soon as it passes it.
 */

import { GatewayError, invalidRequest, payloadTooLarge as tooLarge } from "../core/errors.ts";
import { concat } from "../core/bytes.ts";

/** The body bytes; 413 over `max`, 400 when the client's body breaks off. */
export async function readBody(req: Request, max: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > max) throw tooLarge(max);
  try {
    if (declared !== null || !req.body) return await req.bytes();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of req.body) {
      size += chunk.byteLength;
      if (size > max) throw tooLarge(max);
      chunks.push(chunk);
    }
    return concat(chunks, size);
  } catch (e) {
    if (e instanceof GatewayError) throw e;
    throw invalidRequest(`could not read the request body: ${(e as Error).message}`);
  }
}

const decoder = new TextDecoder();

/** Parses body bytes as JSON; 400 `json_parse_error` when they are not JSON. */
export function parseJson(bytes: Uint8Array<ArrayBuffer>): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch (e) {
    throw new GatewayError(
      400,
      "json_parse_error",
      `request body is not valid JSON: ${(e as Error).message}`,
      {
        type: "invalid_request_error",
      },
    );
  }
}
