/**
 * A TypeDoc plugin: sorts the package root's exports into the categories that `src/index.ts`
 * names. Each `export { … } from` there carries a `/** @category Name *\/` comment; TypeDoc reads
 * `@category` only from a symbol's own comment, so this plugin copies the tag from the export list
 * onto each exported symbol. The export list stays the one place that says what is public and
 * where its documentation goes.
 *
 * It also links the guides (docs/guides/*.md, the readme and project documents) to the API: an
 * inline code span that is exactly a name the package root exports (`` `BaseTrainer` ``)
 * becomes a `{@linkcode}` to it in the HTML, so the guides stay plain Markdown when read as files.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath, URL } from "node:url";
import { Comment, CommentTag, Converter, ReflectionKind } from "typedoc";
import ts from "typescript";

/** The root module's name in the docs (`@module` in src/index.ts). */
const ROOT_MODULE = "nexrl";

/** Exported name → category, from the `@category` comments of the export declarations of `file`. */
function exportCategories(file) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const categories = new Map();
  for (const statement of source.statements) {
    if (!ts.isExportDeclaration(statement) || !statement.exportClause || !ts.isNamedExports(statement.exportClause))
      continue;
    const tag = ts.getJSDocTags(statement).find((t) => t.tagName.text === "category");
    const category = typeof tag?.comment === "string" ? tag.comment.trim() : undefined;
    if (category === undefined)
      throw new Error(
        `${file}: an export list has no @category comment (line ${source.getLineAndCharacterOfPosition(statement.getStart()).line + 1})`,
      );
    for (const element of statement.exportClause.elements) categories.set(element.name.text, category);
  }
  return categories;
}

/**
 * `parts` with each code span that is exactly an exported name turned into a link to it.
 * @param {import("typedoc").CommentDisplayPart[]} parts
 * @param {ReadonlySet<string>} exported
 */
function linkExportedNames(parts, exported) {
  return parts.map((part) => {
    const name = part.kind === "code" ? /^`([A-Za-z_$][\w$]*)`$/.exec(part.text)?.[1] : undefined;
    if (name === undefined || !exported.has(name)) return part;
    return { kind: "inline-tag", tag: "@linkcode", text: `"${ROOT_MODULE}".${name} | ${name}` };
  });
}

/** @param {import("typedoc").Application} app */
export function load(app) {
  const indexFile = fileURLToPath(new URL("../src/index.ts", import.meta.url));
  /** @type {ReadonlySet<string> | undefined} */
  let exported;
  const exportedNames = () => (exported ??= new Set(exportCategories(indexFile).keys()));
  app.converter.on(Converter.EVENT_CREATE_DOCUMENT, (_context, document) => {
    document.content = linkExportedNames(document.content, exportedNames());
  });
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    if (context.project.readme) context.project.readme = linkExportedNames(context.project.readme, exportedNames());
    const categories = exportCategories(indexFile);
    const root = context.project.getChildByName(ROOT_MODULE);
    if (!root || !root.isDeclaration() || root.kind !== ReflectionKind.Module)
      throw new Error(`typedoc-categories: no module named ${ROOT_MODULE}`);
    for (const child of root.children ?? []) {
      const category = categories.get(child.name);
      if (category === undefined) continue;
      child.comment ??= new Comment();
      child.comment.blockTags.push(new CommentTag("@category", [{ kind: "text", text: category }]));
    }
  });
}
