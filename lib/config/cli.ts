/**
 * The `smg [launch]` command line: SMG's flag names and defaults, parsed with commander into a
 * `GatewayConfig`. Commander's options and `--help` are built from the flag declarations
 * (`flags.ts`), and each given value is written where its declaration says. Unknown flags and
 * malformed values throw `ConfigError` (one line; main exits 2); `validate.ts` checks ranges.
 */

import { Command, CommanderError, Option } from "commander";
import { badValue, ConfigError } from "../core/errors.ts";
import type { Flag } from "./flag.ts";
import { defaultConfig, ENTRIES, holder, isFlag } from "./flags.ts";
import type { GatewayConfig, PrefillSpec } from "./types.ts";

const ARGUMENT = { nothing: "", value: " <value>", values: " <values...>" } as const;

/** The --help text of a flag: its help, and its default unless null, false or empty. */
function helpOf(f: Flag<unknown>): string {
  const d = f.default;
  const none = d === null || d === false || (typeof d === "object" && Object.keys(d).length === 0);
  return none ? f.help : `${f.help} (default: ${f.kind.show(d as NonNullable<unknown>)})`;
}

function option(name: string, f: Flag<unknown>, hidden: boolean): Option {
  const o = new Option(`--${name}${ARGUMENT[f.kind.takes]}`, helpOf(f));
  // One value is read as commander meets it, so the first bad value is the one reported.
  if (f.kind.takes === "value") o.argParser((v: string) => f.kind.parse(`--${name}`, v as never));
  if (hidden) o.hideHelp();
  return o;
}

/** Commander's key for a flag name. */
const key = (name: string) => name.replace(/-([a-z])/g, (_, ch: string) => ch.toUpperCase());

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
  for (const { setting: f } of ENTRIES) {
    if (!isFlag(f)) continue;
    if (f.shorthand) program.addOption(new Option(`--${f.shorthand.name}`, f.shorthand.help));
    program.addOption(option(f.name, f, false));
    for (const a of f.aliases ?? []) program.addOption(option(a, f, true));
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
  for (const { section, field, setting: f } of ENTRIES) {
    if (!isFlag(f)) continue;
    const into = holder(config, section);
    let given = false;
    for (const name of [f.name, ...(f.aliases ?? [])]) {
      const raw = opts[key(name)];
      if (raw === undefined) continue;
      into[field] = f.kind.takes === "value" ? raw : f.kind.parse(`--${name}`, raw as never);
      given = true;
    }
    if (f.shorthand && !given && opts[key(f.shorthand.name)]) into[field] = f.shorthand.value;
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
