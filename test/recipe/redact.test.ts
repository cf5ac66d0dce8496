import { describe, expect, it } from "vitest";
import { isSecretKey, redactSecrets, redactText } from "../../src/recipe/index.js";
import { redactUrlPasswords, secretRedactor } from "../../src/recipe/redact.js";

describe("redactSecrets", () => {
  it("masks non-empty values under secret-looking keys, at any depth", () => {
    const config = {
      service: {
        tinker_service: { api_key: "tk-1", base_url: null },
        weaver_service: { api_key: "" },
        inference_service: { api_key: null, max_tokens: 100, tokenizer: "Qwen/Qwen3-8B" },
      },
      teachers: [{ api_key: "t-2", base_model: "m" }],
      headers: {
        Authorization: "Bearer x",
        "x-token": "y",
        hf_token: "z",
        client_secret: "s",
        db_password: "p",
        key_list: ["a"],
      },
    };
    expect(redactSecrets(config, {})).toEqual({
      service: {
        tinker_service: { api_key: "***", base_url: null },
        weaver_service: { api_key: "" },
        inference_service: { api_key: null, max_tokens: 100, tokenizer: "Qwen/Qwen3-8B" },
      },
      teachers: [{ api_key: "***", base_model: "m" }],
      headers: {
        Authorization: "***",
        "x-token": "***",
        hf_token: "***",
        client_secret: "***",
        db_password: "***",
        key_list: ["a"],
      },
    });
    expect(config.service.tinker_service.api_key).toBe("tk-1");
  });

  it("masks the values of secret environment variables wherever they appear", () => {
    const env = {
      TINKER_API_KEY: "tk-abcdefgh",
      GITHUB_TOKEN: "gh-12345678",
      MY_SECRET_X: "s3cr3t-value",
      PASSWORD: "hunter22",
      SHORT_TOKEN: "abc",
      HOME: "/home/someone",
    };
    const config = {
      a: "tk-abcdefgh",
      b: "https://h/?k=gh-12345678&t=tk-abcdefgh",
      c: ["s3cr3t-value"],
      d: "hunter22",
      e: "abc",
      f: "/home/someone/x",
    };
    expect(redactSecrets(config, env)).toEqual({
      a: "***",
      b: "https://h/?k=***&t=***",
      c: ["***"],
      d: "***",
      e: "abc",
      f: "/home/someone/x",
    });
    expect(redactText("key tk-abcdefgh", env)).toBe("key ***");
  });

  it("recognises secret key names without catching ordinary ones", () => {
    for (const name of [
      "api_key",
      "tinker_api_key",
      "apiKey",
      "token",
      "auth_token",
      "secret",
      "secret_access_key",
      "password",
      "passwd",
      "authorization",
      "credentials",
      "private_key",
    ]) {
      expect(isSecretKey(name), name).toBe(true);
    }
    for (const name of [
      "max_tokens",
      "tokenizer",
      "tokenizer_path",
      "key_list",
      "base_url",
      "monkey",
      "keep_batch_order",
    ]) {
      expect(isSecretKey(name), name).toBe(false);
    }
  });
});

describe("URL passwords", () => {
  const url = "redis://worker:hunter2-redis@redis.internal:6380/1";

  it("are masked in printed recipes and in any text, whatever their length", () => {
    const config = { rollout_worker: { distributed: { engine: "redis", url } } };
    expect(redactSecrets(config, {}).rollout_worker.distributed.url).toBe("redis://worker:***@redis.internal:6380/1");
    expect(redactUrlPasswords("cannot reach redis://:pw@h:1 or rediss://u:p%40ss@h")).toBe(
      "cannot reach redis://:***@h:1 or rediss://u:***@h",
    );
    expect(redactUrlPasswords("http://user@host/path:x@y")).toBe("http://user@host/path:x@y");
  });

  it("are masked alone too, by the run's redactor", () => {
    const redact = secretRedactor({ rollout_worker: { distributed: { url } } }, {});
    expect(redact(`AUTH failed for hunter2-redis at ${url}`)).toBe(
      "AUTH failed for *** at redis://worker:***@redis.internal:6380/1",
    );
  });
});
