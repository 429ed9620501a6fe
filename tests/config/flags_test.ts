/**
 * The flag declarations as one source: defaults, --help, parsing and checks all come from them,
 * so each declaration must agree with itself, and every flag must land in its own field.
 */

import assert from "node:assert/strict";
import process from "node:process";
import { HelpShown, parseGatewayArgs } from "../../lib/config/cli.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import type { Flag } from "../../lib/config/flag.ts";
import { ENTRIES, type Entry, holder, isFlag } from "../../lib/config/flags.ts";
import { float, int, intList } from "../../lib/config/kinds.ts";
import type { GatewayConfig } from "../../lib/config/types.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";

/** Every flag, with where it goes. */
const FLAGS = ENTRIES.flatMap((e) => (isFlag(e.setting) ? [{ ...e, flag: e.setting }] : []));

/** The value of `e`'s field in `c`. */
const valueOf = (c: GatewayConfig, e: Entry) => holder(c, e.section)[e.field];

Deno.test("flags: every declared default passes the flag's own check unchanged", () => {
  for (const { flag } of FLAGS) {
    if (!flag.check || flag.default === null) continue;
    const d = flag.default as NonNullable<unknown>;
    assert.deepEqual(flag.check(`--${flag.name}`, structuredClone(d)), d, flag.name);
  }
});

Deno.test("flags: names and aliases are unique, and every field is declared once", () => {
  const names = FLAGS.flatMap(({ flag }) => [
    flag.name,
    ...(flag.aliases ?? []),
    ...(flag.shorthand ? [flag.shorthand.name] : []),
  ]);
  assert.equal(new Set(names).size, names.length);
  const fields = ENTRIES.map((e) => `${e.section}.${e.field}`);
  assert.equal(new Set(fields).size, fields.length);
  // defaultConfig() has exactly the declared fields.
  const d = defaultConfig() as unknown as Record<string, Record<string, unknown>>;
  const leaves = Object.entries(d).flatMap(([k, v]) =>
    ENTRIES.some((e) => e.section === k) ? Object.keys(v).map((f) => `${k}.${f}`) : [`null.${k}`]
  );
  assert.deepEqual(leaves.sort(), fields.sort());
});

Deno.test("flags: defaultConfig() is the declared defaults, a fresh copy each call", () => {
  const a = defaultConfig();
  for (const e of ENTRIES) assert.deepEqual(valueOf(a, e), e.setting.default, e.field);
  a.requestIdHeaders.push("x-mine");
  a.mesh.port = 1;
  const b = defaultConfig();
  assert.ok(!b.requestIdHeaders.includes("x-mine"));
  assert.equal(b.mesh.port, 39527);
});

/** An argument list that sets `f` to something other than its default, and the value it gives. */
function otherValue(f: Flag<unknown>): { args: string[]; want: unknown } | null {
  const d = f.default;
  switch (f.kind.takes) {
    case "nothing":
      return { args: [], want: true };
    case "values":
      if (f.name === "control-plane-api-keys") {
        return {
          args: ["a:A:admin:k1"],
          want: [{ id: "a", name: "A", role: "admin", key: "k1" }],
        };
      }
      return f.name.endsWith("selector")
        ? { args: ["k=v"], want: { k: "v" } }
        : { args: ["x-a", "x-b"], want: ["x-a", "x-b"] };
  }
  if (typeof d === "number" || d === null) {
    // A number (int or float) or a nullable value; strings and choices tell themselves apart.
    const raw = typeof d === "number" ? String(d + 1) : "7";
    try {
      return { args: [raw], want: f.kind.parse("--x", raw) };
    } catch {
      return null;
    }
  }
  return null;
}

Deno.test("flags: each flag writes its own field and nothing else", () => {
  let tried = 0;
  for (const e of FLAGS) {
    const other = otherValue(e.flag);
    if (other === null) continue;
    const c = parseGatewayArgs([`--${e.flag.name}`, ...other.args]);
    assert.deepEqual(valueOf(c, e), other.want, e.flag.name);
    const expected = defaultConfig();
    holder(expected, e.section)[e.field] = other.want;
    assert.deepEqual(c, expected, e.flag.name);
    tried++;
  }
  assert.ok(tried > 80, `${tried} flags tried`);
});

Deno.test("flags: a malformed value of each kind is refused, naming the spelling used", () => {
  const bad: Record<string, string> = {
    int: "1.5",
    float: "lots",
    choices: "no-such-choice",
    intList: "1,x",
    selector: "novalue",
    modelIdFrom: "pod",
  };
  const refusal = (f: Flag<unknown>, raw: string) => {
    try {
      f.kind.parse("--x", raw as never);
      return "";
    } catch (e) {
      return (e as Error).message;
    }
  };
  const kindOf = (f: Flag<unknown>): string | null => {
    const kind: unknown = f.kind;
    if (kind === int) return "int";
    if (kind === float) return "float";
    if (kind === intList) return "intList";
    if (f.name === "model-id-from") return "modelIdFrom";
    if (f.name.endsWith("selector")) return "selector";
    // Strings, lists and switches take anything.
    return /allowed: /.test(refusal(f, bad.choices)) ? "choices" : null;
  };
  const seen = new Set<string>();
  for (const { flag } of FLAGS) {
    const kind = kindOf(flag);
    if (kind === null) continue;
    seen.add(kind);
    for (const name of [flag.name, ...(flag.aliases ?? [])]) {
      assert.throws(() => parseGatewayArgs([`--${name}`, bad[kind]]), (e) => {
        assert.ok(e instanceof ConfigError, `${name}: ${e}`);
        assert.ok(e.message.startsWith(`--${name}: invalid value `), e.message);
        assert.ok(!e.message.includes("\n"));
        return true;
      });
    }
  }
  assert.deepEqual([...seen].sort(), Object.keys(bad).sort());
});

Deno.test("flags: a value out of range is refused by validation, naming the flag", () => {
  // Each number flag with a check refuses -1000 (every range here excludes it).
  const on = ["--enable-mesh", "--mesh-advertise-host", "10.0.0.1", "--service-discovery"];
  let tried = 0;
  for (const { flag } of FLAGS) {
    const kind: unknown = flag.kind;
    if (!flag.check || (kind !== int && kind !== float)) continue;
    const args = [...on, "--selector", "a=b", `--${flag.name}`, "-1000"];
    assert.throws(() => validateConfig(parseGatewayArgs(args)), (e: unknown) => {
      assert.ok(e instanceof ConfigError, `${flag.name}: ${e}`);
      assert.ok(e.message.startsWith(`--${flag.name}: invalid value '-1000'; `), e.message);
      return true;
    }, flag.name);
    tried++;
  }
  assert.ok(tried > 50, `${tried} flags tried`);
});

/** Runs `smg --help` and returns what it printed. */
function help(): string {
  const original = process.stdout.write;
  let out = "";
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
    return true;
  }) as typeof process.stdout.write;
  try {
    assert.throws(() => parseGatewayArgs(["--help"]), HelpShown);
  } finally {
    process.stdout.write = original;
  }
  return out;
}

Deno.test("flags: --help is the declarations: name, argument, help and shown default", () => {
  const lines = help().split("\n");
  const lineOf = (name: string) => lines.find((l) => l.trimStart().startsWith(`--${name} `));
  for (const { flag } of FLAGS) {
    const line = lineOf(flag.name);
    assert.ok(line, flag.name);
    const arg = { nothing: "", value: " <value>", values: " <values...>" }[flag.kind.takes];
    assert.ok(line.trimStart().startsWith(`--${flag.name}${arg} `), line);
    const d = flag.default;
    const shown = d === null || d === false || (typeof d === "object" && !Object.keys(d).length)
      ? ""
      : ` (default: ${flag.kind.show(d as NonNullable<unknown>)})`;
    assert.ok(line.endsWith(`  ${flag.help}${shown}`), line);
    for (const a of flag.aliases ?? []) assert.equal(lineOf(a), undefined, `alias ${a} is hidden`);
    if (flag.shorthand) {
      assert.ok(lineOf(flag.shorthand.name)?.endsWith(`  ${flag.shorthand.help}`), flag.name);
    }
  }
  // A sample, written out, so a change to the derivation shows here too.
  assert.ok(
    lines.some((l) =>
      /^ {2}--request-id-headers <values\.\.\.> +headers a client request id is read from \(default: x-request-id x-correlation-id x-trace-id request-id\)$/
        .test(l)
    ),
  );
  assert.ok(
    lines.some((l) =>
      /^ {2}--worker-urls <values\.\.\.> +worker base URLs registered at start$/.test(l)
    ),
  );
});
