/**
 * Structured logging: JSON lines (`--log-json`) or logfmt for humans, through one injected
 * `Logger`. Levels are filtered globally (`--log-level`) and per module with a RUST_LOG-style
 * directive list, e.g. `info,proxy=debug,health=warn`.
 */

/** Log severities, most verbose first. */
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

/** The log levels, for validation and help text. */
export const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error"];

/** Extra key/value pairs on a log line. */
export type LogFields = Record<string, unknown>;

/** The logger every module receives. */
export interface Logger {
  /** Whether a line at `level` would be written (guards costly field building). */
  enabled(level: LogLevel): boolean;
  /** Writes at trace level. */
  trace(msg: string, fields?: LogFields): void;
  /** Writes at debug level. */
  debug(msg: string, fields?: LogFields): void;
  /** Writes at info level. */
  info(msg: string, fields?: LogFields): void;
  /** Writes at warn level. */
  warn(msg: string, fields?: LogFields): void;
  /** Writes at error level. */
  error(msg: string, fields?: LogFields): void;
  /** A logger whose lines all carry `fields`; a `module` field selects the filter directive. */
  child(fields: LogFields): Logger;
}

/** How a root logger writes and filters. */
export interface LoggerOptions {
  /** Default level, e.g. from `--log-level` (default `info`). */
  level?: LogLevel;
  /** RUST_LOG-style directives, `level` or `module=level` separated by commas (default none). */
  filter?: string;
  /** JSON lines instead of logfmt (default false). */
  json?: boolean;
  /** Where a finished line goes (default: stderr). */
  sink?: (line: string) => void;
}

interface Directives {
  base: number;
  modules: Map<string, number>;
}

/**
 * Parses `info,proxy=debug`; unknown levels are ignored. SMG's targets work as its docs write
 * them: `smg=LEVEL` sets every module (this program has no other crates' logs), and
 * `smg::NAME` or `smg_NAME` means module NAME (`smg_mesh`, `smg::mesh` and
 * `smg::mesh_discovery` all reach the mesh's logs). A module directive beats `smg=`; of two
 * directives for one module, the last wins.
 */
export function parseFilter(filter: string | undefined, base: LogLevel): Directives {
  const d: Directives = { base: RANK[base], modules: new Map() };
  let all: number | null = null;
  for (const part of (filter ?? "").split(",")) {
    const p = part.trim().toLowerCase();
    if (!p) continue;
    const eq = p.indexOf("=");
    if (eq < 0) {
      if (p in RANK) d.base = RANK[p as LogLevel];
      continue;
    }
    const lvl = p.slice(eq + 1);
    if (!(lvl in RANK)) continue;
    const target = p.slice(0, eq);
    if (target === "smg") all = RANK[lvl as LogLevel];
    else d.modules.set(moduleOf(target), RANK[lvl as LogLevel]);
  }
  if (all !== null) d.base = all;
  return d;
}

/** Our module for an SMG target: `smg::mesh_discovery` and `smg_mesh` → `mesh`. */
function moduleOf(target: string): string {
  const m = target.match(/^smg(?:::|_)([a-z]+)/);
  return m ? m[1] : target;
}

const encoder = new TextEncoder();
const stderrSink = (line: string) => {
  Deno.stderr.writeSync(encoder.encode(line + "\n"));
};

function logfmtValue(v: unknown): string {
  const s = typeof v === "string" ? v : v instanceof Error ? v.message : JSON.stringify(v);
  if (s === undefined) return "null";
  return /^[^\s"=]+$/.test(s) ? s : JSON.stringify(s);
}

class FieldLogger implements Logger {
  readonly #d: Directives;
  readonly #json: boolean;
  readonly #sink: (line: string) => void;
  readonly #fields: LogFields;
  readonly #min: number;

  constructor(d: Directives, json: boolean, sink: (line: string) => void, fields: LogFields) {
    this.#d = d;
    this.#json = json;
    this.#sink = sink;
    this.#fields = fields;
    const mod = typeof fields.module === "string" ? d.modules.get(fields.module) : undefined;
    this.#min = mod ?? d.base;
  }

  enabled(level: LogLevel): boolean {
    return RANK[level] >= this.#min;
  }

  #write(level: LogLevel, msg: string, fields?: LogFields): void {
    if (RANK[level] < this.#min) return;
    const all = fields ? { ...this.#fields, ...fields } : this.#fields;
    const ts = new Date().toISOString();
    if (this.#json) {
      this.#sink(JSON.stringify({ ts, level, msg, ...all }, errorReplacer));
      return;
    }
    let line = `ts=${ts} level=${level} msg=${logfmtValue(msg)}`;
    for (const [k, v] of Object.entries(all)) {
      if (v !== undefined) line += ` ${k}=${logfmtValue(v)}`;
    }
    this.#sink(line);
  }

  trace(msg: string, fields?: LogFields) {
    this.#write("trace", msg, fields);
  }
  debug(msg: string, fields?: LogFields) {
    this.#write("debug", msg, fields);
  }
  info(msg: string, fields?: LogFields) {
    this.#write("info", msg, fields);
  }
  warn(msg: string, fields?: LogFields) {
    this.#write("warn", msg, fields);
  }
  error(msg: string, fields?: LogFields) {
    this.#write("error", msg, fields);
  }
  child(fields: LogFields): Logger {
    return new FieldLogger(this.#d, this.#json, this.#sink, { ...this.#fields, ...fields });
  }
}

function errorReplacer(_k: string, v: unknown): unknown {
  return v instanceof Error ? v.message : v;
}

/** The root logger. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const d = parseFilter(opts.filter, opts.level ?? "info");
  return new FieldLogger(d, opts.json ?? false, opts.sink ?? stderrSink, {});
}

/** A logger that drops everything; for tests that do not look at logs. */
export const silentLogger: Logger = createLogger({ level: "error", sink: () => {} });
