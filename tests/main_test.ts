/**
 * The command line as a user meets it: bad configuration prints one line and exits 2, --help
 * and --version exit 0, and `smg launch ...` serves like `smg ...`; HTTPS on the main port with
 * both fronts under the narrowed net grant, and SIGHUP reloading the certificate.
 */

import assert from "node:assert/strict";
import { hiddenLinks, httpsClient, NO_OPENSSL, OPENSSL, withPki } from "../support/certs.ts";
import { gatewayListenArgs, runFlags, spawnGateway } from "../support/gateway_process.ts";

const main = new URL("../main.ts", import.meta.url).pathname;

async function run(args: string[], extraFlags: string[] = []) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...runFlags(main, extraFlags), main, ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("main: bad configuration fails at start with one line and exit code 2", async () => {
  const cases: [string[], RegExp][] = [
    [["--no-such-flag"], /--no-such-flag: unknown flag/],
    [["--port", "abc"], /--port: invalid value 'abc'; expected an integer/],
    [["--port", "70000"], /--port: invalid value '70000'/],
    [["--policy", "fastest"], /--policy: invalid value 'fastest'; allowed: random, round_robin/],
    [["--worker-urls", "localhost:8000"], /--worker-urls: invalid value 'localhost:8000'/],
    [["--retry-jitter-factor", "2"], /--retry-jitter-factor: invalid value '2'; allowed: 0..1/],
    [
      ["--policy", "bucket"],
      /--policy: invalid value 'bucket'; bucket routes the PD prefill leg only; use --prefill-policy bucket/,
    ],
    [["--queue-size", "5", "--queue-timeout-secs", "0"], /--queue-timeout-secs/],
    [["--tls-cert-path", "/etc/smg/tls.crt"], /--tls-key-path: required with --tls-cert-path/],
    [["--client-key-path", "/k.pem"], /--client-cert-path: required with --client-key-path/],
    // No --allow-read of it: the file cannot be read, and the message says how to allow it.
    [
      ["--tls-cert-path", "/nonexistent/tls.crt", "--tls-key-path", "/nonexistent/tls.key"],
      /^smg: --tls-cert-path: cannot read '\/nonexistent\/tls.crt': no read permission/,
    ],
    // The task's narrow --allow-env cannot load the Kubernetes client: refused, not ignored.
    [["--service-discovery", "--selector", "app=x"], /--service-discovery: run with --allow-env/],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, args.join(" "));
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `one line: ${r.stderr}`);
    assert.match(lines[0], message);
  }
});

Deno.test("main: a bad --config file fails at start with the file, the line and the key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-config-" });
  try {
    const write = async (name: string, text: string) => {
      await Deno.writeTextFile(`${dir}/${name}`, text);
      return `${dir}/${name}`;
    };
    const cases: [string, string[], RegExp][] = [
      [
        await write("a.yaml", "port: 8080\nworker_urls: [http://a:1]\n"),
        [],
        /a\.yaml:2: unknown key 'worker_urls'; did you mean 'worker-urls'\?$/,
      ],
      [
        await write("b.yaml", "host: 127.0.0.1\nport: 70000\n"),
        [],
        /b\.yaml:2: port: invalid value '70000'/,
      ],
      [await write("c.json", '{\n  "port": 1,\n}'), [], /c\.json:3: malformed JSON: /],
      [
        await write("d.yaml", "disable-retries: yes\n"),
        [],
        /d\.yaml:1: disable-retries: expected true or false, not 'yes'$/,
      ],
      // The command line wins: its bad value is reported as the flag's.
      [await write("e.yaml", "port: 8080\n"), ["--port", "x"], /^smg: --port: invalid value 'x'/],
    ];
    for (const [path, args, message] of cases) {
      const r = await run(["--config", path, ...args], [`--allow-read=${dir}`]);
      assert.equal(r.code, 2, path);
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.length, 1, `one line: ${r.stderr}`);
      assert.match(lines[0], message);
    }
    // `deno task start` reads no files: the one line says what to give.
    const denied = await run(["--config", `${dir}/a.yaml`]);
    assert.equal(denied.code, 2);
    assert.match(
      denied.stderr.trim(),
      /^smg: --config \S+a\.yaml: no permission to read it \(give deno --allow-read=\S+a\.yaml\)$/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: --help lists the flags and --version prints it, both exit 0", async () => {
  const help = await run(["--help"]);
  assert.equal(help.code, 0, help.stderr);
  for (
    const flag of [
      "--worker-urls",
      "--policy",
      "--retry-max-retries",
      "--cb-failure-threshold",
      "--max-concurrent-requests",
      "--tls-cert-path",
      "--tls-key-path",
      "--client-cert-path",
      "--client-key-path",
      "--ca-cert-paths",
    ]
  ) {
    assert.ok(help.stdout.includes(flag), flag);
  }
  const v = await run(["--version"]);
  assert.equal(v.code, 0);
  assert.match(v.stdout, /^\d+\.\d+\.\d+/);
});

Deno.test("main: `smg launch` serves and SIGTERM exits 0", async () => {
  const gw = await spawnGateway(main, [
    "launch",
    ...gatewayListenArgs(),
    "--policy",
    "random",
    "--shutdown-grace-period-secs",
    "0",
  ]);
  const r = await fetch(`${gw.url}/liveness`);
  assert.equal(await r.text(), "OK");
  gw.child.kill("SIGTERM");
  assert.equal(await gw.exited, 0);
});

/** Flags of a loopback gateway with no workers that exits at once on SIGTERM. */
const LOOPBACK = [
  ...gatewayListenArgs(),
  "--shutdown-grace-period-secs",
  "0",
];

Deno.test({
  name: "main: an unusable certificate or key exits 2 naming the flag and the path" + NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const allow = [`--allow-read=${pki.dir}`];
      const cases: [string[], RegExp][] = [
        [
          ["--tls-cert-path", `${pki.dir}/missing.crt`, "--tls-key-path", pki.server.key],
          /^smg: --tls-cert-path: cannot read '.*\/missing\.crt': no such file$/,
        ],
        [
          ["--tls-cert-path", pki.server.cert, "--tls-key-path", pki.server.cert],
          /^smg: --tls-key-path: '.*\/server\.pem' holds no PEM private key$/,
        ],
        [
          ["--tls-cert-path", pki.server.cert, "--tls-key-path", pki.client.key],
          /^smg: --tls-key-path: '.*\/client\.key' is not the private key of the certificate/,
        ],
      ];
      for (const [args, message] of cases) {
        const r = await run([...LOOPBACK, ...args], allow);
        assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
        assert.match(r.stderr.trim(), message);
      }
    }),
});

Deno.test({
  name: "main: --tls-cert-path serves https, and SIGHUP reloads a change no watch sees" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const tls = await hiddenLinks(pki, pki.server);
      const gw = await spawnGateway(
        main,
        [
          ...LOOPBACK,
          "--tls-cert-path",
          tls.cert,
          "--tls-key-path",
          tls.key,
        ],
        undefined,
        [`--allow-read=${pki.dir}`],
      );
      const first = httpsClient([pki.caPem]);
      const second = httpsClient([pki.ca2Pem]);
      try {
        assert.match(gw.url, /^https:/);
        assert.match(gw.stderr(), /tls certificate loaded.*subject="CN=server-1"/);
        const r = await fetch(`${gw.url}/liveness`, { client: first });
        assert.equal(await r.text(), "OK");
        await tls.point(pki.server2);
        const from = gw.stderr().length;
        gw.child.kill("SIGHUP");
        await gw.waitForOutput(
          /tls certificate reloaded" module=tls reason=SIGHUP subject="CN=server-2"/,
          from,
        );
        const r2 = await fetch(`${gw.url}/liveness`, { client: second });
        assert.equal(await r2.text(), "OK");
      } finally {
        first.close();
        second.close();
        gw.child.kill("SIGTERM");
        assert.equal(await gw.exited, 0);
      }
    }),
});

Deno.test({
  name: "main: --http-server deno serves https under the narrowed net grant" + NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const gw = await spawnGateway(
        main,
        [
          ...LOOPBACK,
          "--http-server",
          "deno",
          "--tls-cert-path",
          pki.server.cert,
          "--tls-key-path",
          pki.server.key,
        ],
        undefined,
        [`--allow-read=${pki.dir}`],
      );
      const client = httpsClient([pki.caPem]);
      try {
        assert.match(gw.url, /^https:/);
        // Deno.serve listens behind the TLS listener on a loopback port picked at start.
        assert.match(gw.stderr(), /net_grant="narrow: [^"]*\b127\.0\.0\.1(,|")/);
        const r = await fetch(`${gw.url}/liveness`, { client });
        assert.equal(await r.text(), "OK");
      } finally {
        client.close();
        gw.child.kill("SIGTERM");
        assert.equal(await gw.exited, 0, gw.stderr());
      }
    }),
});
