import { ConfigError } from "../errors.js";
/**
 * Where a remote service lives and the key to it: from options, else from the environment.
 *
 * @module
 */

/** How one service names its settings. */
export interface EndpointSpec {
  /** The service's name in messages, e.g. `Tinker`. */
  service: string;
  /** Environment variable of the API key, e.g. `TINKER_API_KEY`. */
  keyVar: string;
  /** Environment variable of the base URL, e.g. `TINKER_BASE_URL`. */
  urlVar: string;
  /** Base URL when neither the options nor the environment give one. */
  defaultUrl: string;
}

/** Explicit settings; each falls back to the environment. */
export interface EndpointOptions {
  /** API key; default: the environment's `keyVar`. */
  apiKey?: string;
  /** Base URL; default: the environment's `urlVar`, else the service's public URL. */
  baseUrl?: string;
  /** Environment to read (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** A resolved endpoint. */
export interface Endpoint {
  /** The API key. */
  apiKey: string;
  /** The base URL. */
  baseUrl: string;
}

/**
 * Resolves the API key and base URL of a service.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} when neither the options nor the environment hold a key.
 */
export function resolveEndpoint(options: EndpointOptions, spec: EndpointSpec): Endpoint {
  const env = options.env ?? process.env;
  const apiKey = options.apiKey || env[spec.keyVar];
  if (!apiKey) {
    throw new ConfigError(
      `no ${spec.service} API key: set ${spec.keyVar} or pass apiKey (for a local \`nexrl serve\`, any non-empty value works)`,
    );
  }
  return { apiKey, baseUrl: options.baseUrl || env[spec.urlVar] || spec.defaultUrl };
}
