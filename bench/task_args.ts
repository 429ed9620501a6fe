/**
 * A benchmark's own arguments: `deno task bench:X -- --flag v` hands the script the `--` too
 * (Deno 2.9), which `parseArgs` would refuse as a positional argument.
 */

/** `Deno.args` without the `--` that `deno task` passes on. */
export const taskArgs = (): string[] => Deno.args.filter((a) => a !== "--");
