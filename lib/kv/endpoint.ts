/**
 * ZeroMQ endpoints as the engines' `--kv-events-config` names them, seen from the gateway:
 * `tcp://host:port` (IPv6 in brackets). A bind address (`tcp://*:5557`) and the `ipc://` and
 * `inproc://` transports cannot be reached from another host and are refused with a message
 * that says so.
 */

import { parseHostPort } from "../core/host_port.ts";
import { ZmtpError } from "./zmtp_codec.ts";

/** A TCP endpoint to connect to. */
export interface TcpEndpoint {
  /** Host name or IP address (IPv6 without brackets), as `Deno.connect` takes it. */
  hostname: string;
  /** TCP port. */
  port: number;
}

/** Parses `tcp://host:port`; throws a `ZmtpError` (`bad_endpoint`) quoting anything else. */
export function parseZmqEndpoint(endpoint: string): TcpEndpoint {
  const m = /^tcp:\/\/(.+)$/.exec(endpoint.trim());
  if (!m) {
    throw new ZmtpError(
      "bad_endpoint",
      `ZeroMQ endpoint "${endpoint}" is not tcp://host:port (only TCP reaches another host)`,
    );
  }
  if (m[1].startsWith("*:")) {
    throw new ZmtpError(
      "bad_endpoint",
      `ZeroMQ endpoint "${endpoint}" is the engine's bind address; give the engine's host instead of *`,
    );
  }
  const hp = parseHostPort(m[1]);
  if (!hp) {
    throw new ZmtpError("bad_endpoint", `ZeroMQ endpoint "${endpoint}" has no valid host:port`);
  }
  return { hostname: hp.host.replace(/^\[|\]$/g, ""), port: hp.port };
}
