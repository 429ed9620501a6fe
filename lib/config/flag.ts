/**
 * What a flag declaration is: SMG's name and aliases, how the argument is read (its kind), the
 * default, the --help line and the start-up check, keyed by the config field it sets. A record
 * of declarations has one entry per field of its part of `GatewayConfig`, and each entry's types
 * follow the field's: an int flag cannot declare a string field, a choices flag must offer
 * exactly its field's union. The `*_flags.ts` files declare; `flags.ts` gathers them in --help
 * order; `cli.ts` parses with them and `validate.ts` checks with them.
 */

import type { GatewayConfig } from "./types.ts";

/** How a flag's argument becomes a value of type `V`, and how that value is shown in --help. */
export type Kind<V> =
  & (
    /** A switch: present means `true`. */
    | { takes: "nothing"; parse: (flag: string, raw: true) => V }
    /** One value; `parse` throws `badValue` naming `flag`. */
    | { takes: "value"; parse: (flag: string, raw: string) => V }
    /** Every value up to the next flag, over all repeats. */
    | { takes: "values"; parse: (flag: string, raw: string[]) => V }
  )
  & {
    show: (v: V) => string;
    /** The values a choices flag accepts, for docs/configuration.md; absent for other kinds. */
    allowed?: readonly string[];
  };

/**
 * A start-up check of a value the config holds (never of null): throws a one-line `ConfigError`
 * naming `flag`, or returns the value as the config keeps it (e.g. trimmed).
 */
export type Check<V> = (flag: string, v: V) => V;

/** A flag that sets one config field of type `V`. */
export interface Flag<V> {
  /** Long name, without dashes. */
  name: string;
  /** Other spellings SMG accepts; not shown in --help. */
  aliases?: readonly string[];
  /** How the argument is read. */
  kind: Kind<NonNullable<V>>;
  /** The value without the flag; --help shows it unless null, false or empty. */
  default: V;
  /** The --help line. */
  help: string;
  /** What a set value must satisfy at start. */
  check?: Check<NonNullable<V>>;
  /** A switch (shown in --help just before this flag) that sets `value` unless this flag is given. */
  shorthand?: { name: string; value: NonNullable<V>; help: string };
}

/** A config field that no flag of its own sets (`cli.ts` or the rules fill it). */
export interface Unflagged<V> {
  /** The value at start. */
  default: V;
  /** Never set: tells a field without a flag from a `Flag`. */
  name?: undefined;
}

/** What is declared for one config field. */
export type Setting<V> = Flag<V> | Unflagged<V>;

/** One declaration per field of `T`. */
export type Flags<T> = { [K in keyof T]-?: Setting<T[K]> };

/** The `GatewayConfig` fields that group settings (`health`, `mesh`, ...). */
export type Section = {
  [K in keyof GatewayConfig]: GatewayConfig[K] extends readonly unknown[] ? never
    : GatewayConfig[K] extends object ? K
    : never;
}[keyof GatewayConfig];

/** Declarations for the whole `GatewayConfig`: a setting per top-level field, a record per section. */
export type Declarations = {
  [K in keyof GatewayConfig]-?: K extends Section ? Flags<GatewayConfig[K]>
    : Setting<GatewayConfig[K]>;
};
