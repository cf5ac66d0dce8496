/**
 * A TypeDoc plugin: sorts the package root's exports into the categories that `src/index.ts`
 * names. Each `export { … } from` there carries a `/** @category Name *\/` comment; TypeDoc reads
 * `@category` only from a symbol's own comment, so this plugin copies the tag from the export list
 * onto each exported symbol. The export list stays the one place that says what is public and
 * where its documentation goes.
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

/** @param {import("typedoc").Application} app */
export function load(app) {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    const categories = exportCategories(fileURLToPath(new URL("../src/index.ts", import.meta.url)));
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
