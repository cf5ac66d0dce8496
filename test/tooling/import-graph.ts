/**
 * The import graph of `src/`, read with the TypeScript parser: every static import and export
 * from, every dynamic `import()` of a literal path, each marked type-only or not. The layer guard
 * (`layers.test.ts`) checks it against the README's architecture table.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** One import of one `src/` module by another, both as paths relative to `src/` (`rollouts/pool.ts`). */
export interface ImportEdge {
  readonly from: string;
  readonly to: string;
  /** `import type`, `export type`, or every named binding marked `type`: erased at run time. */
  readonly typeOnly: boolean;
  /** An `import()` expression: loaded when it runs, not when the importer loads. */
  readonly dynamic: boolean;
}

/** Every `.ts` / `.cts` file under `dir`, relative to it, generated protobuf code included. */
function sourceFiles(dir: string, prefix = ""): string[] {
  return readdirSync(path.join(dir, prefix), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.posix.join(prefix, entry.name);
    if (entry.isDirectory()) return sourceFiles(dir, relative);
    return /\.c?ts$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [relative] : [];
  });
}

/** Whether every binding of an import or export declaration is marked `type`. */
function allBindingsTypeOnly(clause: ts.NamedImportBindings | ts.NamedExportBindings | undefined): boolean {
  if (clause === undefined || !("elements" in clause) || clause.elements.length === 0) return false;
  return clause.elements.every((element) => element.isTypeOnly);
}

/** The edges out of one file's text. */
function edgesOf(file: string, text: string, known: ReadonlySet<string>): ImportEdge[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const edges: ImportEdge[] = [];
  const add = (specifier: string, typeOnly: boolean, dynamic: boolean): void => {
    if (!specifier.startsWith(".")) return;
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
    const to = [target.replace(/\.c?js$/, ".ts"), target.replace(/\.cjs$/, ".cts")].find((f) => known.has(f));
    if (to !== undefined) edges.push({ from: file, to, typeOnly, dynamic });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly || (clause.name === undefined && allBindingsTypeOnly(clause.namedBindings)));
      add(node.moduleSpecifier.text, typeOnly, false);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly || allBindingsTypeOnly(node.exportClause), false);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      add(node.arguments[0].text, false, true);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      add(node.argument.literal.text, true, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

/** Every import edge between the modules under `srcDir`. */
export function importGraph(srcDir: string): ImportEdge[] {
  const files = sourceFiles(srcDir);
  const known = new Set(files);
  return files.flatMap((file) => edgesOf(file, readFileSync(path.join(srcDir, file), "utf8"), known));
}

/**
 * The cycles among `edges` (strongly connected components of two or more files), each as its
 * sorted file list, found with Tarjan's algorithm.
 */
export function cycles(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) {
        connect(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of next.keys()) if (!index.has(node)) connect(node);
  return found;
}
