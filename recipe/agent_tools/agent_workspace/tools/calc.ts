/**
 * The `calc` tool: evaluates an integer expression with `+`, `-`, `*` and parentheses (no
 * `eval`: a small recursive-descent parser).
 */

/** The value of `expression`; throws on anything but integers, + - * and parentheses. */
export function evaluateExpression(expression: string): number {
  const tokens = expression.match(/\d+|[-+*()]|\S/g) ?? [];
  let at = 0;
  const peek = (): string | undefined => tokens[at];
  const take = (): string => {
    const token = tokens[at++];
    if (token === undefined) throw new Error(`"${expression}" ends too early`);
    return token;
  };
  const factor = (): number => {
    const token = take();
    if (token === "-") return -factor();
    if (token === "(") {
      const value = sum();
      if (take() !== ")") throw new Error(`"${expression}" misses a closing parenthesis`);
      return value;
    }
    if (/^\d+$/.test(token)) return Number(token);
    throw new Error(`"${token}" is not allowed in "${expression}": use integers, + - * and parentheses`);
  };
  const product = (): number => {
    let value = factor();
    while (peek() === "*") {
      take();
      value *= factor();
    }
    return value;
  };
  const sum = (): number => {
    let value = product();
    while (peek() === "+" || peek() === "-") value = take() === "+" ? value + product() : value - product();
    return value;
  };
  const value = sum();
  if (at !== tokens.length) throw new Error(`unexpected "${tokens[at]}" in "${expression}"`);
  return value;
}

/** The `calc` tool: the value of expression `e`, as text. */
export function calc(args: { e?: unknown }): string {
  return String(evaluateExpression(String(args.e ?? "")));
}
