/**
 * What the client sends to one target at one load point: the drive loop's offer and phases
 * (`client.ts`), for the synthetic workload (`sessions.ts`) or a trace replay (`replay.ts`), with
 * a reference's route where the target is one: `ref:oracle`'s `X-SMG-Target-Worker` by tenant,
 * `ref:affinity`'s `X-SMG-Routing-Key` by conversation (`references.ts`).
 */

import type { Offer } from "./client.ts";
import type { LoadPoint, Options } from "./options.ts";
import { affinityRoute, oracleAssignment, oracleRoute } from "./references.ts";
import { replayOffer, type ReplayPlan } from "./replay.ts";
import { sessionOffer } from "./sessions.ts";
import type { TargetSpec } from "./targets.ts";
import type { TraceRequest } from "./trace.ts";
import type { BlockTexts } from "./trace_prompts.ts";
import type { Workload } from "./workload.ts";

/** One measurement's traffic: what to send, and the phases' lengths. */
export interface Traffic {
  /** The arrivals. */
  offer: Offer;
  /** ms of warm-up before the window opens. */
  warmupMs: number;
  /** ms of the measured window. */
  durationMs: number;
  /** The drive loop's cap on measured requests (null: none). */
  maxRequests: number | null;
}

/** The traffic for `target` at `point`, given the fleet's addresses (`workers`, start order). */
export type TrafficFor = (point: LoadPoint, target: TargetSpec, workers: string[]) => Traffic;

/** The synthetic workload `w` under the phases of `o`. */
export function syntheticTraffic(w: Workload, o: Options): TrafficFor {
  return (point, target, workers) => {
    const load = point.load;
    if ("speed" in load) throw new Error(`${point.label}: a speed needs a trace`);
    const oracle = target.kind === "ref" && target.ref === "oracle";
    const route = oracle ? oracleRoute(oracleAssignment(w, o.workers), workers) : undefined;
    return {
      offer: sessionOffer(w, load, route),
      warmupMs: o.warmup * 1000,
      durationMs: o.duration * 1000,
      maxRequests: o.requests,
    };
  };
}

/** A trace ready to replay: its requests, conversation keys, block texts and plan per point. */
export interface TraceReplay {
  /** The requests, in order. */
  requests: readonly TraceRequest[];
  /** Each request's conversation key (`trace_keys.ts`). */
  keys: readonly string[];
  /** The prompts' block texts. */
  blocks: BlockTexts;
  /** The plan of each load point, by label. */
  plans: ReadonlyMap<string, ReplayPlan>;
}

/** The replay of `t`; the plan (computed beforehand) holds the phases and the request cap. */
export function traceTraffic(t: TraceReplay): TrafficFor {
  return (point, target) => {
    const plan = t.plans.get(point.label);
    if (!plan) throw new Error(`${point.label}: no replay plan`);
    const affinity = target.kind === "ref" && target.ref === "affinity";
    return {
      offer: replayOffer(
        t.requests,
        plan,
        t.blocks,
        affinity ? affinityRoute(t.keys) : undefined,
        t.keys,
      ),
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
      maxRequests: null,
    };
  };
}
