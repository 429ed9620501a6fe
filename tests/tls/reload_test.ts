/**
 * Certificate reload: a pair replaced on disk is served once the directory is quiet; a change
 * elsewhere in the directory reloads nothing; an invalid new pair is logged and the served one
 * kept; `reload()` (what SIGHUP calls) reads at once, even a change no watch can see.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import { createLogger } from "../../lib/core/log.ts";
import { readCertifiedKey } from "../../lib/tls/pem.ts";
import type { CertifiedKey } from "../../lib/tls/pem.ts";
import { CertificateReloader, type ReloadOutcome } from "../../lib/tls/reload.ts";
import { hiddenLinks, NO_OPENSSL, OPENSSL, type Pair, withPki } from "../../support/certs.ts";
import { Waiters } from "../../support/wait.ts";

/** Writes `pair` to `dir/tls.crt` and `dir/tls.key` by rename, as deploy tools do. */
async function install(dir: string, pair: { certPem: string; keyPem: string }): Promise<void> {
  await Deno.writeTextFile(`${dir}/.tls.crt.tmp`, pair.certPem);
  await Deno.writeTextFile(`${dir}/.tls.key.tmp`, pair.keyPem);
  await Deno.rename(`${dir}/.tls.crt.tmp`, `${dir}/tls.crt`);
  await Deno.rename(`${dir}/.tls.key.tmp`, `${dir}/tls.key`);
}

interface Harness {
  reloader: CertificateReloader;
  applied: CertifiedKey[];
  outcomes: ReloadOutcome[];
  lines: string[];
  waiters: Waiters;
}

async function withReloader(
  dir: string,
  first: Pair,
  fn: (h: Harness) => Promise<void>,
): Promise<void> {
  await install(dir, first);
  const h: Harness = {
    applied: [],
    outcomes: [],
    lines: [],
    waiters: new Waiters(),
    reloader: null as unknown as CertificateReloader,
  };
  const current = await readCertifiedKey("c", `${dir}/tls.crt`, "k", `${dir}/tls.key`);
  h.reloader = new CertificateReloader({
    certPath: `${dir}/tls.crt`,
    keyPath: `${dir}/tls.key`,
    current,
    apply: (next) => h.applied.push(next),
    log: createLogger({ level: "debug", sink: (l) => h.lines.push(l) }),
    clock: systemClock,
    debounceMs: 100,
  });
  h.reloader.onReload = (o) => {
    h.outcomes.push(o);
    h.waiters.poke();
  };
  h.reloader.start();
  try {
    await fn(h);
  } finally {
    await h.reloader.stop();
  }
}

Deno.test({
  name: "tls reload: new files are served, unrelated changes are not, a bad pair is kept out" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const live = `${pki.dir}/live`;
      await Deno.mkdir(live);
      await withReloader(live, pki.server, async (h) => {
        await install(live, pki.server2);
        await h.waiters.wait(() => h.applied.length === 1, "the new pair applied");
        assert.equal(h.applied[0].subject, "CN=server-2");
        assert.equal(h.reloader.current.subject, "CN=server-2");
        assert.ok(h.lines.some((l) => /tls certificate reloaded.*reason="files changed"/.test(l)));

        // Another file in the directory: read, found unchanged, nothing applied.
        const seen = h.outcomes.length;
        await Deno.writeTextFile(`${live}/unrelated.txt`, "x");
        await h.waiters.wait(() => h.outcomes.length > seen, "a reload after the change");
        assert.equal(h.outcomes.at(-1), "unchanged");
        assert.equal(h.applied.length, 1);

        // A key that is not the certificate's: logged, the served pair kept.
        const failedBefore = h.outcomes.length;
        await install(live, { certPem: pki.server.certPem, keyPem: pki.server2.keyPem });
        await h.waiters.wait(
          () => h.outcomes.slice(failedBefore).includes("failed"),
          "the bad pair refused",
        );
        assert.equal(h.applied.length, 1);
        assert.equal(h.reloader.current.subject, "CN=server-2");
        assert.ok(
          h.lines.some((l) =>
            /level=error.*tls certificate reload failed; still serving the previous certificate/
              .test(l) && /is not the private key of the certificate/.test(l)
          ),
          h.lines.join("\n"),
        );
      });
    }),
});

Deno.test({
  name: "tls reload: reload() reads at once a change that no watch can see (SIGHUP)" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const tls = await hiddenLinks(pki, pki.server);
      const current = await readCertifiedKey("c", tls.cert, "k", tls.key);
      const applied: CertifiedKey[] = [];
      const r = new CertificateReloader({
        certPath: tls.cert,
        keyPath: tls.key,
        current,
        apply: (next) => applied.push(next),
        log: createLogger({ level: "error", sink: () => {} }),
        clock: systemClock,
      });
      r.start();
      try {
        assert.equal(await r.reload("SIGHUP"), "unchanged");
        await tls.point(pki.server2);
        assert.equal(await r.reload("SIGHUP"), "reloaded");
        assert.deepEqual(applied.map((a) => a.subject), ["CN=server-2"]);
      } finally {
        await r.stop();
      }
    }),
});
