import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { InputError } from "../../src/errors.js";

const tok = new ByteTokenizer();

describe("ByteTokenizer", () => {
  it("has 256 byte ids plus BOS, EOS and PAD", () => {
    expect([tok.vocabSize, tok.bosId, tok.eosId, tok.padId]).toEqual([259, 256, 257, 258]);
  });

  it("round-trips ASCII and non-ASCII text through UTF-8 bytes", () => {
    for (const text of ["", "hello world", "héllo wörld ✓", "日本語のテキスト", "emoji 🎉🧪 and tabs\t\n"]) {
      const ids = tok.encode(text);
      expect(ids).toEqual([...Buffer.from(text, "utf8")]);
      expect(tok.decode(ids)).toBe(text);
    }
  });

  it("adds BOS on request and leaves special tokens out of decoded text", () => {
    const ids = tok.encode("ab", { addBos: true });
    expect(ids).toEqual([256, 97, 98]);
    expect(tok.decode([...ids, tok.eosId, tok.padId])).toBe("ab");
  });

  it("decodes partial or invalid UTF-8 to U+FFFD instead of throwing", () => {
    const euro = tok.encode("€"); // 3 bytes
    expect(euro).toHaveLength(3);
    expect(tok.decode(euro.slice(0, 2))).toBe("\uFFFD");
    expect(tok.decode([0xff, 0x41])).toBe("\uFFFDA");
    expect(tok.decode([...tok.encode("x"), ...euro.slice(0, 1)])).toBe("x\uFFFD");
  });

  it("refuses ids outside the vocabulary", () => {
    expect(() => tok.decode([97, 259])).toThrow(InputError);
    expect(() => tok.decode([-1])).toThrow(/index 0/);
    expect(() => tok.decode([1.5])).toThrow(InputError);
  });

  it("applies the chat template: BOS, <|role|> headers, EOS after each message", () => {
    const ids = tok.applyChatTemplate(
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
      { addGenerationPrompt: true },
    );
    expect(ids[0]).toBe(tok.bosId);
    expect(ids.filter((t) => t === tok.eosId)).toHaveLength(2);
    expect(tok.decode(ids)).toBe("<|system|>\nBe brief.<|user|>\nhi<|assistant|>\n");
    expect(ids.slice(-tok.encode("<|assistant|>\n").length)).toEqual(tok.encode("<|assistant|>\n"));
  });

  it("extends a conversation's tokens exactly: prompt + reply + EOS is a prefix of the next turn", () => {
    const turn1 = [{ role: "user", content: "Translate: pig" }];
    const prompt = tok.applyChatTemplate(turn1, { addGenerationPrompt: true });
    const reply = [...tok.encode("igpay"), tok.eosId];
    const next = tok.applyChatTemplate(
      [...turn1, { role: "assistant", content: "igpay" }, { role: "user", content: "again" }],
      { addGenerationPrompt: true },
    );
    expect(next.slice(0, prompt.length + reply.length)).toEqual([...prompt, ...reply]);
    expect(tok.applyChatTemplate(turn1)).toEqual(prompt.slice(0, prompt.length - tok.encode("<|assistant|>\n").length));
  });
});
