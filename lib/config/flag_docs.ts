/**
 * docs/configuration.md's flag reference, rendered from the flag declarations (`flags.ts`), the
 * source --help is built from too: one table per group of flags, in --help order, with each
 * flag's argument, default, aliases, allowed values and help line. The page's prose around it is
 * hand-written; the rendered part sits between two marker lines, which `deno task docs`
 * (`lib/commands/docs.ts`) replaces; tests/config/flag_docs_test.ts fails when
 * the page differs from what would be rendered. Known gap: `--prefill`/`--decode` take an
 * optional second value that commander cannot read, so their row is written here, not declared.
 */

import { CONFIG_FLAG_HELP } from "./cli.ts";
import { ACCESS_FLAGS } from "./access_flags.ts";
import type { Flag, Section } from "./flag.ts";
import { ENTRIES, isFlag } from "./flags.ts";
import { SERVER_FLAGS } from "./server_flags.ts";

/** The line before the rendered reference. */
export const BEGIN_MARKER =
  "<!-- flags:begin: rendered by `deno task docs` from lib/config/*_flags.ts; edit those -->";
/** The line after it. */
export const END_MARKER = "<!-- flags:end -->";

/** A group of flags: the top-level fields of one declaration file, or one config section. */
type Group = "server" | "access" | "routing" | Section;

/**
 * Each group's heading and the sentence under it (links are relative to docs/). A sentence stays
 * within deno fmt's 100 columns, which would otherwise wrap it and differ from the rendering.
 */
const GROUPS: Record<Group, { title: string; about: string }> = {
  server: {
    title: "Server",
    about: "Listen addresses, workers at start, the policy, timeouts, logs, headers.",
  },
  access: {
    title: "Access",
    about: "CORS and the control plane's keys: see [Keys and roles](http-api.md#keys-and-roles).",
  },
  health: {
    title: "Health checks",
    about: "How workers are probed, and when they leave and come back.",
  },
  circuitBreaker: {
    title: "Circuit breaker",
    about: "Per worker: failures that open it, and how it closes again.",
  },
  retry: {
    title: "Retries",
    about: "A failed attempt is retried on another worker after a jittered backoff.",
  },
  loadMonitor: {
    title: "Load monitor",
    about: "Load reports polled from the workers, and the overload veto.",
  },
  admission: {
    title: "Admission",
    about: "A token bucket in front of routing: see [Admission](operations.md#admission).",
  },
  front: {
    title: "Client limits",
    about: "Ours, on the own front: see [Client limits](http-api.md#client-limits).",
  },
  tls: {
    title: "TLS",
    about: "HTTPS on the main port and mTLS toward workers: see [TLS](operations.md#tls).",
  },
  tenants: {
    title: "Tenants",
    about: "Who a request belongs to: see [Tenant rate limits](operations.md#tenant-rate-limits).",
  },
  tenantRateLimit: {
    title: "Tenant rate limits",
    about: "Per router or per cluster: see [Tenant rate limits](operations.md#tenant-rate-limits).",
  },
  routing: {
    title: "Routing",
    about: "Settings every policy shares: see [Routing](routing.md).",
  },
  leastLoad: {
    title: "least_load and the wait model",
    about: "See [Policies](routing.md#policies).",
  },
  prefixHash: {
    title: "prefix_hash",
    about: "See [Policies](routing.md#policies).",
  },
  manual: {
    title: "manual and sticky sessions",
    about: "See [Sticky sessions](routing.md#sticky-sessions-and-per-model-policies).",
  },
  cacheAware: {
    title: "cache_aware and KV events",
    about:
      "See [cache_aware](routing.md#cache_aware) and [KV-event mode](routing.md#kv-event-mode).",
  },
  pd: {
    title: "Prefill/decode disaggregation",
    about: "See [Prefill/decode disaggregation](routing.md#prefilldecode-disaggregation).",
  },
  mesh: {
    title: "HA mesh",
    // SMG hard-codes the SWIM timing; the defaults are its documented ones (memberlist's LAN).
    about: "See [High availability](high-availability.md); SWIM timing as SMG's docs.",
  },
  discovery: {
    title: "Kubernetes discovery",
    about: "See [Kubernetes discovery](operations.md#kubernetes-discovery).",
  },
  tracing: {
    title: "Tracing",
    about: "OpenTelemetry spans over OTLP; `OTEL_*` tune them: see [Tracing](tracing.md).",
  },
};

/** The group of a declared field: its section, or the file that declares a top-level one. */
function groupOf(section: Section | null, field: string): Group {
  if (section !== null) return section;
  if (field in SERVER_FLAGS) return "server";
  if (field in ACCESS_FLAGS) return "access";
  return "routing";
}

/** One table row: the flag as typed, its default, what it does. */
type Row = [string, string, string];

/** A table cell's text: pipes escaped, so a cell never splits. */
const cell = (s: string) => s.replaceAll("|", "\\|");

const ARGUMENT = { nothing: "", value: " <value>", values: " <values...>" } as const;

/** The default as --help shows it, or `none`/`off` when --help shows none. */
function defaultOf(f: Flag<unknown>): string {
  const d = f.default;
  if (d === false) return "off";
  if (d === null || (typeof d === "object" && Object.keys(d).length === 0)) return "none";
  return `\`${f.kind.show(d as NonNullable<unknown>)}\``;
}

function rowOf(f: Flag<unknown>): Row {
  const aliases = (f.aliases ?? []).map((a) => `\`--${a}\``);
  const name = `\`--${f.name}${ARGUMENT[f.kind.takes]}\`` +
    (aliases.length > 0 ? ` (also ${aliases.join(", ")})` : "");
  const allowed = f.kind.allowed
    ? ` Allowed: ${f.kind.allowed.map((v) => `\`${v}\``).join(", ")}.`
    : "";
  const help = f.help.endsWith(".") ? f.help : `${f.help}.`;
  return [name, defaultOf(f), help + allowed];
}

/** Rows no declaration holds: read by hand in `cli.ts`, placed in their group. */
const EXTRA_ROWS: Partial<Record<Group, { first: boolean; rows: Row[] }>> = {
  server: {
    first: true,
    rows: [["`--config <file>`", "none", `${CONFIG_FLAG_HELP} (see [Config file](#config-file)).`]],
  },
  pd: {
    first: false,
    rows: [
      [
        "`--prefill <url> [<bootstrap-port>|none]`",
        "none",
        "a prefill worker, repeatable; its bootstrap port, or `none`.",
      ],
      ["`--decode <url>`", "none", "a decode worker, repeatable."],
    ],
  },
};

/** A markdown table as deno fmt lays it out: every column padded to its widest cell. */
function table(rows: Row[]): string[] {
  const head: Row = ["flag", "default", "what it does"];
  const all = [head, ...rows].map((r) => r.map(cell) as Row);
  const widths = head.map((_, i) => Math.max(3, ...all.map((r) => [...r[i]].length)));
  const line = (r: string[]) =>
    `| ${r.map((c, i) => c + " ".repeat(widths[i] - [...c].length)).join(" | ")} |`;
  return [line(all[0]), line(widths.map((w) => "-".repeat(w))), ...all.slice(1).map(line)];
}

/** The flag reference, from `BEGIN_MARKER` to `END_MARKER`, both lines included. */
export function renderFlagDocs(): string {
  const groups: { group: Group; rows: Row[] }[] = [];
  for (const { section, field, setting } of ENTRIES) {
    if (!isFlag(setting)) continue;
    const group = groupOf(section, field);
    if (groups.at(-1)?.group !== group) groups.push({ group, rows: [] });
    const rows = groups.at(-1)!.rows;
    if (setting.shorthand) {
      const s = setting.shorthand;
      rows.push([
        `\`--${s.name}\``,
        "off",
        `${s.help}: sets \`--${setting.name}\` to \`${s.value}\`.`,
      ]);
    }
    rows.push(rowOf(setting));
  }
  const out = [BEGIN_MARKER, ""];
  for (const { group, rows } of groups) {
    const extra = EXTRA_ROWS[group];
    const all = extra === undefined ? rows : extra.first ? [...extra.rows, ...rows] : [
      ...rows,
      ...extra.rows,
    ];
    out.push(`### ${GROUPS[group].title}`, "", GROUPS[group].about, "", ...table(all), "");
  }
  out.push(END_MARKER);
  return out.join("\n");
}

/** The page `deno task docs` rewrites. */
export const CONFIGURATION_PAGE = new URL("../../docs/configuration.md", import.meta.url);
