/**
 * Module references written as `path/to/file.ts:ExportName` (NexRL's `evaluator_module_path`).
 * @module
 */

/** A module file and the export to take from it. */
export interface ModuleReference {
  /** The file, as written (relative or absolute). */
  modulePath: string;
  /** The export; `"default"` when the reference names none. */
  exportName: string;
}

/** Splits `file.ts:ClassName` at the last colon followed by an identifier; without one, the default export. */
export function parseModuleReference(text: string): ModuleReference {
  const match = /^(.+):([A-Za-z_$][\w$]*)$/.exec(text);
  return match ? { modulePath: match[1]!, exportName: match[2]! } : { modulePath: text, exportName: "default" };
}

/** The inverse of {@link parseModuleReference}. */
export function formatModuleReference(reference: ModuleReference): string {
  return reference.exportName === "default" ? reference.modulePath : `${reference.modulePath}:${reference.exportName}`;
}
