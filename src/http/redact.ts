/**
 * Keeps API keys out of error messages, logs and captured headers.
 *
 * @module
 */

/** What a secret is replaced by. */
export const REDACTED = "***";

/**
 * Secrets shorter than this are not replaced inside text: no real API key is that short, and
 * hiding, say, every "e" would garble every message (the run warns that such a key looks wrong).
 * Secret headers are hidden whatever their length.
 */
export const MIN_REDACTED_LENGTH = 8;

/** Replaces known secret values in text, and secret headers' values in header maps. */
export class Redactor {
  private secrets: string[];
  private readonly secretHeaders: Set<string>;

  /**
   * @param secrets the values to hide (values shorter than `MIN_REDACTED_LENGTH` are ignored).
   * @param secretHeaders header names whose values are always hidden (case-insensitive).
   */
  constructor(secrets: ReadonlyArray<string | undefined>, secretHeaders: readonly string[] = []) {
    this.secrets = [
      ...new Set(secrets.filter((s): s is string => typeof s === "string" && s.length >= MIN_REDACTED_LENGTH)),
    ].sort((a, b) => b.length - a.length);
    this.secretHeaders = new Set(secretHeaders.map((h) => h.toLowerCase()));
  }

  /** Hides `secret` from now on too (e.g. a token obtained in exchange for the API key); empty values are ignored. */
  add(secret: string): void {
    if (secret === "" || this.secrets.includes(secret)) return;
    this.secrets = [...this.secrets, secret].sort((a, b) => b.length - a.length);
  }

  /** `text` with every occurrence of a secret replaced by `***`. */
  text(text: string): string {
    return this.secrets.reduce((out, secret) => out.split(secret).join(REDACTED), text);
  }

  /** A deep copy of a parsed JSON value with secrets replaced inside every string. */
  value(value: unknown): unknown {
    if (typeof value === "string") return this.text(value);
    if (Array.isArray(value)) return value.map((item) => this.value(item));
    if (value && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, this.value(child)]));
    }
    return value;
  }

  /** A copy of `headers` with secret headers' values, and secrets inside any value, replaced. */
  headers(headers: Readonly<Record<string, string>>): Record<string, string> {
    return Object.fromEntries(
      Object.entries(headers).map(([name, value]) => [
        name,
        this.secretHeaders.has(name.toLowerCase()) ? REDACTED : this.text(value),
      ]),
    );
  }
}
