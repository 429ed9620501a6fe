/**
 * A gateway process that signals itself SIGTERM the moment it says "smg listening", as a
 * supervisor reading its log may: exits 0 when the signal drains it, and dies of the signal (143)
 * when the line came before the gateway listened for it. Run by `tests/server/listen_test.ts`.
 */

import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { createLogger } from "../../lib/core/log.ts";
import { Gateway } from "../../lib/server/app.ts";
import { listenGateway } from "../../lib/server/listen.ts";
import { gatewayListenArgs } from "../../support/gateway_process.ts";

const config = parseGatewayArgs([
  ...gatewayListenArgs(),
  "--shutdown-grace-period-secs",
  "0",
]);
const log = createLogger({
  level: "info",
  sink: (line) => {
    if (line.includes("smg listening")) Deno.kill(Deno.pid, "SIGTERM");
  },
});
const listening = await listenGateway(new Gateway({ config, log }), log);
await listening.finished;
Deno.exit(0);
