/**
 * The kinds of flag argument (see `Kind` in `flag.ts`): integers, numbers, strings, switches,
 * lists, comma-separated integers and choices. A malformed argument throws a one-line
 * `ConfigError` naming the flag and quoting the value.
 */

import { badValue } from "../core/errors.ts";
import type { Kind } from "./flag.ts";

/** An integer, e.g. `--port 8080` or `--max-concurrent-requests -1`. */
export const int: Kind<number> = {
  takes: "value",
  parse: (flag, v) => {
    if (!/^-?\d+$/.test(v.trim())) throw badValue(flag, v, "expected an integer");
    return Number(v);
  },
  show: String,
};

/** A finite number, e.g. `--retry-jitter-factor 0.2`. */
export const float: Kind<number> = {
  takes: "value",
  parse: (flag, v) => {
    const n = Number(v);
    if (v.trim() === "" || !Number.isFinite(n)) throw badValue(flag, v, "expected a number");
    return n;
  },
  show: String,
};

/** A string, taken as given. */
export const str: Kind<string> = { takes: "value", parse: (_, v) => v, show: String };

/** A switch. */
export const bool: Kind<boolean> = { takes: "nothing", parse: () => true, show: String };

/** Strings up to the next flag, e.g. `--worker-urls http://a:1 http://b:2`; repeats add up. */
export const list: Kind<string[]> = {
  takes: "values",
  parse: (_, v) => v,
  show: (v) => v.join(" "),
};

/** Comma-separated non-negative integers in one argument, e.g. `--cache-boundaries 256,1024`. */
export const intList: Kind<number[]> = {
  takes: "value",
  parse: (flag, v) => {
    const parts = v.split(",").map((x) => x.trim()).filter((x) => x !== "");
    if (parts.some((x) => !/^\d+$/.test(x))) {
      throw badValue(flag, v, "expected comma-separated integers, e.g. 256,1024");
    }
    return parts.map(Number);
  },
  show: (v) => v.join(","),
};

/** One of `values`, case-insensitive. */
export function choices<T extends string>(values: readonly T[]): Kind<T> {
  return {
    takes: "value",
    parse: (flag, v) => {
      const norm = v.trim().toLowerCase();
      const found = values.find((x) => x === norm);
      if (found === undefined) throw badValue(flag, v, `allowed: ${values.join(", ")}`);
      return found;
    },
    show: String,
    allowed: values,
  };
}

/** A PD prefill worker's bootstrap port, 1..65535, or `none` (null). */
export function bootstrapPort(flag: string, v: string): number | null {
  if (v === "none") return null;
  const port = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    throw badValue(flag, v, "bootstrap port must be 1..65535 or none");
  }
  return port;
}
