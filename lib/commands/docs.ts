/**
 * `deno task docs`: rewrites the parts of docs/ that are rendered from the code, each between
 * its two marker lines: the flag reference of docs/configuration.md (`lib/config/flag_docs.ts`)
 * and the table of worker failures of docs/http-api.md (`lib/workers/failures.ts`). Their tests
 * fail when a page differs from what this would write.
 */

import {
  BEGIN_MARKER,
  CONFIGURATION_PAGE,
  END_MARKER,
  renderFlagDocs,
} from "../config/flag_docs.ts";
import { FAILURES_BEGIN, FAILURES_END, renderFailureTable } from "../workers/failures.ts";

/** `page` with what lies from `begin` to `end` (both lines included) replaced by `rendered`. */
export function splice(page: string, begin: string, end: string, rendered: string): string {
  const b = page.indexOf(begin);
  const e = page.indexOf(end);
  if (b < 0 || e < b) throw new Error(`the lines ${begin} and ${end} are missing`);
  return page.slice(0, b) + rendered + page.slice(e + end.length);
}

/** Each rendered part: its page, its markers and its text. */
const PARTS = [
  { page: CONFIGURATION_PAGE, begin: BEGIN_MARKER, end: END_MARKER, render: renderFlagDocs },
  {
    page: new URL("../../docs/http-api.md", import.meta.url),
    begin: FAILURES_BEGIN,
    end: FAILURES_END,
    render: renderFailureTable,
  },
];

if (import.meta.main) {
  for (const p of PARTS) {
    const page = await Deno.readTextFile(p.page);
    await Deno.writeTextFile(p.page, splice(page, p.begin, p.end, p.render()));
    console.log(`wrote ${p.page.pathname}`);
  }
}
