/**
 * Reads a `--config FILE`: YAML or JSON (by the extension, `.json`, `.yaml` or `.yml`, else by
 * the content: a file starting with `{` is JSON), into the top-level settings with the line of
 * each key (`FileSettings`, applied by `file_settings.ts`). A plain scalar that YAML would read
 * as a number keeps its text (`api-key: 00042` stays `00042`; `port: 8080` is parsed as the flag
 * parses it). Loaded on demand by `cli.ts`: the YAML parser costs ~40 ms at start otherwise.
 * A file that cannot be read or parsed throws a one-line `ConfigError` with the file and line.
 */

import {
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseDocument,
} from "yaml";
import { ConfigError } from "../core/errors.ts";
import type { FileSettings, FileValue } from "./file_settings.ts";

/**
 * Environment variables the YAML parser reads on every parse (its debug switches). Deno throws
 * on a read it has no permission for, so a command that takes `--config` needs them in
 * `--allow-env`, as the tasks give.
 */
export const YAML_ENV_VARS: readonly string[] = ["LOG_TOKENS", "LOG_STREAM"];

/** Reads and parses `path`. */
export async function loadConfigFile(path: string): Promise<FileSettings> {
  const missing = YAML_ENV_VARS.filter((variable) =>
    Deno.permissions.querySync({ name: "env", variable }).state !== "granted"
  );
  if (missing.length > 0) {
    // Asked here, in one line, rather than by a permission prompt in the middle of parsing.
    throw new ConfigError(
      `--config ${path}: the YAML parser reads ${missing.join(" and ")}; ` +
        `give deno --allow-env=${missing.join(",")} (the tasks do)`,
      "--config",
    );
  }
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
      throw new ConfigError(
        `--config ${path}: no permission to read it (give deno --allow-read=${path})`,
        "--config",
      );
    }
    if (e instanceof Deno.errors.NotFound) {
      throw new ConfigError(`--config ${path}: no such file`, "--config");
    }
    throw new ConfigError(`--config ${path}: cannot read it: ${(e as Error).message}`, "--config");
  }
  return parseConfigText(path, text);
}

/** Whether `path` holding `text` is JSON (else YAML). */
export function isJson(path: string, text: string): boolean {
  const ext = /\.([a-z]+)$/i.exec(path)?.[1]?.toLowerCase();
  if (ext === "json") return true;
  if (ext === "yaml" || ext === "yml") return false;
  return text.trimStart().startsWith("{");
}

/** Parses a config file's `text`; `path` names it in errors. */
export function parseConfigText(path: string, text: string): FileSettings {
  const json = isJson(path, text);
  if (json) checkJson(path, text);
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const line = e.linePos?.[0].line ?? 1;
    const what = e.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
    throw new ConfigError(`${path}:${line}: malformed ${json ? "JSON" : "YAML"}: ${what}`);
  }
  const top = doc.contents;
  if (top === null || (isScalar(top) && top.value === null)) return { path, entries: [] };
  if (!isMap(top)) {
    const line = top.range ? lines.linePos(top.range[0]).line : 1;
    throw new ConfigError(
      `${path}:${line}: expected a mapping of flag names to values, e.g. 'port: 30000'`,
    );
  }
  const entries = top.items.map((pair) => {
    const k = pair.key as Node | null;
    const line = k?.range ? lines.linePos(k.range[0]).line : 1;
    const key = isScalar(k) ? String(k.value) : String(k);
    return { key, line, value: valueOf(pair.value as Node | null, doc, text) };
  });
  return { path, entries };
}

/** JSON.parse's verdict on `text`, as one line with the line number. */
function checkJson(path: string, text: string): void {
  try {
    JSON.parse(text);
  } catch (e) {
    const msg = (e as Error).message;
    const at = /\(line (\d+) column \d+\)/.exec(msg);
    const line = at ? Number(at[1]) : /end of JSON/.test(msg) ? text.split("\n").length : 1;
    const what = msg
      .replace(/, ".*" is not valid JSON$/s, "")
      .replace(/ in JSON at position \d+.*$/s, "");
    throw new ConfigError(`${path}:${line}: malformed JSON: ${what}`);
  }
}

/** A node as settings read it: see `FileValue`. */
function valueOf(node: Node | null, doc: Document, text: string): FileValue {
  if (node === null) return null;
  if (isAlias(node)) return valueOf(node.resolve(doc) ?? null, doc, text);
  if (isScalar(node)) {
    const v = node.value;
    if (v === null || v === undefined) return null;
    if (typeof v === "boolean") return v;
    // A plain number keeps its text: the flag parses it, and a key is never reformatted.
    if (typeof v !== "string" && node.type === "PLAIN" && node.range) {
      return text.slice(node.range[0], node.range[1]).trim();
    }
    return String(v);
  }
  if (isSeq(node)) return node.items.map((i) => valueOf(i as Node | null, doc, text));
  if (isMap(node)) {
    const out: Record<string, FileValue> = {};
    for (const p of node.items) {
      const k = p.key as Node | null;
      out[isScalar(k) ? String(k.value) : String(k)] = valueOf(p.value as Node | null, doc, text);
    }
    return out;
  }
  return null;
}
