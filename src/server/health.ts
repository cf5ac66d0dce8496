/**
 * Liveness endpoints: `GET /healthz` and `GET /health` (also under `/api/v1/`), answering
 * `{"status":"ok"}` without authentication or faults.
 *
 * @module
 */
import type { RequestHandler } from "./handler.js";
import { requestPath, sendJson } from "./io.js";

const PATHS = new Set(["/healthz", "/health", "/api/v1/healthz", "/api/v1/health"]);

/** Answers the liveness endpoints. */
export const healthHandler: RequestHandler = async (req, res) => {
  if (req.method !== "GET" || !PATHS.has(requestPath(req))) return false;
  sendJson(res, 200, { status: "ok" });
  return true;
};
