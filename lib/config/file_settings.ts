/**
 * A config file's settings applied to a `GatewayConfig`: each top-level key is a gateway flag's
 * name without its dashes (an alias or a shorthand too), its value what the flag takes: a
 * scalar for one value, a list (or one scalar) for a flag that takes several or may repeat,
 * `true`/`false` for a switch, a mapping for a selector (`selector: {app: sglang}`), and null
 * for the default. `prefill` takes entries `URL`, `URL PORT` or `[URL, PORT]`, `decode` URLs.
 * Every value goes through the flag's own parser; a refusal names the file, the line and the
 * key. What was set is recorded by flag, so later checks can point at the same line.
 */

import { ConfigError } from "../core/errors.ts";
import type { Flag } from "./flag.ts";
import { ENTRIES, type Entry, holder, isFlag } from "./flags.ts";
import { bootstrapPort, intList } from "./kinds.ts";
import { closest } from "./suggest.ts";
import type { GatewayConfig, PrefillSpec } from "./types.ts";

/** A value as a config file holds it; a plain number keeps its text (see `config_file.ts`). */
export type FileValue = string | boolean | null | FileValue[] | { [key: string]: FileValue };

/** One top-level key of a config file. */
export interface FileEntry {
  /** The key as written. */
  key: string;
  /** Its line, from 1. */
  line: number;
  /** Its value. */
  value: FileValue;
}

/** A parsed config file. */
export interface FileSettings {
  /** The file as named on the command line. */
  path: string;
  /** Its top-level keys, in order. */
  entries: FileEntry[];
}

/** Where settings came from: a flag (`--port`) to the file's `path:line: key` that set it. */
export type ConfigSources = Map<string, string>;

/** What a key names: a flag's field, its shorthand, or a PD leg. */
type Target =
  | { kind: "flag"; entry: Entry; flag: Flag<unknown> }
  | { kind: "shorthand"; entry: Entry; flag: Flag<unknown> }
  | { kind: "prefill" | "decode" };

const TARGETS = new Map<string, Target>();
for (const entry of ENTRIES) {
  const flag = entry.setting;
  if (!isFlag(flag)) continue;
  for (const n of [flag.name, ...(flag.aliases ?? [])]) {
    TARGETS.set(n, { kind: "flag", entry, flag });
  }
  if (flag.shorthand) TARGETS.set(flag.shorthand.name, { kind: "shorthand", entry, flag });
}
TARGETS.set("prefill", { kind: "prefill" });
TARGETS.set("decode", { kind: "decode" });

/** Every key a config file may use. */
export const FILE_KEYS: readonly string[] = [...TARGETS.keys()];

const isList = (v: FileValue): v is FileValue[] => Array.isArray(v);
const isMapping = (v: FileValue): v is { [key: string]: FileValue } =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** A scalar as a flag argument; throws for a list or a mapping. */
function scalar(where: string, v: FileValue, what = "one value"): string {
  if (isList(v) || isMapping(v)) {
    throw new ConfigError(`${where}: expected ${what}, not a ${isList(v) ? "list" : "mapping"}`);
  }
  return String(v);
}

/** The arguments a flag taking several values would get. */
function values(where: string, v: FileValue): string[] {
  if (isMapping(v)) return Object.entries(v).map(([k, x]) => `${k}=${scalar(where, x)}`);
  return (isList(v) ? v : [v]).map((x) => scalar(where, x, "a list of plain values"));
}

/** `flag`'s value from a file value, through the flag's own parser. */
function parseValue(where: string, flag: Flag<unknown>, v: FileValue): unknown {
  const kind = flag.kind;
  switch (kind.takes) {
    case "nothing":
      if (typeof v !== "boolean") {
        throw new ConfigError(`${where}: expected true or false, not '${scalar(where, v)}'`);
      }
      return v ? kind.parse(where, true) : false;
    case "value": {
      // `cache-boundaries: [256, 1024]` reads as `--cache-boundaries 256,1024`.
      const raw = (kind as unknown) === intList && isList(v)
        ? v.map((x) => scalar(where, x)).join(",")
        : scalar(where, v);
      return kind.parse(where, raw);
    }
    case "values":
      return kind.parse(where, values(where, v));
  }
}

/** `prefill`'s entries: `URL`, `URL PORT` or `[URL, PORT|none]`. */
function prefillOf(where: string, v: FileValue): PrefillSpec[] {
  return (isList(v) ? v : [v]).map((item) => {
    const parts = isList(item)
      ? item.map((x) => scalar(where, x))
      : scalar(where, item).trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || parts[0] === "") {
      throw new ConfigError(`${where}: expected URL, 'URL PORT' or [URL, PORT] per entry`);
    }
    return {
      url: parts[0],
      bootstrapPort: parts[1] === undefined ? null : bootstrapPort(where, parts[1]),
    };
  });
}

/** The refusal of a key no flag has, with the closest one. */
function unknownKey(path: string, e: FileEntry): ConfigError {
  const near = closest(e.key, FILE_KEYS);
  const hint = near
    ? `; did you mean '${near}'?`
    : " (keys are flag names without --; see smg --help)";
  return new ConfigError(`${path}:${e.line}: unknown key '${e.key}'${hint}`);
}

/**
 * Writes `file`'s settings into `config` and returns where each came from. Throws a one-line
 * `ConfigError` naming the file, line and key for an unknown key, a value of the wrong kind, or
 * two keys (a flag and its alias) setting one field.
 */
export function applyFileSettings(config: GatewayConfig, file: FileSettings): ConfigSources {
  const sources: ConfigSources = new Map();
  const setBy = new Map<string, FileEntry>();
  const shorthands: { entry: Entry; flag: Flag<unknown>; where: string }[] = [];
  for (const e of file.entries) {
    const where = `${file.path}:${e.line}: ${e.key}`;
    if (e.key === "config") {
      throw new ConfigError(`${where}: a config file cannot name another config file`);
    }
    const target = TARGETS.get(e.key);
    if (!target) throw unknownKey(file.path, e);
    if (e.value === null) continue; // the default
    const field = "entry" in target
      ? `${target.entry.section}.${target.entry.field}`
      : `pd.${target.kind}`;
    const earlier = setBy.get(field);
    if (earlier && target.kind !== "shorthand") {
      throw new ConfigError(
        `${where}: sets what '${earlier.key}' (line ${earlier.line}) already sets; keep one`,
      );
    }
    switch (target.kind) {
      case "prefill":
        config.pd.prefill = prefillOf(where, e.value);
        sources.set("--prefill", where);
        break;
      case "decode":
        config.pd.decode = values(where, e.value);
        sources.set("--decode", where);
        break;
      case "shorthand":
        if (typeof e.value !== "boolean") {
          throw new ConfigError(
            `${where}: expected true or false, not '${scalar(where, e.value)}'`,
          );
        }
        if (e.value) shorthands.push({ entry: target.entry, flag: target.flag, where });
        continue;
      case "flag":
        holder(config, target.entry.section)[target.entry.field] = parseValue(
          where,
          target.flag,
          e.value,
        );
        sources.set(`--${target.flag.name}`, where);
    }
    setBy.set(field, e);
  }
  // A shorthand gives its value unless its flag is set too, as on the command line.
  for (const s of shorthands) {
    if (setBy.has(`${s.entry.section}.${s.entry.field}`)) continue;
    holder(config, s.entry.section)[s.entry.field] = s.flag.shorthand!.value;
    sources.set(`--${s.flag.name}`, s.where);
  }
  return sources;
}
