/**
 * Every fuzz family by name, in the order runs report them (`bench/fuzz.ts --families`).
 */

import type { FuzzFamily } from "./driver.ts";
import { httpFraming } from "./http_framing.ts";
import { jsonBodies } from "./json_bodies.ts";
import { meshPeer } from "./mesh_peer.ts";
import { workersApi } from "./workers_api.ts";

/** The families, by name. */
export const FAMILIES: readonly FuzzFamily[] = [httpFraming, jsonBodies, workersApi, meshPeer];
