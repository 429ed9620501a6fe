/**
 * The `smg [launch]` command line: SMG's flag names and defaults, parsed with commander into a
 * `GatewayConfig`. Flags are a table (`flags.ts`: name, kind, where the value goes), so `--help`, parsing
 * and the README come from one place. Unknown flags and malformed values throw `ConfigError`
 * (one line; main exits 2). Range checks live in `validate.ts`.
 */

import { Command, CommanderError, Option } from "commander";
import { badValue, ConfigError } from "../core/errors.ts";
import { defaultConfig, type GatewayConfig, type PrefillSpec } from "./config.ts";
import { FLAGS, type FlagSpec, type Kind } from "./flags.ts";

function parser(flag: string, kind: Kind): ((v: string, prev: unknown) => unknown) | undefined {
  if (kind === "int") {
    return (v) => {
      if (!/^-?\d+$/.test(v.trim())) throw badValue(`--${flag}`, v, "expected an integer");
      return Number(v);
    };
  }
  if (kind === "float") {
    return (v) => {
      const n = Number(v);
      if (v.trim() === "" || !Number.isFinite(n)) {
        throw badValue(`--${flag}`, v, "expected a number");
      }
      return n;
    };
  }
  if (kind === "intlist") {
    return (v) => {
      const parts = v.split(",").map((x) => x.trim()).filter((x) => x !== "");
      if (parts.some((x) => !/^\d+$/.test(x))) {
        throw badValue(`--${flag}`, v, "expected comma-separated integers, e.g. 256,1024");
      }
      return parts.map(Number);
    };
  }
  if (typeof kind === "object") {
    return (v) => {
      const norm = v.trim().toLowerCase();
      if (!kind.choices.includes(norm)) {
        throw badValue(`--${flag}`, v, `allowed: ${kind.choices.join(", ")}`);
      }
      return norm;
    };
  }
  return undefined;
}

function option(flag: string, spec: FlagSpec, hidden: boolean): Option {
  const k = spec.kind;
  const arg = k === "bool" ? "" : k === "list" ? " <values...>" : " <value>";
  const d = spec.shown?.(defaultConfig());
  const help = d === undefined ? spec.help : `${spec.help} (default: ${d})`;
  const o = new Option(`--${flag}${arg}`, help);
  const p = parser(flag, k);
  if (p) o.argParser(p);
  if (hidden) o.hideHelp();
  return o;
}

/** Builds the commander program for the gateway flags (help and parsing only). */
export function buildProgram(version: string): Command {
  const program = new Command("smg")
    .usage("[launch] [flags]")
    .description("smg: a model-routing gateway for LLM inference workers (sglang, vLLM)")
    .version(version, "-V, --version")
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({
      writeErr: () => {},
      outputError: () => {},
      // Commander reads NO_COLOR & co. to decide; the gateway has no env access for them.
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    });
  for (const spec of FLAGS) {
    program.addOption(option(spec.name, spec, false));
    for (const a of spec.aliases ?? []) program.addOption(option(a, spec, true));
  }
  return program;
}

/** Thrown for `--help` and `--version`: the text was printed and the process should exit 0. */
export class HelpShown extends Error {}

/**
 * Parses gateway flags (after an optional `launch`/`start`) into a config over SMG's defaults.
 * Throws `ConfigError` for an unknown flag or a malformed value, `HelpShown` after --help.
 */
export function parseGatewayArgs(args: string[], version = "0.0.0"): GatewayConfig {
  // `deno task start -- FLAGS` passes the "--" through; it means nothing here.
  const rest = args[0] === "--" ? args.slice(1) : args;
  const withLegs = rest[0] === "launch" || rest[0] === "start" ? rest.slice(1) : rest;
  const { argv, prefill, decode } = takePdWorkers(withLegs);
  const program = buildProgram(version);
  try {
    program.parse(argv, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) throw new HelpShown();
      throw new ConfigError(commanderProblem(e));
    }
    throw e;
  }
  const opts = program.opts() as Record<string, unknown>;
  const config = defaultConfig();
  for (const spec of FLAGS) {
    for (const name of [spec.name, ...(spec.aliases ?? [])]) {
      const key = name.replace(/-([a-z])/g, (_, ch: string) => ch.toUpperCase());
      if (opts[key] !== undefined) spec.apply(config, opts[key] as never);
    }
  }
  config.pd.prefill = prefill;
  config.pd.decode = decode;
  return config;
}

/**
 * Takes the repeatable `--prefill URL [BOOTSTRAP_PORT|none]` and `--decode URL` out of `args`
 * (commander cannot read an optional second value), as SMG parses them by hand too.
 */
export function takePdWorkers(
  args: string[],
): { argv: string[]; prefill: PrefillSpec[]; decode: string[] } {
  const argv: string[] = [];
  const prefill: PrefillSpec[] = [];
  const decode: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a !== "--prefill" && a !== "--decode") {
      argv.push(a);
      continue;
    }
    const url = args[i + 1];
    if (url === undefined || url.startsWith("--")) {
      throw new ConfigError(`${a}: a worker URL is required`);
    }
    i++;
    if (a === "--decode") {
      decode.push(url);
      continue;
    }
    const next = args[i + 1];
    let port: number | null = null;
    if (next !== undefined && (next === "none" || /^\d+$/.test(next))) {
      i++;
      if (next !== "none") {
        port = Number(next);
        if (port < 1 || port > 65535) {
          throw badValue("--prefill", next, "bootstrap port must be 1..65535 or none");
        }
      }
    }
    prefill.push({ url, bootstrapPort: port });
  }
  return { argv, prefill, decode };
}

/** Turns commander's message into one line that names the flag. */
function commanderProblem(e: CommanderError): string {
  const msg = e.message.replace(/^error: /, "");
  const unknown = /unknown option '([^']+)'/.exec(msg);
  if (unknown) return `${unknown[1]}: unknown flag (see smg --help)`;
  const missing = /option '([^' ]+)[^']*' argument missing/.exec(msg);
  if (missing) return `${missing[1]}: a value is required`;
  const excess = /too many arguments/.exec(msg);
  if (excess) return `unexpected argument (${msg}); flags start with --`;
  return msg;
}
