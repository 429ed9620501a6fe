/**
 * The import graph of this repository's own files, for the layout checks: which .ts files a file
 * imports by a relative path, read from its text (`import … from`, `export … from` and bare
 * `import "…"`, type-only ones too; dynamic `import()` is not an edge), and the cycles of such a
 * graph. Known gap: the text is not parsed, so an import statement inside a template string
 * would count; none of ours starts a line that way.
 */

/** A static import or re-export with a relative specifier, at the start of a line. */
const STATIC_IMPORT = new RegExp(
  String.raw`^(?:import|export)(?:\s+type)?\s*` +
    String.raw`(?:\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*(?:\{[^}]*\}|\*\s+as\s+\w+))?)` +
    String.raw`\s*from\s*["'](\.{1,2}/[^"']+)["']` +
    String.raw`|^import\s*["'](\.{1,2}/[^"']+)["']`,
  "gm",
);

/** The relative specifiers `text` imports or re-exports from, statically, in order. */
export function relativeImports(text: string): string[] {
  return [...text.matchAll(STATIC_IMPORT)].map((m) => m[1] ?? m[2]);
}

/**
 * Every .ts file under `dirs` of `root` (paths relative to `root`, `/`-separated) and the files
 * its relative imports resolve to, relative to `root` as well.
 */
export async function importGraph(root: URL, dirs: string[]): Promise<Map<string, string[]>> {
  const g = new Map<string, string[]>();
  for (const dir of dirs) {
    for await (const file of tsFiles(new URL(`${dir}/`, root))) {
      const from = file.href.slice(root.href.length);
      const targets = relativeImports(await Deno.readTextFile(file))
        .map((spec) => new URL(spec, file).href.slice(root.href.length));
      g.set(from, [...new Set(targets)]);
    }
  }
  return g;
}

/** The .ts files under `dir`, recursively; none if it does not exist. */
async function* tsFiles(dir: URL): AsyncGenerator<URL> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  for (const e of entries.sort((a, b) => a.name < b.name ? -1 : 1)) {
    if (e.isDirectory) yield* tsFiles(new URL(`${e.name}/`, dir));
    else if (e.isFile && e.name.endsWith(".ts")) yield new URL(e.name, dir);
  }
}

/**
 * The cycles of `g`: its strongly connected components of more than one file, and any file that
 * imports itself; each sorted.
 */
export function cycles(g: Map<string, string[]>): string[][] {
  // Tarjan's algorithm.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (g.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return found;
}
