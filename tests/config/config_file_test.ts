/**
 * Reading `--config FILE`: YAML and JSON chosen by extension or content, each key with its
 * line, numbers kept as written, and malformed files refused in one line with the file and the
 * line at fault.
 */

import assert from "node:assert/strict";
import { isJson, loadConfigFile, parseConfigText } from "../../lib/config/config_file.ts";
import { ConfigError } from "../../lib/core/errors.ts";

/** Asserts that parsing `text` as `path` is refused with one line matching `want`. */
function refused(path: string, text: string, want: RegExp): void {
  assert.throws(() => parseConfigText(path, text), (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, want);
    assert.ok(!e.message.includes("\n"), e.message);
    return true;
  });
}

Deno.test("config file: YAML keys with their lines, values as flags read them", () => {
  const f = parseConfigText(
    "smg.yaml",
    [
      "# the gateway",
      "port: 8080",
      "",
      "worker-urls:",
      "  - http://a:1",
      "  - http://b:2",
      "disable-retries: true",
      "api-key: 00042",
      "retry-jitter-factor: 0.50",
      "policy: 'round_robin'",
      "selector: {app: sglang}",
      "queue-size:",
      "kv-events: off",
    ].join("\n"),
  );
  assert.equal(f.path, "smg.yaml");
  assert.deepEqual(f.entries, [
    { key: "port", line: 2, value: "8080" },
    { key: "worker-urls", line: 4, value: ["http://a:1", "http://b:2"] },
    { key: "disable-retries", line: 7, value: true },
    // Numbers keep their text: a key is never 42, a factor keeps its zero.
    { key: "api-key", line: 8, value: "00042" },
    { key: "retry-jitter-factor", line: 9, value: "0.50" },
    { key: "policy", line: 10, value: "round_robin" },
    { key: "selector", line: 11, value: { app: "sglang" } },
    { key: "queue-size", line: 12, value: null },
    // YAML 1.2: `off` is a word, not false.
    { key: "kv-events", line: 13, value: "off" },
  ]);
});

Deno.test("config file: JSON, by extension or by content", () => {
  const text = '{\n  "port": 8080,\n  "worker-urls": ["http://a:1"],\n  "log-json": true\n}\n';
  for (const path of ["smg.json", "smg.conf", "smg"]) {
    assert.ok(isJson(path, text), path);
    assert.deepEqual(parseConfigText(path, text).entries, [
      { key: "port", line: 2, value: "8080" },
      { key: "worker-urls", line: 3, value: ["http://a:1"] },
      { key: "log-json", line: 4, value: true },
    ]);
  }
  assert.equal(isJson("smg.yaml", text), false, "the extension decides");
  assert.equal(isJson("smg.yml", "port: 1"), false);
  assert.equal(isJson("smg.conf", "port: 1"), false);
});

Deno.test("config file: an empty or comment-only file sets nothing", () => {
  assert.deepEqual(parseConfigText("a.yaml", "").entries, []);
  assert.deepEqual(parseConfigText("a.yaml", "# nothing yet\n").entries, []);
});

Deno.test("config file: malformed files are refused with the file and the line", () => {
  refused(
    "smg.yaml",
    "port: 1\nworker-urls: [http://a:1\npolicy: random\n",
    /^smg\.yaml:3: malformed YAML: /,
  );
  refused(
    "smg.yaml",
    "port: 1\nhost: a\nport: 2\n",
    /^smg\.yaml:3: malformed YAML: Map keys must be unique$/,
  );
  refused(
    "smg.yaml",
    "port: 1\nworker-urls:\n\t- http://a:1\n",
    /^smg\.yaml:3: malformed YAML: Tabs are not allowed as indentation$/,
  );
  refused(
    "smg.json",
    '{\n  "port": 1\n  "host": "a"\n}',
    /^smg\.json:3: malformed JSON: Expected ',' or '}' after property value$/,
  );
  refused("smg.json", '{\n  "port": 1,\n}', /^smg\.json:3: malformed JSON: /);
  // YAML that is not JSON is refused in a .json file, comments included.
  refused("smg.json", '{\n  # a comment\n  "port": 1\n}', /^smg\.json:2: malformed JSON: /);
  refused("smg.json", '{"port": 1', /^smg\.json:1: malformed JSON: /);
  refused(
    "smg.json",
    '{"port": 1, "port": 2}',
    /^smg\.json:1: malformed JSON: Map keys must be unique$/,
  );
  refused("smg.yaml", "- port\n- 1\n", /^smg\.yaml:1: expected a mapping of flag names to values/);
  refused(
    "smg.yaml",
    "\n\njust words\n",
    /^smg\.yaml:3: expected a mapping of flag names to values/,
  );
});

Deno.test("config file: a missing file is named", async () => {
  await assert.rejects(loadConfigFile("/tmp/smg-no-such-config.yaml"), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.message, "--config /tmp/smg-no-such-config.yaml: no such file");
    return true;
  });
});
