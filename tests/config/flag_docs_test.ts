/**
 * docs/configuration.md's flag reference is what the flag declarations render: a changed flag
 * changes the page in the same commit (`deno task docs` rewrites it).
 */

import assert from "node:assert/strict";
import {
  BEGIN_MARKER,
  CONFIGURATION_PAGE,
  END_MARKER,
  renderFlagDocs,
} from "../../lib/config/flag_docs.ts";
import { splice } from "../../lib/commands/docs.ts";
import { ENTRIES, isFlag } from "../../lib/config/flags.ts";

Deno.test("flag docs: docs/configuration.md holds the reference the declarations render", async () => {
  const page = await Deno.readTextFile(CONFIGURATION_PAGE);
  const rendered = renderFlagDocs();
  const begin = page.indexOf(BEGIN_MARKER);
  const end = page.indexOf(END_MARKER);
  assert.ok(begin >= 0 && end > begin, "docs/configuration.md has the flags:begin/end lines");
  assert.ok(
    page.slice(begin, end + END_MARKER.length) === rendered,
    "docs/configuration.md's flag reference differs from the flag declarations: run `deno task docs`",
  );
});

Deno.test("flag docs: every flag, alias and shorthand has its row, in --help order", () => {
  const rendered = renderFlagDocs();
  let at = 0;
  for (const { setting } of ENTRIES) {
    if (!isFlag(setting)) continue;
    const names = [
      ...(setting.shorthand ? [setting.shorthand.name] : []),
      setting.name,
    ];
    for (const name of names) {
      const row = rendered.indexOf(`| \`--${name}`, at);
      assert.ok(row >= at, `--${name} has a row after the previous flag's`);
      at = row;
    }
    for (const a of setting.aliases ?? []) assert.ok(rendered.includes(`\`--${a}\``), a);
  }
  for (const extra of ["--config", "--prefill", "--decode"]) {
    assert.ok(rendered.includes(`| \`${extra} `), extra);
  }
});

Deno.test("flag docs: splicing replaces only what lies between the markers", () => {
  const page = `# Title\n\nprose\n\n${BEGIN_MARKER}\nold\n${END_MARKER}\n\nafter\n`;
  assert.equal(
    splice(page, BEGIN_MARKER, END_MARKER, `${BEGIN_MARKER}\nnew\n${END_MARKER}`),
    `# Title\n\nprose\n\n${BEGIN_MARKER}\nnew\n${END_MARKER}\n\nafter\n`,
  );
  assert.throws(() => splice("# no markers\n", BEGIN_MARKER, END_MARKER, "x"), /flags:begin/);
});
