/**
 * The own front on a free loopback port for tests: `fn` gets the front and a factory of raw
 * clients; the clients, then the front, are closed after it, whatever it did.
 */

import { systemClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import {
  type Front,
  type FrontHandler,
  type FrontOptions,
  serveFront,
} from "../../lib/front/server.ts";
import { RawClient } from "./raw_client.ts";

/** Serves `handler` with `options` over the defaults (127.0.0.1, any port, 1 MiB bodies, system clock). */
export async function withFrontServer(
  handler: FrontHandler,
  options: Partial<FrontOptions>,
  fn: (f: Front, client: () => Promise<RawClient>) => Promise<void>,
): Promise<void> {
  const front = serveFront({
    hostname: "127.0.0.1",
    port: 0,
    maxBody: 1 << 20,
    log: silentLogger,
    clock: systemClock,
    ...options,
  }, handler);
  const clients: RawClient[] = [];
  try {
    await fn(front, async () => {
      const c = await RawClient.connect(front.addr.port);
      clients.push(c);
      return c;
    });
  } finally {
    for (const c of clients) c.close();
    front.close();
    await front.shutdown();
  }
}
