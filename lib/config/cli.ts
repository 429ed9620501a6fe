/**
 * The `smg [launch]` command line: SMG's flag names and defaults, parsed with commander into a
 * `GatewayConfig`. Commander's options and `--help` are built from the flag declarations
 * (`flags.ts`), and each given value is written where its declaration says. `--config FILE`
 * (YAML or JSON, `config_file.ts`) is read first and the command line wins over it, a list
 * included. Unknown flags and malformed values throw `ConfigError` (one line; main exits 2);
 * `validate.ts` checks ranges.
 */

import { Command, CommanderError, Option } from "commander";
import { ConfigError } from "../core/errors.ts";
import type { Flag } from "./flag.ts";
import { defaultConfig, ENTRIES, holder, isFlag } from "./flags.ts";
import {
  applyFileSettings,
  type ConfigSources,
  FILE_KEYS,
  type FileSettings,
} from "./file_settings.ts";
import { bootstrapPort } from "./kinds.ts";
import { closest } from "./suggest.ts";
import type { GatewayConfig, PrefillSpec } from "./types.ts";

/** `--config`'s --help line (the flag is read before commander parses: see `takeConfigFlag`). */
export const CONFIG_FLAG_HELP = "read flags from a YAML or JSON file; flags given here win";

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
  // Read before commander parses (see `takeConfigFlag`); declared here for --help.
  program.addOption(new Option("--config <file>", CONFIG_FLAG_HELP));
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

/** The gateway's settings, and which of them a config file set. */
export interface ParsedArgs {
  /** The settings over SMG's defaults (not validated yet). */
  config: GatewayConfig;
  /** Flags whose value came from the config file, with its `path:line: key`. */
  sources: ConfigSources;
}

/** `args` without `deno task`'s `--` and the optional `launch`/`start`. */
function commandFlags(args: string[]): string[] {
  const rest = args[0] === "--" ? args.slice(1) : args;
  return rest[0] === "launch" || rest[0] === "start" ? rest.slice(1) : rest;
}

/** Takes `--config FILE` (or `--config=FILE`) out of `args`: the rest, and the file or null. */
export function takeConfigFlag(args: string[]): { argv: string[]; path: string | null } {
  const argv: string[] = [];
  let path: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    let value: string | undefined;
    if (a === "--config") value = args[++i];
    else if (a.startsWith("--config=")) value = a.slice("--config=".length);
    else {
      argv.push(a);
      continue;
    }
    if (value === undefined || value === "" || value.startsWith("--")) {
      throw new ConfigError("--config: a file is required", "--config");
    }
    if (path !== null) throw badConfigTwice(path, value);
    path = value;
  }
  return { argv, path };
}

const badConfigTwice = (a: string, b: string) =>
  new ConfigError(`--config: given twice ('${a}', '${b}'); give one file`, "--config");

/**
 * Parses gateway flags (after an optional `launch`/`start`), reading the `--config` file first
 * when one is given (and --help or --version is not). Throws `ConfigError` for an unknown flag
 * or key, a malformed value or file, `HelpShown` after --help.
 */
export async function loadGatewayArgs(args: string[], version = "0.0.0"): Promise<ParsedArgs> {
  const flags = commandFlags(args);
  const { path } = takeConfigFlag(flags);
  const helpOnly = flags.some((a) => ["--help", "-h", "--version", "-V"].includes(a));
  const file = path === null || helpOnly
    ? null
    : await (await import("./config_file.ts")).loadConfigFile(path);
  return parseGatewayCommandLine(args, version, file);
}

/**
 * Parses gateway flags over `file`'s settings (already read: see `loadGatewayArgs`); the command
 * line wins. Throws as `loadGatewayArgs` does.
 */
export function parseGatewayCommandLine(
  args: string[],
  version = "0.0.0",
  file: FileSettings | null = null,
): ParsedArgs {
  const { argv: withLegs, path } = takeConfigFlag(commandFlags(args));
  if (
    path !== null && file === null && !withLegs.some((a) => /^(--help|-h|--version|-V)$/.test(a))
  ) {
    throw new ConfigError(`--config ${path}: not read (use loadGatewayArgs)`, "--config");
  }
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
  const sources = file === null ? new Map() : applyFileSettings(config, file);
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
    if (f.shorthand && !given && opts[key(f.shorthand.name)]) {
      into[field] = f.shorthand.value;
      given = true;
    }
    if (given) sources.delete(`--${f.name}`);
  }
  // The command line's legs replace the file's, as any list does.
  if (prefill.length > 0) {
    config.pd.prefill = prefill;
    sources.delete("--prefill");
  }
  if (decode.length > 0) {
    config.pd.decode = decode;
    sources.delete("--decode");
  }
  return { config, sources };
}

/** `parseGatewayCommandLine`'s settings alone (no config file). */
export function parseGatewayArgs(args: string[], version = "0.0.0"): GatewayConfig {
  return parseGatewayCommandLine(args, version).config;
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
      port = bootstrapPort("--prefill", next);
    }
    prefill.push({ url, bootstrapPort: port });
  }
  return { argv, prefill, decode };
}

/** Turns commander's message into one line that names the flag. */
function commanderProblem(e: CommanderError): string {
  const msg = e.message.replace(/^error: /, "");
  const unknown = /unknown option '([^']+)'/.exec(msg);
  if (unknown) {
    const near = closest(unknown[1], [...FILE_KEYS, "config"]);
    return `${unknown[1]}: unknown flag${near ? `; did you mean --${near}?` : ""} (see smg --help)`;
  }
  const missing = /option '([^' ]+)[^']*' argument missing/.exec(msg);
  if (missing) return `${missing[1]}: a value is required`;
  const excess = /too many arguments/.exec(msg);
  if (excess) return `unexpected argument (${msg}); flags start with --`;
  return msg;
}
