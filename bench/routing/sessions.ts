/**
 * The synthetic workload's arrivals (`workload.ts`) as an `Offer` for the drive loop
 * (`client.ts`), in one of two modes:
 *
 * - open loop (`rate`): sessions arrive as a Poisson process at `rate / meanTurns` per second,
 *   so that requests arrive at about `rate` per second; each session sends its turns in order,
 *   each after the previous reply plus the turn's think time. Arrivals never wait for replies.
 * - closed loop (`concurrency`): that many users, each running sessions from the plan back to
 *   back with no think time, so exactly `concurrency` requests are in flight.
 *
 * Each turn resends the whole history with the assistant's real reply text. A request counts as
 * measured when it is sent once the window is open. A failed turn ends its conversation, since
 * there is no reply to resend.
 */

import { type Driver, type Offer, sleepUntil } from "./client.ts";
import type { Session, Workload } from "./workload.ts";

/** Open loop at this many requests/s, or closed loop with this many users. */
export type SessionLoad = { rate: number } | { concurrency: number };

/** Headers added to each request of a session, on top of the plan's (`ref:oracle`'s route). */
export type SessionRoute = (
  s: Session,
  planned: Record<string, string>,
) => Record<string, string>;

/** The offer of `w`'s sessions at `load`, each request's headers extended by `route`. */
export function sessionOffer(w: Workload, load: SessionLoad, route?: SessionRoute): Offer {
  return async (d) => {
    let nextSession = 0;
    if ("rate" in load) {
      const gaps = w.poissonGaps(load.rate / w.meanTurns());
      let at = d.t0;
      for (;;) {
        at += gaps.next().value as number;
        if (at >= d.stopAt) break;
        await sleepUntil(at, d.stopAt, d.stop);
        if (!d.open()) break;
        d.track(runSession(d, w, w.session(nextSession++), true, route));
      }
    } else {
      for (let u = 0; u < load.concurrency; u++) {
        d.track((async () => {
          while (d.open()) await runSession(d, w, w.session(nextSession++), false, route);
        })());
      }
    }
  };
}

/** Runs `s` to its end through `d`; `think` says whether to honour think times. */
async function runSession(
  d: Driver,
  w: Workload,
  s: Session,
  think: boolean,
  route?: SessionRoute,
): Promise<void> {
  const replies: string[] = [];
  const planned = w.headers(s);
  const headers = route ? { ...planned, ...route(s, planned) } : planned;
  for (let t = 0; t < s.turns.length; t++) {
    const turn = s.turns[t];
    if (think && turn.thinkMs > 0) {
      await sleepUntil(performance.now() + turn.thinkMs, d.stopAt, d.stop);
    }
    if (!d.open()) return;
    const r = await d.send({
      messages: w.messages(s, t, replies),
      maxTokens: turn.maxTokens,
      headers,
      session: s.id,
      turn: t,
      tenant: s.tenant,
      conversation: s.id,
    });
    if (!r.ok) return;
    replies.push(r.text);
  }
}
